"""Tests of the streaming Telegram Desktop export reader (fixtures, eval exports, damage)."""

from __future__ import annotations

import json
import tracemalloc
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from chatseek_core.errors import InvalidArgument, MalformedExport, NotFound
from chatseek_ingest.export import (
    ExportRecord,
    ExportSource,
    export_slug,
    iter_export,
    open_export,
    resolve_media,
)
from chatseek_ingest.model import ExportChat, ExportMedia, ExportMessage, ExportWarning

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "exports"
EVAL = Path(__file__).resolve().parents[3].parent / "shared" / "eval"
EVAL_GLOBS = (
    "import-fixtures/chat-history-manager/*/result.json",
    "tgif/exports/*/result.json",
    "tgif/merged/*/result.json",
    "locomo/exports/*/result.json",
    "irc/exports/*/result.json",
    "ru/exports/*/result.json",
)
BIG_EXPORT_MESSAGES = 50_000
PEAK_BYTES_LIMIT = 4 * 1024 * 1024
BASE_UNIX = 1_704_103_200


def read(path: Path, **kwargs: Any) -> list[ExportRecord]:
    return list(iter_export(open_export(path), **kwargs))


def messages(records: list[ExportRecord]) -> list[ExportMessage]:
    return [r for r in records if isinstance(r, ExportMessage)]


def chats(records: list[ExportRecord]) -> list[ExportChat]:
    return [r for r in records if isinstance(r, ExportChat)]


def warnings_of(records: list[ExportRecord], kind: str) -> list[ExportWarning]:
    return [r for r in records if isinstance(r, ExportWarning) and r.kind == kind]


def by_id(records: list[ExportRecord]) -> dict[int, ExportMessage]:
    return {m.msg_id: m for m in messages(records)}


def plain(mid: int, text: str, sender: int = 1001, **extra: Any) -> dict[str, Any]:
    return {
        "id": mid,
        "type": "message",
        "date": "2024-01-01T10:00:00",
        "date_unixtime": str(BASE_UNIX + mid),
        "from": f"User {sender}",
        "from_id": f"user{sender}",
        "text": text,
        "text_entities": [{"type": "plain", "text": text}],
        **extra,
    }


def serialise(doc: dict[str, Any]) -> tuple[bytes, list[tuple[int, int, int]]]:
    """tdesktop-like bytes of ``doc`` plus (end offset, chat id, msg id) of every message.

    ``doc`` is a chat object or an account object with ``chats.list``; message objects are
    written one per line so their end offsets are known exactly.
    """
    out = bytearray()
    ends: list[tuple[int, int, int]] = []

    def chat(obj: dict[str, Any]) -> None:
        out.extend(b"{")
        for key, value in obj.items():
            if key == "messages":
                continue
            out.extend(json.dumps(key).encode() + b": " + json.dumps(value).encode() + b",\n")
        out.extend(b'"messages": [\n')
        for i, message in enumerate(obj["messages"]):
            if i:
                out.extend(b",\n")
            out.extend(json.dumps(message, ensure_ascii=False).encode())
            ends.append((len(out), obj["id"], message["id"]))
        out.extend(b"\n]}")

    if "chats" in doc:
        out.extend(b'{"about": "account",\n"personal_information": {"user_id": 1},\n')
        out.extend(b'"chats": {"about": "chats", "list": [\n')
        for i, obj in enumerate(doc["chats"]["list"]):
            if i:
                out.extend(b",\n")
            chat(obj)
        out.extend(b"\n]}}\n")
    else:
        chat(doc)
        out.extend(b"\n")
    return bytes(out), ends


def write(tmp_path: Path, data: bytes, name: str = "result.json") -> Path:
    target = tmp_path / name
    target.write_bytes(data)
    return target


# --- fixtures: shapes ---


def test_single_chat_export_yields_its_header_then_messages_in_file_order() -> None:
    records = read(FIXTURES / "personal_modern")
    assert isinstance(records[0], ExportChat)
    assert records[0].chat_id == 1002
    assert records[0].type == "private"
    assert records[0].title == "Bob Builder"
    assert records[0].export_type == "personal_chat"
    ids = [m.msg_id for m in messages(records)]
    assert ids == list(range(1, 25))
    assert all(m.chat_id == 1002 for m in messages(records))


def test_every_chat_type_gets_its_marked_id_and_normalised_type() -> None:
    records = read(FIXTURES / "account")
    got = {(c.type, c.chat_id, c.raw_id, c.is_left) for c in chats(records)}
    assert got == {
        ("saved", 1001, 1001, False),
        ("private", 1002, 1002, False),
        ("bot", 5005, 5005, False),
        ("group", -4321, 4321, False),
        ("supergroup", -1001500000001, 1500000001, False),
        ("channel", -1000000000777, 777, False),
        ("channel", -1000000000888, 888, False),
        ("supergroup", -1001600000002, 1600000002, True),
    }


def test_account_export_skips_other_sections_and_streams_each_chat_after_its_header() -> None:
    records = read(FIXTURES / "account")
    current: int | None = None
    for record in records:
        if isinstance(record, ExportChat):
            current = record.chat_id
        elif isinstance(record, ExportMessage):
            assert record.chat_id == current
    assert len(messages(records)) == 12
    assert [c.location for c in chats(records)][-1] == "left_chats.list[0]"


def test_saved_messages_without_a_name_get_a_default_title() -> None:
    saved = chats(read(FIXTURES / "account"))[0]
    assert (saved.type, saved.title, saved.export_type) == (
        "saved",
        "Saved Messages",
        "saved_messages",
    )


def test_a_chat_of_unknown_type_is_skipped_with_a_warning_and_reading_goes_on() -> None:
    records = read(FIXTURES / "account")
    skipped = warnings_of(records, "skipped")
    assert len(skipped) == 1
    assert skipped[0].location == "chats.list[7]"
    assert "mystery_chat" in skipped[0].message
    assert all(m.text != "unknown kind of chat" for m in messages(records))
    assert chats(records)[-1].title == "Old Housing Group"


def test_rich_text_runs_give_plain_text_and_entities_that_keep_link_targets() -> None:
    message = by_id(read(FIXTURES / "personal_modern"))[2]
    assert message.text.startswith("Meet tomorrow at the café, see https://t.me/somechannel/15")
    assert message.text.endswith("#flat 🏠\nprint(42)")
    kinds = {e["type"]: e for e in message.entities}
    assert kinds["text_link"]["href"] == "https://example.org/cafe"
    assert kinds["link"]["href"] == "https://t.me/somechannel/15"
    assert kinds["mention"]["text"] == "@bob"
    assert kinds["mention_name"]["user_id"] == 1003
    assert kinds["hashtag"]["text"] == "#flat"
    assert kinds["custom_emoji"]["document_id"] == "5368324170671202286"
    assert kinds["pre"]["language"] == "python"
    assert "plain" not in kinds
    assert message.has_link


def test_legacy_2020_export_reads_naive_dates_as_utc_and_bare_numeric_sender_ids() -> None:
    records = read(FIXTURES / "legacy_2020")
    found = by_id(records)
    assert found[4720].date == 1577836798
    assert found[4721].date == 1577836801
    assert found[4721].edit_date == 1577837100
    assert (found[4721].sender_kind, found[4721].sender_id) == ("user", 22222222)
    assert found[4722].text == "Смотри https://example.org/dacha и не забудь"
    assert [e["type"] for e in found[4722].entities] == ["link", "bold"]
    assert found[4722].reply_to_msg_id == 4721
    assert chats(records)[0].chat_id == -8123123


def test_a_url_in_plain_text_without_an_entity_still_sets_has_link() -> None:
    found = by_id(read(FIXTURES / "legacy_2020"))
    assert found[4723].entities == []
    assert found[4723].has_link
    assert not found[4721].has_link


def test_unixtime_fields_win_over_local_wall_clock_dates() -> None:
    found = by_id(read(FIXTURES / "personal_modern"))
    assert found[1].date == BASE_UNIX
    assert found[4].edit_date == 1704103800
    assert found[1].edit_date is None


def test_sender_forms_map_to_kind_and_bare_id_and_null_names_become_empty() -> None:
    account = by_id(read(FIXTURES / "account"))
    assert (account[15].sender_kind, account[15].sender_id) == ("channel", 777)
    assert account[15].author == "Marta"
    migrated = [m for m in messages(read(FIXTURES / "account")) if m.service_action]
    from_chat = next(m for m in migrated if m.service_action == "migrate_from_group")
    assert (from_chat.sender_kind, from_chat.sender_id) == ("chat", 4321)
    personal = by_id(read(FIXTURES / "personal_modern"))
    assert personal[22].sender_name == ""
    assert personal[22].sender_id == 1002


def test_replies_keep_their_target_and_a_cross_chat_reply_keeps_its_peer() -> None:
    found = by_id(read(FIXTURES / "personal_modern"))
    assert (found[3].reply_to_msg_id, found[3].reply_to_peer_id) == (2, None)
    assert found[24].reply_to_msg_id == 15
    assert found[24].reply_to_peer_id == -1000000000777


def test_forwarded_saved_via_bot_and_buttons_are_kept() -> None:
    found = by_id(read(FIXTURES / "personal_modern"))
    assert found[17].forwarded_from == "Valencia Rentals"
    assert found[17].forwarded_from_id == -1000000000777
    assert found[17].saved_from == "Housing Board"
    assert found[18].via_bot == "@gif"
    assert found[18].buttons[0][0] == {
        "type": "url",
        "text": "Open",
        "data": "https://example.org/listing",
    }
    assert found[18].buttons[1][0]["button_id"] == 7
    assert found[18].has_link


def test_reactions_are_counted_by_emoji_custom_emoji_and_paid() -> None:
    found = by_id(read(FIXTURES / "personal_modern"))
    assert found[19].reactions == {"👍": 3, "custom:5368324170671202286": 1, "paid": 5}
    assert found[19].reactions_total == 9
    assert found[1].reactions == {} and found[1].reactions_total == 0


def test_included_media_keep_their_relative_path_and_placeholders_have_none() -> None:
    found = by_id(read(FIXTURES / "personal_modern"))
    photo = found[5].media
    assert photo == ExportMedia(
        kind="photo",
        file_name="photo_1@01-01-2024_10-04-00.jpg",
        size=635,
        path="photos/photo_1@01-01-2024_10-04-00.jpg",
        width=8,
        height=6,
    )
    assert photo is not None and photo.path is not None
    assert (FIXTURES / "personal_modern" / photo.path).is_file()
    pdf = found[6].media
    assert pdf is not None
    assert (pdf.kind, pdf.file_name, pdf.mime, pdf.size) == (
        "document",
        "invoice-42.pdf",
        "application/pdf",
        1400,
    )
    assert pdf.path == "files/invoice-42.pdf"
    missing = {mid: found[mid].media for mid in (7, 9, 10, 11)}
    assert all(m is not None and m.path is None for m in missing.values())
    assert [m.extra["missing"] for m in missing.values() if m is not None] == [
        "not_included",
        "not_included",
        "too_large",
        "unavailable",
    ]


def test_every_document_media_type_maps_to_its_kind() -> None:
    found = by_id(read(FIXTURES / "personal_modern"))
    kinds = {mid: m.media.kind for mid, m in found.items() if m.media is not None}
    assert kinds == {
        5: "photo",
        6: "document",
        7: "voice",
        8: "sticker",
        9: "video",
        10: "video_note",
        11: "animation",
        12: "audio",
        13: "poll",
        14: "contact",
        15: "location",
        16: "venue",
        23: "todo",
    }
    sticker = found[8].media
    assert sticker is not None and sticker.extra["emoji"] == "👍"
    assert sticker.extra["thumbnail"] == "stickers/sticker.webp_thumb.jpg"
    video = found[9].media
    assert video is not None and (video.duration_s, video.width, video.height) == (14, 480, 270)
    assert "thumbnail" not in video.extra
    audio = found[12].media
    assert audio is not None and audio.extra["performer"] == "The Builders"


def test_poll_contact_location_venue_and_todo_details_land_in_extra() -> None:
    found = by_id(read(FIXTURES / "personal_modern"))
    poll, contact = found[13].media, found[14].media
    location, venue, todo = found[15].media, found[16].media, found[23].media
    assert poll is not None and poll.extra["question"] == "Which flat?"
    assert [a["text"] for a in poll.extra["answers"]] == ["Centro", "Ruzafa"]
    assert contact is not None and contact.extra["phone_number"] == "+34 600 111 222"
    assert contact.path == "contacts/contact_1.vcard"
    assert location is not None
    assert location.extra == {"latitude": 39.4699, "longitude": -0.3763, "live_period_s": 900}
    assert venue is not None and venue.extra["place_name"] == "Mercado Central"
    assert venue.extra["address"] == "Plaza Ciudad de Brujas, Valencia"
    assert todo is not None and [i["text"] for i in todo.extra["items"]] == ["Boxes", "Van"]


def test_service_messages_carry_their_action_actor_and_action_fields() -> None:
    found = by_id(read(FIXTURES / "personal_modern"))
    call, pin = found[20], found[21]
    assert (call.kind, call.raw_type, call.service_action) == ("service", "service", "phone_call")
    assert call.sender_name == "Bob Builder"
    assert call.service_extra == {"duration_seconds": 77, "discard_reason": "hangup"}
    assert pin.service_extra == {"message_id": 16}
    assert found[1].service_action is None and found[1].service_extra == {}


def test_service_photo_of_a_group_is_its_media() -> None:
    group = [m for m in messages(read(FIXTURES / "account")) if m.chat_id == -4321]
    assert group[0].service_extra["members"] == ["Alice", "Bob Builder"]
    assert group[1].media is not None
    assert group[1].media.path == "chats/chat_04/photos/photo_1@01-01-2024_11-00-00.jpg"


def test_positional_construction_matches_the_message_field_order() -> None:
    assert [f.name for f in fields(ExportMessage)] == [
        "chat_id", "msg_id", "date", "kind", "edit_date", "sender_id", "sender_kind",
        "sender_name", "text", "entities", "reply_to_msg_id", "reply_to_peer_id", "topic_id",
        "forwarded_from", "forwarded_from_id", "saved_from", "via_bot", "author", "reactions",
        "reactions_total", "service_action", "service_extra", "media", "has_link", "buttons",
        "raw_type", "grouped_id",
    ]  # fmt: skip


# --- forums ---


def test_a_supergroup_is_announced_again_as_a_forum_at_its_first_topic_action() -> None:
    records = read(FIXTURES / "forum")
    headers = [(i, r) for i, r in enumerate(records) if isinstance(r, ExportChat)]
    assert [h.type for _, h in headers] == ["supergroup", "forum"]
    assert headers[0][1].chat_id == headers[1][1].chat_id == -1001700000003
    following = records[headers[1][0] + 1]
    assert isinstance(following, ExportMessage) and following.service_action == "topic_created"


def test_forum_topics_follow_topic_roots_and_reply_chains() -> None:
    found = by_id(read(FIXTURES / "forum"))
    topics = {mid: m.topic_id for mid, m in found.items()}
    assert topics == {
        1: None,  # before the chat showed any topic
        2: 2,  # topic_created is the root of its topic
        3: 2,  # a post in the topic points at the root
        4: 2,  # a reply inherits the topic of what it answers
        5: 1,  # no reply: General
        6: 6,
        7: None,  # a service message in a topic carries no reply
        8: 6,
        9: None,  # replied message not in the export
        10: 1,
        11: None,  # cross-chat reply
        12: 2,
    }


# --- key order ---


def test_a_header_written_after_the_messages_is_still_yielded_first() -> None:
    records = read(FIXTURES / "header_last")
    assert isinstance(records[0], ExportChat)
    assert (records[0].chat_id, records[0].title) == (1002, "Bob Builder")
    assert [m.msg_id for m in messages(records)] == [1, 2]


def test_a_header_beyond_the_pending_bound_is_found_by_a_lookahead(tmp_path: Path) -> None:
    late = {
        "about": "account",
        "chats": {
            "list": [
                {"name": "First", "type": "personal_chat", "id": 7, "messages": [plain(1, "a")]},
                {
                    "messages": [plain(i, f"m{i}") for i in range(1, 6)],
                    "id": 8,
                    "type": "bot_chat",
                    "name": "Late",
                },
            ]
        },
    }
    path = write(tmp_path, json.dumps(late).encode())
    records = list(iter_export(open_export(path), max_pending=2))
    assert [(c.title, c.chat_id) for c in chats(records)] == [("First", 7), ("Late", 8)]
    late_messages = [m for m in messages(records) if m.chat_id == 8]
    assert [m.msg_id for m in late_messages] == [1, 2, 3, 4, 5]
    assert records.index(chats(records)[1]) < records.index(late_messages[0])


def test_max_pending_below_one_is_refused() -> None:
    with pytest.raises(InvalidArgument):
        iter_export(open_export(FIXTURES / "header_last"), max_pending=0)


# --- media path safety ---


def test_unsafe_media_paths_are_refused_with_a_warning_and_the_message_is_kept() -> None:
    records = read(FIXTURES / "unsafe_media")
    found = by_id(records)
    assert found[1].media is not None and found[1].media.path == "photos/ok.jpg"
    refused = {w.msg_id: w for w in warnings_of(records, "unsafe_media_path")}
    assert set(refused) == {2, 3, 4, 5, 6}
    assert "'..'" in refused[2].message
    assert "absolute" in refused[3].message and "absolute" in refused[5].message
    assert "outside the export folder" in refused[4].message
    assert refused[4].location == "messages[3].photo"
    for mid in (2, 3, 4, 5, 6):
        media = found[mid].media
        assert media is not None and media.path is None and media.extra["missing"] == "refused"


def test_resolve_media_returns_paths_inside_the_export_and_none_for_escapes() -> None:
    root = FIXTURES / "unsafe_media"
    assert resolve_media(root, "photos/ok.jpg") == (root / "photos" / "ok.jpg").resolve()
    assert resolve_media(root, "photos/not-there-yet.jpg") is not None
    assert resolve_media(root, "../outside.jpg") is None
    assert resolve_media(root, "photos/escape.jpg") is None
    assert resolve_media(root, "/etc/hostname") is None
    assert resolve_media(root, "C:\\Windows\\win.ini") is None
    assert resolve_media(root, "\\etc\\passwd") is None
    assert resolve_media(root, "") is None


# --- sources and slugs ---


def test_open_export_accepts_a_folder_or_the_json_file_and_sets_the_root() -> None:
    folder = open_export(FIXTURES / "personal_modern")
    assert folder.json_path.name == "result.json"
    assert folder.root == (FIXTURES / "personal_modern").resolve()
    single = open_export(FIXTURES / "personal_modern" / "result.json")
    assert single.root == folder.root and single.size == folder.size > 0
    assert open_export(FIXTURES / "messages_json").json_path.name == "messages.json"


def test_open_export_refuses_missing_paths_and_folders_without_an_export(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        open_export(tmp_path / "nope")
    with pytest.raises(MalformedExport) as caught:
        open_export(tmp_path)
    assert caught.value.reason == "MALFORMED_EXPORT"


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Вишнёвый сад", "vishnevyy-sad"),
        ("Café Olé — 2024!", "cafe-ole-2024"),
        ("  Valencia   Expats  ", "valencia-expats"),
    ],
)
def test_export_slug_is_lowercase_ascii_from_the_title(title: str, slug: str) -> None:
    assert export_slug(Path("/anywhere"), title) == slug


def test_export_slug_falls_back_to_the_folder_name_and_a_hash_for_other_scripts() -> None:
    assert export_slug(FIXTURES / "personal_modern" / "result.json") == "personal-modern"
    assert export_slug(FIXTURES / "legacy_2020") == "legacy-2020"
    hashed = export_slug(Path("/x"), "東京の部屋")
    assert hashed.startswith("export-") and hashed == export_slug(Path("/y"), "東京の部屋")
    long = export_slug(Path("/x"), "a" * 200)
    assert len(long) <= 48


# --- damage ---


def _account_doc() -> dict[str, Any]:
    fire = {"type": "emoji", "count": 1, "emoji": "🔥"}
    return {
        "chats": {
            "list": [
                {
                    "name": "Ана",
                    "type": "personal_chat",
                    "id": 5,
                    "messages": [plain(i, f"привет {i}") for i in range(1, 5)],
                },
                {
                    "name": "Group",
                    "type": "private_supergroup",
                    "id": 9,
                    "messages": [plain(i, f"hi {i}", reactions=[fire]) for i in range(10, 13)],
                },
            ]
        }
    }


@pytest.mark.parametrize("shape", ["chat", "account"])
def test_an_export_cut_at_any_byte_yields_its_complete_messages_then_a_warning(
    tmp_path: Path, shape: str
) -> None:
    doc = _account_doc()
    data, ends = serialise(doc if shape == "account" else doc["chats"]["list"][0])
    source = ExportSource(json_path=tmp_path / "result.json", root=tmp_path, size=0)
    for cut in range(1, len(data)):
        source.json_path.write_bytes(data[:cut])
        records = list(iter_export(source))
        expected = [(chat, mid) for end, chat, mid in ends if end <= cut]
        got = [(m.chat_id if m.chat_id > 0 else 9, m.msg_id) for m in messages(records)]
        assert got == expected, f"cut at {cut}"
        truncated = warnings_of(records, "truncated")
        whole = data[:cut].strip() == data.strip()
        assert len(truncated) == (0 if whole else 1), f"cut at {cut}"
        if truncated:
            assert records[-1] is truncated[0]
            assert str(source.json_path) in truncated[0].message


def test_an_export_ending_in_nul_padding_reads_as_truncated(tmp_path: Path) -> None:
    data, ends = serialise(_account_doc())
    cut = ends[2][0] + 5
    path = write(tmp_path, data[:cut] + b"\x00" * 3000)
    records = read(path)
    assert [m.msg_id for m in messages(records)] == [1, 2, 3]
    assert warnings_of(records, "truncated")[0].message.endswith("last complete message was read")


def test_a_cut_export_whose_header_follows_the_messages_drops_them_with_a_warning(
    tmp_path: Path,
) -> None:
    text = (FIXTURES / "header_last" / "result.json").read_bytes()
    path = write(tmp_path, text[: text.index(b'"id": 1002')])
    records = read(path)
    assert messages(records) == [] and chats(records) == []
    assert "2 messages dropped" in warnings_of(records, "skipped")[0].message
    assert len(warnings_of(records, "truncated")) == 1


CHAT_HEAD = b'{"name": "x", "type": "personal_chat", "id": 1, "messages": ['
GOOD = b'{"id": 1, "type": "message", "date_unixtime": "1", "text": "a"}'


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (b"", "top level"),
        (b"<html>not json</html>", "top level"),
        (b"[1, 2]", "top level"),
        (b'{"foo": 1, "bar": [1, 2]}', "top level"),
        (CHAT_HEAD + GOOD + b', {"id": 2, "text": "\xff\xfe"}]}', "messages[1]"),
        (CHAT_HEAD + GOOD + b', {"id": 2 "type": 1}]}', "messages[1]"),
        (CHAT_HEAD + GOOD + b', {"type": "message", "date_unixtime": "2"}]}', "messages[1]"),
        (CHAT_HEAD + b"42]}", "messages[0]"),
        (b'{"name": "x", "type": "personal_chat", "id": 1, "messages": "none"}', "messages"),
        (b'{"name": "x", "type": "personal_chat", "id": "1", "messages": []}', "top level"),
        (b'{"name": "x", "id": 1, "messages": []}', "top level"),
        (b'{"about": "a", "chats": {"about": "b", "list": 5}}', "chats.list"),
        (b'{"about": "a", "chats": {"list": [{"name": "x"}, 7]}}', "chats.list[0]"),
        (b'{"about": "a", "chats": [1]}', "chats"),
        (CHAT_HEAD + GOOD + b"]} trailing", "after the top-level object"),
    ],
)
def test_malformed_input_raises_malformed_export_naming_file_and_location(
    tmp_path: Path, data: bytes, where: str
) -> None:
    path = write(tmp_path, data)
    with pytest.raises(MalformedExport) as caught:
        read(path)
    error = caught.value
    assert error.reason == "MALFORMED_EXPORT"
    assert error.metadata["file"] == str(path.resolve())
    assert error.metadata["location"] == where
    assert str(path.resolve()) in error.message and "expected" in error.message


def test_invalid_utf8_is_reported_as_such_with_a_byte_range(tmp_path: Path) -> None:
    path = write(tmp_path, CHAT_HEAD + b'{"id": 1, "text": "caf\xe9"}]}')
    with pytest.raises(MalformedExport) as caught:
        read(path)
    assert "invalid UTF-8" in caught.value.message
    assert caught.value.metadata["byte_offset"] == "0"


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({"reactions": "lots"}, "'reactions' is not a list"),
        ({"date_unixtime": None, "date": "yesterday"}, "'date' is not an ISO date"),
        ({"from_id": "robot"}, "'from_id' is not a peer id"),
        ({"text": 5, "text_entities": None}, "'text' is neither"),
        ({"reply_to_message_id": "3"}, "'reply_to_message_id' is not an integer"),
        ({"photo": 12}, "'photo' is not a string"),
        ({"date_unixtime": None, "date": None}, "it has no date"),
    ],
)
def test_a_bad_message_inside_a_good_chat_is_skipped_with_a_warning(
    tmp_path: Path, bad: dict[str, Any], reason: str
) -> None:
    doc = {
        "name": "x",
        "type": "personal_chat",
        "id": 1,
        "messages": [plain(1, "ok"), {**plain(2, "bad"), **bad}, plain(3, "ok too")],
    }
    records = read(write(tmp_path, json.dumps(doc).encode()))
    assert [m.msg_id for m in messages(records)] == [1, 3]
    (skipped,) = warnings_of(records, "skipped")
    assert (skipped.msg_id, skipped.chat_id, skipped.location) == (2, 1, "messages[1]")
    assert reason in skipped.message
    assert "bad" not in skipped.message


def test_a_utf8_bom_before_the_json_is_accepted(tmp_path: Path) -> None:
    data = json.dumps({"name": "x", "type": "personal_chat", "id": 1, "messages": [plain(1, "a")]})
    records = read(write(tmp_path, b"\xef\xbb\xbf" + data.encode()))
    assert [m.text for m in messages(records)] == ["a"]


# --- eval exports ---


def _eval_files() -> list[Path]:
    return sorted(p for pattern in EVAL_GLOBS for p in EVAL.glob(pattern))


def test_every_public_eval_export_parses_without_error_or_warning() -> None:
    files = _eval_files()
    if not files:
        pytest.skip(f"eval data not present at {EVAL}")
    for path in files:
        records = list(iter_export(open_export(path.parent)))
        assert chats(records), path
        assert not [r for r in records if isinstance(r, ExportWarning)], path


@pytest.mark.parametrize(
    ("pattern", "count"),
    [
        ("locomo/exports/*/result.json", 2760),
        ("irc/exports/*/result.json", 12500),
        ("tgif/exports/*/result.json", 1179),
        ("tgif/merged/*/result.json", 1179),
        ("ru/exports/*/result.json", 805),
        ("import-fixtures/chat-history-manager/*/result.json", 99),
    ],
)
def test_eval_message_counts_match_the_eval_readme(pattern: str, count: int) -> None:
    files = sorted(EVAL.glob(pattern))
    if not files:
        pytest.skip(f"eval data not present at {EVAL / pattern}")
    total = sum(len(messages(list(iter_export(open_export(p))))) for p in files)
    assert total == count


def test_irc_service_lines_become_service_messages_with_their_actor() -> None:
    files = sorted(EVAL.glob("irc/exports/*/result.json"))
    if not files:
        pytest.skip(f"eval data not present at {EVAL}")
    found = messages(list(iter_export(open_export(files[0]))))
    service = [m for m in found if m.kind == "service"]
    assert service and all(m.service_action for m in service)
    assert all(m.sender_kind == "user" for m in service if m.service_action != "custom_action")


# --- memory ---


def test_streaming_a_50k_message_export_keeps_peak_memory_bounded(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    with path.open("w", encoding="utf-8") as out:
        out.write('{"name": "Big", "type": "public_supergroup", "id": 42, "messages": [\n')
        for mid in range(1, BIG_EXPORT_MESSAGES + 1):
            text = f"message {mid} about renting a flat near the beach, price {mid % 997} EUR"
            row = plain(mid, text, sender=1000 + mid % 40, reply_to_message_id=max(1, mid - 2))
            out.write(json.dumps(row, ensure_ascii=False, indent=1))
            out.write(",\n" if mid < BIG_EXPORT_MESSAGES else "\n]}\n")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        count = 0
        for record in iter_export(open_export(path)):
            count += isinstance(record, ExportMessage)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == BIG_EXPORT_MESSAGES
    assert peak < PEAK_BYTES_LIMIT
    assert peak < size / 4
