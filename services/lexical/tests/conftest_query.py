"""Fixture stores for the strict-query tests: real ingest.db and lexical.db files.

``build_store`` writes ingest rows through the real ingest schema and the matching ``msg_fts``
rows (``raw = normalise(text)``, ``stem = analyse(text)``, file name and extracted text
appended as the indexer does), then returns lexical.db with ingest.db attached read-only.

Two data sets: ``RICH`` (two chats of the active account around the Europe/Madrid DST change
of 2026-03-29, plus a channel of a second account) and ``LUCENE16`` (the 16-document fixture
of the Lucene conformance harness: words alpha/beta/gamma/delta by bit, even docs from alice in
a legacy group, odd docs from bob in a private chat, doc 0 a photo without words).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chatseek_core import db
from chatseek_core.text import analyse, normalise
from chatseek_ingest import schema as ingest_schema
from chatseek_lexical import schema as lexical_schema

ME = "me"
WORK = "work"
EXPATS = -1001111111111
BOB_CHAT = 2002
NEWS = -1003333333333
GROUP16 = -4000000001
BOB16 = 1000000002


@dataclass(frozen=True, slots=True)
class Media:
    kind: str
    file_name: str | None = None
    mime: str | None = None
    size: int | None = None
    extracted: str | None = None


@dataclass(frozen=True, slots=True)
class Msg:
    account: str
    chat_id: int
    msg_id: int
    date: str
    sender: int | None
    text: str
    kind: str = "message"
    topic: int | None = None
    has_link: bool = False
    media: Media | None = None
    grouped: int | None = None


@dataclass(frozen=True, slots=True)
class Chat:
    account: str
    chat_id: int
    type: str
    title: str
    username: str | None = None
    complete: bool = True
    fetched: str | None = "2026-04-03T00:00:00Z"


@dataclass(frozen=True, slots=True)
class Sender:
    account: str
    sender_id: int
    name: str
    username: str | None = None


@dataclass(frozen=True, slots=True)
class Tag:
    tag: str
    target: str
    account: str
    chat_id: int = 0
    sender_id: int = 0
    msg_id: int = 0


@dataclass(frozen=True, slots=True)
class DataSet:
    accounts: Sequence[tuple[str, bool]]
    chats: Sequence[Chat]
    senders: Sequence[Sender]
    messages: Sequence[Msg]
    tags: Sequence[Tag] = field(default_factory=tuple)


def ts(iso: str) -> int:
    """Unix seconds of an ISO instant (``Z`` allowed)."""
    return int(datetime.fromisoformat(iso).timestamp())


PDF = Media("document", "invoice-2026-03.pdf", "application/pdf", 250_000, "Total due 450 EUR")
PHOTO = Media("photo", None, "image/jpeg", 2 * 1024 * 1024)
PNG_FILE = Media("document", "Plan.PNG", "image/png", 12 * 1024 * 1024)
VOICE = Media("voice", None, "audio/ogg", 30 * 1024)
STICKER = Media("sticker", None, "image/webp", 20 * 1024)
PLACE = Media("location")
CONTACT = Media("contact")

RICH = DataSet(
    accounts=[(ME, True), (WORK, False)],
    chats=[
        Chat(ME, EXPATS, "forum", "Expats Madrid"),
        Chat(ME, BOB_CHAT, "private", "Bob Builder", "bob", complete=False, fetched=None),
        Chat(WORK, NEWS, "channel", "Work News", "worknews"),
    ],
    senders=[
        Sender(ME, 1001, "Alice Smith", "asmith"),
        Sender(ME, 1002, "Alice Jones"),
        Sender(ME, 1003, "Иван Петров", "ivan"),
        Sender(ME, 2002, "Bob Builder", "bob"),
        Sender(ME, 9, "Me", "me_myself"),
        Sender(WORK, 3001, "Carol Reed", "carol"),
    ],
    messages=[
        Msg(ME, EXPATS, 1, "2026-03-27T10:00:00Z", 1001, "Welcome to the group! Rules are pinned."),
        Msg(
            ME,
            EXPATS,
            2,
            "2026-03-28T22:30:00Z",
            1002,
            "Looking for a flat near Retiro, budget 1200 EUR",
            topic=10,
        ),
        Msg(
            ME,
            EXPATS,
            3,
            "2026-03-28T23:30:00Z",
            1003,
            "Ищу квартиру в центре, кто знает агентство?",
            topic=10,
        ),
        Msg(ME, EXPATS, 4, "2026-03-29T01:30:00Z", 1001, "Invoice attached", topic=20, media=PDF),
        Msg(
            ME,
            EXPATS,
            5,
            "2026-03-29T21:30:00Z",
            1001,
            "Photo of the apartment",
            topic=10,
            media=PHOTO,
        ),
        Msg(
            ME,
            EXPATS,
            6,
            "2026-03-29T22:30:00Z",
            1003,
            "Call me at +34 612 345 678 or mail ivan@example.com",
            topic=20,
        ),
        Msg(
            ME,
            EXPATS,
            7,
            "2026-03-30T09:00:00Z",
            1002,
            "Card 4111 1111 1111 1111 exp 12/28",
            topic=20,
        ),
        Msg(
            ME,
            EXPATS,
            8,
            "2026-03-30T10:00:00Z",
            1001,
            "Alice Smith pinned a message",
            kind="service",
        ),
        Msg(
            ME,
            EXPATS,
            9,
            "2026-03-31T12:00:00Z",
            1001,
            "Check https://t.me/expats_madrid/1 and www.example.org",
            has_link=True,
        ),
        Msg(
            ME,
            EXPATS,
            10,
            "2026-04-01T08:00:00Z",
            1003,
            "Voice note about the invoice",
            topic=20,
            media=VOICE,
        ),
        Msg(ME, EXPATS, 11, "2026-04-02T08:00:00Z", 1002, "password: hunter22 for the wifi"),
        Msg(
            ME, EXPATS, 12, "2025-10-26T10:00:00Z", 1001, "Clocks go back tonight. Café con leche?"
        ),
        Msg(ME, BOB_CHAT, 101, "2026-03-28T09:00:00Z", 2002, "Hi! Did you get the invoice?"),
        Msg(
            ME,
            BOB_CHAT,
            102,
            "2026-03-28T09:05:00Z",
            9,
            "Yes, paying today. IBAN ES91 2100 0418 4502 0005 1332",
        ),
        Msg(ME, BOB_CHAT, 103, "2026-03-29T12:00:00Z", 2002, "", media=STICKER),
        Msg(ME, BOB_CHAT, 104, "2026-03-29T12:01:00Z", 2002, "Meet here", media=PLACE),
        Msg(ME, BOB_CHAT, 105, "2026-03-30T18:00:00Z", 9, "My DNI is 12345678Z"),
        Msg(ME, BOB_CHAT, 106, "2026-03-31T18:00:00Z", 2002, "alpha beta gamma", media=PNG_FILE),
        Msg(ME, BOB_CHAT, 107, "2026-04-01T18:00:00Z", 2002, "Gamma, alpha; beta!", media=CONTACT),
        Msg(WORK, NEWS, 501, "2026-03-29T09:00:00Z", 3001, "Quarterly invoice report published"),
        Msg(
            WORK,
            NEWS,
            502,
            "2026-03-30T09:00:00Z",
            3001,
            "api_key = sk-abcdefghijklmnopqrstuvwx1234",
        ),
    ],
    tags=[
        Tag("flat", "sender", ME, sender_id=1002),
        Tag("money", "message", ME, chat_id=BOB_CHAT, msg_id=102),
        Tag("Home", "chat", ME, chat_id=BOB_CHAT),
        Tag("news", "chat", WORK, chat_id=NEWS),
    ],
)

RICH_IDS = {
    (m.account, m.chat_id, m.msg_id): index for index, m in enumerate(RICH.messages, start=1)
}

_WORDS16 = ("alpha", "beta", "gamma", "delta")


def _lucene16() -> DataSet:
    base = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)
    messages = []
    for doc in range(16):
        text = " ".join(w for bit, w in enumerate(_WORDS16) if doc >> bit & 1)
        even = doc % 2 == 0
        when = (base + timedelta(days=doc)).isoformat()
        messages.append(
            Msg(
                ME,
                GROUP16 if even else BOB16,
                doc + 1,
                when,
                1000000001 if even else 1000000002,
                text,
                media=None if text else Media("photo"),
            )
        )
    return DataSet(
        accounts=[(ME, True)],
        chats=[Chat(ME, GROUP16, "group", "fixture-group"), Chat(ME, BOB16, "private", "bob")],
        senders=[Sender(ME, 1000000001, "alice"), Sender(ME, 1000000002, "bob")],
        messages=messages,
    )


LUCENE16 = _lucene16()


def build_store(directory: Path, data: DataSet) -> db.Connection:
    """Write ``data`` to ingest.db and lexical.db under ``directory``; return the search conn."""
    ingest_path = directory / "ingest.db"
    writer = db.connect(ingest_path)
    db.migrate(writer, ingest_schema.OWNER, ingest_schema.MIGRATIONS)
    lexical = db.connect(directory / "lexical.db")
    db.migrate(lexical, lexical_schema.OWNER, lexical_schema.MIGRATIONS)
    with db.transaction(writer):
        for account, active in data.accounts:
            writer.execute(
                "INSERT INTO accounts (account, provider, is_active) VALUES (?, 'telegram', ?)",
                (account, int(active)),
            )
        for chat in data.chats:
            writer.execute(
                "INSERT INTO chats (account, chat_id, type, title, username, history_complete,"
                " last_fetched_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    chat.account,
                    chat.chat_id,
                    chat.type,
                    chat.title,
                    chat.username,
                    int(chat.complete),
                    ts(chat.fetched) if chat.fetched else None,
                ),
            )
        for sender in data.senders:
            writer.execute(
                "INSERT INTO senders (account, sender_id, display_name, username)"
                " VALUES (?, ?, ?, ?)",
                (sender.account, sender.sender_id, sender.name, sender.username),
            )
        names = {(s.account, s.sender_id): s.name for s in data.senders}
        fts_rows = []
        for msg in data.messages:
            cursor = writer.execute(
                "INSERT INTO messages (account, chat_id, msg_id, date, kind, sender_id,"
                " sender_name, text, topic_id, has_link, grouped_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    msg.account,
                    msg.chat_id,
                    msg.msg_id,
                    ts(msg.date),
                    msg.kind,
                    msg.sender,
                    names.get((msg.account, msg.sender or 0), ""),
                    msg.text,
                    msg.topic,
                    int(msg.has_link),
                    msg.grouped,
                ),
            )
            mid = int(cursor.lastrowid or 0)
            indexed = msg.text
            if msg.media is not None:
                media = msg.media
                writer.execute(
                    "INSERT INTO media (mid, kind, file_name, mime, size, extracted_text)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (mid, media.kind, media.file_name, media.mime, media.size, media.extracted),
                )
                parts = [msg.text, media.file_name or "", media.extracted or ""]
                indexed = "\n".join(p for p in parts if p)
            fts_rows.append((mid, msg, indexed))
        for tag in data.tags:
            writer.execute(
                "INSERT INTO tags (tag, target, account, chat_id, sender_id, msg_id)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (tag.tag, tag.target, tag.account, tag.chat_id, tag.sender_id, tag.msg_id),
            )
    writer.close()
    with db.transaction(lexical):
        for mid, msg, indexed in fts_rows:
            lexical.execute(
                "INSERT INTO msg_fts (rowid, raw, stem) VALUES (?, ?, ?)",
                (mid, normalise(indexed), analyse(indexed)),
            )
            lexical.execute(
                "INSERT INTO indexed_messages (mid, account, chat_id, msg_id, content_hash)"
                " VALUES (?, ?, ?, ?, '')",
                (mid, msg.account, msg.chat_id, msg.msg_id),
            )
    db.attach_readonly(lexical, ingest_path, "ingest")
    return lexical
