"""Real Telethon objects convert into the same records an export produces."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from telethon.tl import types

from chatseek_ingest.model import ExportChat, ExportMedia
from chatseek_ingest.telegram import chat_record, to_records
from chatseek_testing.telegram import FakeTelegram

WHEN = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def tg() -> FakeTelegram:
    return FakeTelegram()


def group(tg: FakeTelegram) -> tuple[Any, ExportChat]:
    chat = tg.add_channel(400, "Expats", username="expats", megagroup=True)
    return chat, chat_record(chat)


def document(*attributes: Any, mime: str = "application/octet-stream", size: int = 10) -> Any:
    return types.MessageMediaDocument(
        document=types.Document(
            id=1,
            access_hash=2,
            file_reference=b"",
            date=WHEN,
            mime_type=mime,
            size=size,
            dc_id=2,
            attributes=list(attributes),
        )
    )


def text(value: str) -> Any:
    return types.TextWithEntities(text=value, entities=[])


# --- chats ---


def test_chat_records_use_marked_ids_and_the_export_types(tg: FakeTelegram) -> None:
    cases = [
        (tg.add_user(11, "Ana", last_name="Ruiz", username="ana"), 11, "private", "Ana Ruiz"),
        (tg.add_user(12, "Helper", bot=True), 12, "bot", "Helper"),
        (tg.me, 1000, "saved", "Saved Messages"),
        (tg.add_group(55, "Family"), -55, "group", "Family"),
        (tg.add_channel(401, "News"), -1000000000401, "channel", "News"),
        (tg.add_channel(402, "Talk", megagroup=True), -1000000000402, "supergroup", "Talk"),
        (tg.add_channel(403, "Makers", forum=True), -1000000000403, "forum", "Makers"),
    ]
    for entity, chat_id, kind, title in cases:
        record = chat_record(entity)
        assert (record.chat_id, record.type, record.title) == (chat_id, kind, title)
        assert record.raw_id == entity.id
    forbidden = chat_record(
        types.ChannelForbidden(id=404, access_hash=1, title="Gone", megagroup=True)
    )
    assert (forbidden.type, forbidden.is_left) == ("supergroup", True)
    assert chat_record(tg.add_channel(405, "Pub", username="pub")).export_type == "public_channel"
    with pytest.raises(TypeError):
        chat_record(types.PeerUser(1))


# --- senders and peers ---


def test_a_group_message_carries_its_sender_text_and_date(tg: FakeTelegram) -> None:
    chat, record = group(tg)
    ana = tg.add_user(11, "Ana", last_name="Ruiz")
    message = tg.send(chat, "hola", sender=ana, date=WHEN)
    out = to_records(message, record)
    assert (out.chat_id, out.msg_id, out.kind, out.raw_type) == (
        record.chat_id,
        1,
        "message",
        "message",
    )
    assert (out.sender_id, out.sender_kind, out.sender_name) == (11, "user", "Ana Ruiz")
    assert out.date == int(WHEN.timestamp()) and out.text == "hola" and out.edit_date is None


def test_a_channel_post_is_sent_by_the_channel_and_keeps_its_signature(tg: FakeTelegram) -> None:
    channel = tg.add_channel(401, "News")
    out = to_records(tg.send(channel, "breaking", post_author="Eva"), chat_record(channel))
    assert (out.sender_id, out.sender_kind, out.sender_name, out.author) == (
        401,
        "channel",
        "News",
        "Eva",
    )


def test_an_anonymous_admin_posts_as_the_group(tg: FakeTelegram) -> None:
    chat, record = group(tg)
    out = to_records(tg.send(chat, "rules", sender=chat), record)
    assert (out.sender_id, out.sender_kind, out.sender_name) == (400, "channel", "Expats")


def test_private_messages_name_both_sides_and_a_legacy_group_uses_its_negative_id(
    tg: FakeTelegram,
) -> None:
    ana = tg.add_user(11, "Ana")
    incoming = to_records(tg.send(ana, "hi", sender=ana), chat_record(ana))
    assert (incoming.chat_id, incoming.sender_id, incoming.sender_name) == (11, 11, "Ana")
    outgoing = to_records(tg.send(ana, "hey"), chat_record(ana), self_id=1000)
    assert (outgoing.sender_id, outgoing.sender_name) == (1000, "Me")
    family = tg.add_group(55, "Family")
    legacy = to_records(tg.send(family, "dinner?"), chat_record(family))
    assert legacy.chat_id == -55


def test_an_outgoing_message_without_from_id_is_the_accounts_own(tg: FakeTelegram) -> None:
    ana = tg.add_user(11, "Ana")
    bare = types.Message(id=5, peer_id=types.PeerUser(11), date=WHEN, message="x", out=True)
    out = to_records(bare, chat_record(ana), self_id=1000)
    assert (out.sender_id, out.sender_kind) == (1000, "user")


def test_a_message_of_another_chat_or_an_empty_one_is_refused(tg: FakeTelegram) -> None:
    chat, record = group(tg)
    other = tg.add_channel(401, "News")
    with pytest.raises(ValueError):
        to_records(tg.send(other, "x"), record)
    with pytest.raises(TypeError):
        to_records(types.MessageEmpty(id=3), record)


# --- text and entities ---


def test_entities_are_cut_at_utf16_offsets_and_links_are_flagged(tg: FakeTelegram) -> None:
    chat, record = group(tg)
    body = "🙂 see https://x.org, docs, @ana, Ana, #visa **b**"
    entities = [
        types.MessageEntityUrl(offset=7, length=13),
        types.MessageEntityTextUrl(offset=22, length=4, url="https://docs.example"),
        types.MessageEntityMention(offset=28, length=4),
        types.MessageEntityMentionName(offset=34, length=3, user_id=11),
        types.MessageEntityHashtag(offset=39, length=5),
        types.MessageEntityBold(offset=47, length=1),
        types.MessageEntityPre(offset=47, length=1, language="py"),
        types.MessageEntityCustomEmoji(offset=0, length=2, document_id=99),
    ]
    out = to_records(tg.send(chat, body, entities=entities), record)
    assert out.entities == [
        {"type": "link", "text": "https://x.org", "href": "https://x.org"},
        {"type": "text_link", "text": "docs", "href": "https://docs.example"},
        {"type": "mention", "text": "@ana"},
        {"type": "mention_name", "text": "Ana", "user_id": 11},
        {"type": "hashtag", "text": "#visa"},
        {"type": "bold", "text": "b"},
        {"type": "pre", "text": "b", "language": "py"},
        {"type": "custom_emoji", "text": "🙂", "document_id": "99"},
    ]
    assert out.has_link


def test_a_plain_url_a_url_button_or_a_preview_mark_a_link(tg: FakeTelegram) -> None:
    chat, record = group(tg)
    assert to_records(tg.send(chat, "go to www.example.com"), record).has_link
    assert not to_records(tg.send(chat, "nothing here"), record).has_link
    markup = types.ReplyInlineMarkup(
        rows=[
            types.KeyboardButtonRow(
                buttons=[
                    types.KeyboardButton(
                        text="Open", type=types.InlineButtonTypeUrl(url="https://a.b")
                    ),
                    types.KeyboardButton(
                        text="Vote", type=types.InlineButtonTypeCallback(data=b"1")
                    ),
                ]
            )
        ]
    )
    with_buttons = to_records(tg.send(chat, "pick", reply_markup=markup), record)
    assert with_buttons.has_link
    assert with_buttons.buttons == [
        [
            {"type": "url", "text": "Open", "data": "https://a.b"},
            {"type": "callback", "text": "Vote"},
        ]
    ]
    preview = types.MessageMediaWebPage(webpage=types.WebPageEmpty(id=1))
    previewed = to_records(tg.send(chat, "see", media=preview), record)
    assert previewed.has_link and previewed.media is None


# --- replies, topics, forwards, reactions ---


def test_replies_keep_their_target_and_a_cross_chat_reply_its_peer(tg: FakeTelegram) -> None:
    chat, record = group(tg)
    first = tg.send(chat, "q")
    reply = to_records(tg.send(chat, "a", reply_to=first.id), record)
    assert (reply.reply_to_msg_id, reply.reply_to_peer_id, reply.topic_id) == (first.id, None, None)
    across = types.Message(
        id=9,
        peer_id=types.PeerChannel(400),
        date=WHEN,
        message="quoting",
        reply_to=types.MessageReplyHeader(
            reply_to_msg_id=3, reply_to_peer_id=types.PeerChannel(401)
        ),
    )
    assert to_records(across, record).reply_to_peer_id == -1000000000401


async def test_forum_messages_get_their_topic_and_general_is_topic_one(tg: FakeTelegram) -> None:
    forum = tg.add_channel(403, "Makers", forum=True)
    record = chat_record(forum)
    general = to_records(tg.send(forum, "hi"), record)
    topic = tg.topic(forum, "Printers")
    [creation] = await tg.get_messages(forum, ids=[topic])
    created = to_records(creation, record)
    plain = to_records(tg.send(forum, "in topic", topic=topic), record)
    nested = to_records(tg.send(forum, "reply", topic=topic, reply_to=plain.msg_id), record)
    assert general.topic_id == 1
    assert (created.topic_id, created.service_action, created.service_extra) == (
        topic,
        "topic_created",
        {"title": "Printers"},
    )
    assert (plain.topic_id, plain.reply_to_msg_id) == (topic, topic)
    assert (nested.topic_id, nested.reply_to_msg_id) == (topic, plain.msg_id)


def test_forwards_name_their_origin(tg: FakeTelegram) -> None:
    chat, record = group(tg)
    ana = tg.add_user(11, "Ana")
    news = tg.add_channel(401, "News")
    from_user = tg.send(
        chat, "fw", fwd_from=types.MessageFwdHeader(date=WHEN, from_id=types.PeerUser(11))
    )
    hidden = tg.send(
        chat, "fw", fwd_from=types.MessageFwdHeader(date=WHEN, from_name="Hidden Person")
    )
    post = tg.send(
        chat,
        "fw",
        fwd_from=types.MessageFwdHeader(date=WHEN, from_id=types.PeerChannel(401), channel_post=7),
    )
    assert ana is not None and news is not None
    outs = [to_records(m, record) for m in (from_user, hidden, post)]
    assert [(o.forwarded_from, o.forwarded_from_id) for o in outs] == [
        ("Ana", 11),
        ("Hidden Person", None),
        ("News", -1000000000401),
    ]


def test_a_saved_message_remembers_where_it_was_saved_from(tg: FakeTelegram) -> None:
    saved = tg.send(
        tg.me,
        "keep",
        fwd_from=types.MessageFwdHeader(date=WHEN, from_name="X", saved_from_name="Old chat"),
    )
    assert to_records(saved, chat_record(tg.me)).saved_from == "Old chat"


def test_reactions_count_per_emoji_custom_emoji_and_paid(tg: FakeTelegram) -> None:
    chat, record = group(tg)
    message = tg.send(chat, "great")
    reactions = types.MessageReactions(
        results=[
            types.ReactionCount(reaction=types.ReactionEmoji(emoticon="👍"), count=3),
            types.ReactionCount(reaction=types.ReactionCustomEmoji(document_id=5), count=2),
            types.ReactionCount(reaction=types.ReactionPaid(), count=1),
        ]
    )
    message.reactions = reactions
    out = to_records(message, record)
    assert out.reactions == {"👍": 3, "custom:5": 2, "paid": 1} and out.reactions_total == 6


def test_an_edit_keeps_its_date_unless_telegram_hides_it(tg: FakeTelegram) -> None:
    chat, record = group(tg)
    edited = tg.send(chat, "x", edit_date=WHEN)
    assert to_records(edited, record).edit_date == int(WHEN.timestamp())
    edited.edit_hide = True
    assert to_records(edited, record).edit_date is None


def test_a_via_bot_message_names_the_bot(tg: FakeTelegram) -> None:
    chat, record = group(tg)
    tg.add_user(12, "Gif", bot=True, username="gif")
    assert to_records(tg.send(chat, "", via_bot_id=12), record).via_bot == "@gif"


# --- service messages ---


def test_service_messages_carry_their_action_and_details(tg: FakeTelegram) -> None:
    family = tg.add_group(55, "Family")
    record = chat_record(family)
    ana = tg.add_user(11, "Ana")
    tg.add_user(12, "Bo")
    added = tg.service(family, types.MessageActionChatAddUser(users=[11, 12]), sender=ana)
    pinned = tg.service(family, types.MessageActionPinMessage(), reply_to=added.id)
    renamed = tg.service(family, types.MessageActionChatEditTitle(title="Fam"))
    call = tg.service(family, types.MessageActionPhoneCall(call_id=1, duration=42))
    migrated = tg.service(family, types.MessageActionChatMigrateTo(channel_id=880))
    outs = [to_records(m, record) for m in (added, pinned, renamed, call, migrated)]
    assert [(o.kind, o.raw_type, o.service_action) for o in outs] == [
        ("service", "service", "invite_members"),
        ("service", "service", "pin_message"),
        ("service", "service", "edit_group_title"),
        ("service", "service", "phone_call"),
        ("service", "service", "migrate_to_supergroup"),
    ]
    assert [o.service_extra for o in outs] == [
        {"members": ["Ana", "Bo"]},
        {"message_id": added.id},
        {"title": "Fam"},
        {"duration_seconds": 42},
        {"channel_id": -1000000000880},
    ]
    assert (outs[0].sender_id, outs[0].sender_name, outs[0].text, outs[0].media) == (
        11,
        "Ana",
        "",
        None,
    )
    unknown = tg.service(family, types.MessageActionScreenshotTaken())
    assert to_records(unknown, record).service_action == "take_screenshot"
    other = tg.service(family, types.MessageActionRequestedPeer(button_id=1, peers=[]))
    assert to_records(other, record).service_action == "requested_peer"


# --- media ---


def test_a_photo_reports_its_largest_size(tg: FakeTelegram) -> None:
    chat, record = group(tg)
    photo = types.MessageMediaPhoto(
        photo=types.Photo(
            id=1,
            access_hash=2,
            file_reference=b"",
            date=WHEN,
            dc_id=2,
            sizes=[
                types.PhotoStrippedSize(type="i", bytes=b"xx"),
                types.PhotoSize(type="m", w=320, h=240, size=1000),
                types.PhotoSizeProgressive(type="y", w=1280, h=960, sizes=[100, 5000, 9000]),
            ],
        ),
        ttl_seconds=10,
    )
    media = to_records(tg.send(chat, "look", media=photo), record).media
    assert media == ExportMedia(
        kind="photo", size=9000, width=1280, height=960, extra={"ttl_s": 10}
    )


@pytest.mark.parametrize(
    ("attributes", "kind", "extra", "file_name"),
    [
        ([types.DocumentAttributeFilename(file_name="lease.pdf")], "document", {}, "lease.pdf"),
        ([types.DocumentAttributeAudio(duration=7, voice=True)], "voice", {}, None),
        (
            [types.DocumentAttributeVideo(duration=5.5, w=240, h=240, round_message=True)],
            "video_note",
            {},
            None,
        ),
        (
            [
                types.DocumentAttributeVideo(duration=30, w=1920, h=1080),
                types.DocumentAttributeFilename(file_name="trip.mp4"),
            ],
            "video",
            {},
            "trip.mp4",
        ),
        (
            [types.DocumentAttributeAudio(duration=200, title="Song", performer="Band")],
            "audio",
            {"performer": "Band", "title": "Song"},
            None,
        ),
        (
            [
                types.DocumentAttributeSticker(alt="😀", stickerset=types.InputStickerSetEmpty()),
                types.DocumentAttributeImageSize(w=512, h=512),
            ],
            "sticker",
            {"emoji": "😀"},
            None,
        ),
        (
            [
                types.DocumentAttributeAnimated(),
                types.DocumentAttributeVideo(duration=2, w=10, h=10),
            ],
            "animation",
            {},
            None,
        ),
    ],
)
def test_documents_become_the_export_media_kinds(
    tg: FakeTelegram, attributes: list[Any], kind: str, extra: dict[str, Any], file_name: str | None
) -> None:
    chat, record = group(tg)
    media = to_records(tg.send(chat, "", media=document(*attributes, size=77)), record).media
    assert media is not None
    assert (media.kind, media.extra, media.file_name, media.size) == (kind, extra, file_name, 77)


def test_a_voice_message_keeps_its_duration_and_a_video_its_dimensions(tg: FakeTelegram) -> None:
    chat, record = group(tg)
    voice = document(types.DocumentAttributeAudio(duration=7, voice=True), mime="audio/ogg")
    media = to_records(tg.send(chat, "", media=voice), record).media
    assert media is not None and (media.duration_s, media.mime) == (7, "audio/ogg")
    video = document(types.DocumentAttributeVideo(duration=30.9, w=1920, h=1080))
    media = to_records(tg.send(chat, "", media=video), record).media
    assert media is not None and (media.width, media.height, media.duration_s) == (1920, 1080, 30)


def test_polls_contacts_places_games_invoices_and_todos_convert(tg: FakeTelegram) -> None:
    chat, record = group(tg)
    poll = types.MessageMediaPoll(
        poll=types.Poll(
            id=1,
            question=text("Best bank?"),
            answers=[
                types.PollAnswer(text=text("A"), option=b"a"),
                types.PollAnswer(text=text("B"), option=b"b"),
            ],
            hash=0,
            closed=True,
        ),
        results=types.PollResults(
            results=[types.PollAnswerVoters(option=b"a", voters=4, chosen=True)], total_voters=5
        ),
    )
    geo = types.GeoPoint(long=-3.7, lat=40.4, access_hash=0)
    cases = [
        (
            poll,
            "poll",
            {
                "question": "Best bank?",
                "closed": True,
                "total_voters": 5,
                "answers": [
                    {"text": "A", "voters": 4, "chosen": True},
                    {"text": "B", "voters": None, "chosen": False},
                ],
            },
        ),
        (
            types.MessageMediaContact(
                phone_number="+3460", first_name="Ana", last_name="", vcard="", user_id=11
            ),
            "contact",
            {"first_name": "Ana", "last_name": None, "phone_number": "+3460"},
        ),
        (types.MessageMediaGeo(geo=geo), "location", {"latitude": 40.4, "longitude": -3.7}),
        (
            types.MessageMediaGeoLive(geo=geo, period=900),
            "location",
            {"latitude": 40.4, "longitude": -3.7, "live_period_s": 900},
        ),
        (
            types.MessageMediaVenue(
                geo=geo, title="Cafe", address="Main 1", provider="", venue_id="", venue_type=""
            ),
            "venue",
            {"latitude": 40.4, "longitude": -3.7, "place_name": "Cafe", "address": "Main 1"},
        ),
        (
            types.MessageMediaGame(
                game=types.Game(
                    id=1,
                    access_hash=1,
                    short_name="g",
                    title="Chess",
                    description="Play",
                    photo=types.PhotoEmpty(id=0),
                )
            ),
            "game",
            {"title": "Chess", "description": "Play"},
        ),
        (
            types.MessageMediaInvoice(
                title="Rent", description="May", currency="EUR", total_amount=90000, start_param=""
            ),
            "invoice",
            {"title": "Rent", "description": "May", "currency": "EUR", "amount": 90000},
        ),
        (
            types.MessageMediaToDo(
                todo=types.TodoList(
                    title=text("Move"), list=[types.TodoItem(id=1, title=text("Boxes"))]
                )
            ),
            "todo",
            {"title": "Move", "items": [{"id": 1, "text": "Boxes"}]},
        ),
    ]
    for raw, kind, extra in cases:
        media = to_records(tg.send(chat, "", media=raw), record).media
        assert media is not None
        assert (media.kind, media.extra) == (kind, extra)
    dice = to_records(
        tg.send(chat, "", media=types.MessageMediaDice(value=3, emoticon="🎲")), record
    )
    assert dice.media is None
