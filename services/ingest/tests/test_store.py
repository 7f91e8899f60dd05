"""``store.store_messages`` over a real migrated ingest.db: rows, mids, media and feed events."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatseek_core import db, feed
from chatseek_ingest import store
from chatseek_ingest.model import ExportChat, ExportMedia, ExportMessage
from chatseek_ingest.schema import MIGRATIONS, OWNER
from chatseek_testing.telegram import ingest_db

ACCOUNT = "me"
CHAT_ID = -1_000_000_000_042
OTHER_CHAT_ID = 7


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[db.Connection]:
    connection = ingest_db(tmp_path / "data" / "ingest.db")
    with db.transaction(connection):
        store.ensure_account(connection, ACCOUNT)
        for chat_id, kind in ((CHAT_ID, "supergroup"), (OTHER_CHAT_ID, "private")):
            chat = ExportChat(chat_id, abs(chat_id), kind, f"chat {chat_id}", None, kind)
            store.upsert_chat(connection, ACCOUNT, chat, source_id=None, is_import=True)
    yield connection
    connection.close()


def message(msg_id: int, text: str = "hello", **fields: Any) -> ExportMessage:
    fields.setdefault("chat_id", CHAT_ID)
    return ExportMessage(
        msg_id=msg_id, date=1_700_000_000 + msg_id, kind="message", text=text, **fields
    )


def photo(name: str = "a.jpg", size: int = 1000) -> ExportMedia:
    return ExportMedia(kind="photo", file_name=name, size=size, path=f"photos/{name}")


def save(conn: db.Connection, messages: list[ExportMessage]) -> store.StoreStats:
    with db.transaction(conn):
        return store.store_messages(conn, ACCOUNT, messages)


def row(conn: db.Connection, msg_id: int, chat_id: int = CHAT_ID) -> dict[str, Any]:
    found = conn.execute(
        "SELECT * FROM messages WHERE account = ? AND chat_id = ? AND msg_id = ?",
        (ACCOUNT, chat_id, msg_id),
    ).fetchone()
    assert found is not None
    return dict(found)


def media_of(conn: db.Connection, mid: int) -> dict[str, Any] | None:
    found = conn.execute("SELECT * FROM media WHERE mid = ?", (mid,)).fetchone()
    return None if found is None else dict(found)


def events(conn: db.Connection, after: int = 0) -> list[tuple[int, str]]:
    return [(e.entity, e.op) for e in feed.read_after(conn, after, 1000)]


def test_new_messages_take_the_mids_after_the_largest_in_batch_order(conn: db.Connection) -> None:
    save(conn, [message(1), message(2)])
    top = row(conn, 2)["mid"]
    with db.transaction(conn):
        conn.execute("DELETE FROM messages WHERE mid = ?", (top,))
    save(conn, [message(5), message(1, "changed"), message(3, chat_id=OTHER_CHAT_ID)])

    assert row(conn, 1)["mid"] == top - 1
    assert row(conn, 5)["mid"] == top
    assert row(conn, 3, OTHER_CHAT_ID)["mid"] == top + 1


def test_optional_fields_are_stored_as_null_or_as_given(conn: db.Connection) -> None:
    bare = message(1, "")
    full = message(
        2,
        "Ёлка and https://example.org",
        edit_date=1_800_000_000,
        sender_id=99,
        sender_kind="user",
        sender_name="Ann",
        entities=[{"type": "mention", "text": "@Bob"}],
        reply_to_msg_id=1,
        reply_to_peer_id=-5,
        topic_id=3,
        forwarded_from="Carl",
        via_bot="@bot",
        reactions={"👍": 2},
        reactions_total=2,
        service_action=None,
        has_link=True,
        grouped_id=77,
    )
    save(conn, [bare, full])

    nulls = row(conn, 1)
    for column in (
        "edit_date",
        "sender_id",
        "entities",
        "reply_to_msg_id",
        "reply_to_peer_id",
        "topic_id",
        "comment_channel_id",
        "fwd_from",
        "via_bot",
        "reactions",
        "service_action",
        "grouped_id",
    ):
        assert nulls[column] is None, column
    assert (nulls["text"], nulls["mentions"]) == ("", "[]")
    given = row(conn, 2)
    assert given["edit_date"] == 1_800_000_000
    assert (given["sender_id"], given["sender_name"]) == (99, "Ann")
    assert given["entities"] == '[{"type": "mention", "text": "@Bob"}]'
    assert "norm_text" not in given.keys()  # the text is stored once, as it came
    assert (given["reply_to_msg_id"], given["reply_to_peer_id"], given["topic_id"]) == (1, -5, 3)
    assert (given["fwd_from"], given["via_bot"], given["grouped_id"]) == ("Carl", "@bot", 77)
    assert (given["reactions"], given["reactions_total"]) == ('{"👍": 2}', 2)
    assert (given["has_link"], given["mentions"]) == (1, '["bob"]')
    assert given["content_hash"] == store.message_hash(full)
    sender = conn.execute("SELECT display_name FROM senders WHERE sender_id = 99").fetchone()
    assert sender[0] == "Ann"


def test_an_edited_message_is_updated_in_place_and_announced_once(conn: db.Connection) -> None:
    original = message(1, "first", reply_to_msg_id=9, via_bot="@bot", media=photo())
    save(conn, [original, message(2)])
    before = row(conn, 1)
    head = feed.head(conn)

    edited = dataclasses.replace(original, text="second", edit_date=1_800_000_000, via_bot=None)
    stats = save(conn, [edited, message(2)])

    after = row(conn, 1)
    assert (stats.new, stats.updated, stats.unchanged) == (0, 1, 1)
    assert after["mid"] == before["mid"]
    assert (after["text"], after["edit_date"]) == ("second", 1_800_000_000)
    assert after["via_bot"] is None
    assert after["reply_to_msg_id"] == 9
    assert after["content_hash"] == store.message_hash(edited) != before["content_hash"]
    assert events(conn, head) == [(1, "upsert")]


def test_a_media_row_removed_from_a_message_is_deleted_on_reimport(conn: db.Connection) -> None:
    save(conn, [message(1, media=photo()), message(2, media=photo("b.jpg"))])
    mid = row(conn, 1)["mid"]
    head = feed.head(conn)

    save(conn, [message(1), message(2, media=photo("b.jpg"))])

    assert media_of(conn, mid) is None
    assert media_of(conn, row(conn, 2)["mid"]) is not None
    assert events(conn, head) == [(1, "upsert")]


def test_extracted_text_survives_an_edit_but_not_a_changed_file(conn: db.Connection) -> None:
    save(conn, [message(1, media=photo()), message(2, media=photo("b.jpg"))])
    for msg_id in (1, 2):
        with db.transaction(conn):
            store.set_extracted(conn, row(conn, msg_id)["mid"], "read", f"text {msg_id}")

    save(conn, [message(1, "edited", media=photo()), message(2, media=photo("c.jpg", 5))])

    kept = media_of(conn, row(conn, 1)["mid"])
    changed = media_of(conn, row(conn, 2)["mid"])
    assert kept is not None and changed is not None
    assert (kept["extract_state"], kept["extracted_text"]) == ("read", "text 1")
    assert (changed["extract_state"], changed["extracted_text"]) == ("pending", None)
    assert (changed["file_name"], changed["size"], changed["mime"]) == ("c.jpg", 5, None)
    assert changed["extra"] == '{"export_path": "photos/c.jpg"}'


def test_a_message_repeated_in_one_batch_keeps_its_last_copy(conn: db.Connection) -> None:
    stats = save(
        conn,
        [message(1, "one", media=photo()), message(2), message(1, "two"), message(1, "two")],
    )

    assert (stats.new, stats.updated, stats.unchanged) == (2, 1, 1)
    assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 2
    assert row(conn, 1)["text"] == "two"
    assert media_of(conn, row(conn, 1)["mid"]) is None
    assert events(conn) == [(1, "upsert"), (2, "upsert"), (1, "upsert")]


def test_message_hashes_stay_what_stored_rows_were_compared_with(conn: db.Connection) -> None:
    plain = message(7, 'Ёлка "quoted" 👍', sender_id=5, sender_name="Ann", reactions_total=2)
    poll = ExportMedia(kind="poll", size=3, extra={"question": "Où?"})
    service = ExportMessage(
        chat_id=OTHER_CHAT_ID,
        msg_id=8,
        date=1_700_000_060,
        kind="service",
        edit_date=1_700_000_100,
        service_action="pin_message",
        media=poll,
        grouped_id=99,
    )

    assert store.message_hash(dataclasses.replace(plain, date=1_700_000_000)) == (
        "2c3511ca9d07ef52da1fca03"
    )
    assert store.message_hash(service) == "398006fe8667efd3f5babd9f"
    # The writer hashes what a reader process prepared: stored, both keep their digests.
    save(conn, [dataclasses.replace(plain, date=1_700_000_000), service])
    assert row(conn, 7)["content_hash"] == "2c3511ca9d07ef52da1fca03"
    assert row(conn, 8, OTHER_CHAT_ID)["content_hash"] == "398006fe8667efd3f5babd9f"


def test_a_store_of_schema_3_loses_only_its_normalised_copy_of_each_text(tmp_path: Path) -> None:
    path = tmp_path / "ingest.db"
    old = db.connect(path)
    db.migrate(old, OWNER, MIGRATIONS[:3])
    with db.transaction(old):
        store.ensure_account(old, ACCOUNT)
        chat = ExportChat(CHAT_ID, abs(CHAT_ID), "supergroup", "chat", None, "supergroup")
        store.upsert_chat(old, ACCOUNT, chat, source_id=None, is_import=True)
        old.executemany(
            "INSERT INTO messages (account, chat_id, msg_id, date, text, norm_text, content_hash)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (ACCOUNT, CHAT_ID, 1, 1_700_000_001, "Ёлка  Rent", "елка rent", "h1"),
                (ACCOUNT, CHAT_ID, 2, 1_700_000_002, "hello", "hello", "h2"),
            ],
        )
    before = [tuple(r) for r in old.execute("SELECT mid, msg_id, text FROM messages")]
    old.close()

    conn = db.connect(path)
    assert db.migrate(conn, OWNER, MIGRATIONS) == 4
    columns = {r[1] for r in conn.execute("PRAGMA table_info(messages)")}
    assert "norm_text" not in columns
    assert [tuple(r) for r in conn.execute("SELECT mid, msg_id, text FROM messages")] == before
    # The store goes on as before: an edit updates the message in place.
    stats = save(conn, [message(2, "hello again")])
    assert (stats.updated, row(conn, 2)["text"], row(conn, 2)["mid"]) == (1, "hello again", 2)
    conn.close()
