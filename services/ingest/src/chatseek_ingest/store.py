"""Writes to ``ingest.db``: accounts, chats, senders, messages and media, each change on the feed.

Invariants:
* Every function here runs inside the caller's ``db.transaction``; feed events are appended in
  that same transaction, so a reader never sees a message its consumers were not told about.
* A message is upserted by ``(account, chat_id, msg_id)`` and keeps its ``mid``; it is announced
  only when its content hash changed, so a repeated import or sync repeats no downstream work.
* The original text is stored as it came; nothing normalised is stored beside it (whoever
  compares texts normalises them, as lexical and fusion do).
* Extracted media text survives a re-import of the same message unless the media itself changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter

from chatseek_core import db, feed
from chatseek_core.db import Connection
from chatseek_ingest.model import ExportChat, ExportMedia, ExportMessage
from chatseek_ingest.schema import OWNER

__all__ = [
    "FEED_KIND",
    "Prepared",
    "StoreStats",
    "delete_chat",
    "delete_messages",
    "ensure_account",
    "ensure_source",
    "is_service",
    "message_hash",
    "prepare",
    "refresh_counts",
    "set_extracted",
    "status",
    "store_messages",
    "store_prepared",
    "upsert_chat",
]

FEED_KIND = "message"
_MENTION_TYPES = frozenset({"mention", "mention_name"})
_LOOKUP_CHUNK = 400
# Built once: json.dumps with any non-default argument builds an encoder on every call.
_JSON = json.JSONEncoder(ensure_ascii=False)
_HASH_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
_MESSAGE_COLUMNS = (
    "mid",
    "account",
    "chat_id",
    "msg_id",
    "date",
    "edit_date",
    "kind",
    "sender_id",
    "sender_name",
    "text",
    "entities",
    "reply_to_msg_id",
    "reply_to_peer_id",
    "topic_id",
    "fwd_from",
    "via_bot",
    "reactions_total",
    "reactions",
    "service_action",
    "has_link",
    "mentions",
    "grouped_id",
    "content_hash",
)
# What an update rewrites: everything but the identity. A None binds as NULL at the cost of
# an int (``db`` registers an adapter for it), so every row goes through one statement.
_UPDATED_COLUMNS = _MESSAGE_COLUMNS[4:]
# A prepared message's values: those columns but its content hash, which the writer adds.
_VALUE_COLUMNS = _UPDATED_COLUMNS[:-1]
_INSERT_MESSAGE = f"INSERT INTO messages ({', '.join(_MESSAGE_COLUMNS)})"
_UPDATE_MESSAGE = (
    f"UPDATE messages SET {', '.join(f'{column} = ?' for column in _UPDATED_COLUMNS)} WHERE mid = ?"
)
# A changed media row keeps its extracted text only while kind, name and size stay the same.
_UPSERT_MEDIA = (
    "INSERT INTO media (mid, kind, file_name, mime, size, extra) VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (mid) DO UPDATE SET"
    "  extract_state = CASE WHEN media.kind = excluded.kind"
    "    AND media.file_name IS excluded.file_name AND media.size IS excluded.size"
    "    THEN media.extract_state ELSE 'pending' END,"
    "  extracted_text = CASE WHEN media.kind = excluded.kind"
    "    AND media.file_name IS excluded.file_name AND media.size IS excluded.size"
    "    THEN media.extracted_text ELSE NULL END,"
    "  kind = excluded.kind, file_name = excluded.file_name, mime = excluded.mime,"
    "  size = excluded.size, extra = excluded.extra"
)


@dataclass
class StoreStats:
    """What one ``store_messages`` call did."""

    new: int = 0
    updated: int = 0
    unchanged: int = 0
    media: dict[str, int] = field(default_factory=dict)
    new_mids: list[int] = field(default_factory=list)


def ensure_account(conn: Connection, account: str) -> None:
    """Create ``account`` if it does not exist; the first account becomes the active one."""
    conn.execute(
        "INSERT INTO accounts (account, is_active)"
        " VALUES (?, NOT EXISTS (SELECT 1 FROM accounts WHERE is_active = 1))"
        " ON CONFLICT (account) DO NOTHING",
        (account,),
    )


def ensure_source(conn: Connection, account: str, source_id: str, kind: str, target: str) -> None:
    """Record a source (``import:<slug>``, ``chat:…``, ``folder:…``) if it is new."""
    conn.execute(
        "INSERT INTO sources (account, source_id, kind, target) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (account, source_id) DO NOTHING",
        (account, source_id, kind, target),
    )


def upsert_chat(
    conn: Connection,
    account: str,
    chat: ExportChat,
    *,
    source_id: str | None,
    is_import: bool,
) -> None:
    """Insert or update a chat's descriptive columns; sync state is left untouched."""
    conn.execute(
        "INSERT INTO chats (account, chat_id, type, title, username, source_id, is_import)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (account, chat_id) DO UPDATE SET"
        "  type = CASE WHEN chats.type = 'forum' AND excluded.type = 'supergroup'"
        "         THEN chats.type ELSE excluded.type END,"
        "  title = CASE WHEN excluded.title = '' THEN chats.title ELSE excluded.title END,"
        "  username = COALESCE(excluded.username, chats.username),"
        "  source_id = COALESCE(chats.source_id, excluded.source_id),"
        "  is_import = MAX(chats.is_import, excluded.is_import)",
        (account, chat.chat_id, chat.type, chat.title, chat.username, source_id, int(is_import)),
    )


def _mentions(message: ExportMessage) -> list[str]:
    out = []
    for entity in message.entities:
        if entity.get("type") in _MENTION_TYPES:
            text = str(entity.get("text", "")).lstrip("@").strip().lower()
            if text:
                out.append(text)
    return out


def _json_list(values: list[str]) -> str:
    return _JSON.encode(values) if values else "[]"


def message_hash(message: ExportMessage) -> str:
    """A digest of everything about a message that derived stores depend on."""
    return _digest(prepare(message))


# The values a digest covers, in its order; the media's kind, name and size and a poll's
# question follow, then the album's id when there is one.
_HASHED_VALUES = itemgetter(
    *map(
        _VALUE_COLUMNS.index,
        "date edit_date kind sender_id sender_name text reply_to_msg_id topic_id"
        " reactions_total service_action".split(),
    )
)
_GROUPED = _VALUE_COLUMNS.index("grouped_id")


def _digest(p: Prepared) -> str:
    """``message_hash`` of the message prepared as ``p``.

    The importing process computes it, not the reader process that prepares messages: the
    reader sets an import's pace, and this JSON encoding was a seventh of its work.
    """
    values, media, question = p[2], p[3], p[5]
    parts: list[object] = list(_HASHED_VALUES(values))
    if media is None:
        parts += (None, None, None, None)
    else:
        parts += (media[0], media[1], media[3], question)
    if values[_GROUPED] is not None:
        parts.append(values[_GROUPED])  # only then, so that older digests stay as they were
    payload = _HASH_JSON.encode(parts)
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=12).hexdigest()


def _lookup(
    conn: Connection, account: str, keys: Sequence[tuple[int, int]]
) -> dict[tuple[int, int], tuple[int, str]]:
    """``(chat_id, msg_id) -> (mid, content_hash)`` for the keys that are stored."""
    found: dict[tuple[int, int], tuple[int, str]] = {}
    for start in range(0, len(keys), _LOOKUP_CHUNK):
        chunk = keys[start : start + _LOOKUP_CHUNK]
        placeholders = ",".join("(?, ?)" for _ in chunk)
        flat = [v for pair in chunk for v in pair]
        for mid, chat_id, msg_id, content_hash in conn.execute(
            "SELECT mid, chat_id, msg_id, content_hash FROM messages"
            f" WHERE account = ? AND (chat_id, msg_id) IN (VALUES {placeholders})",
            (account, *flat),
        ):
            found[(chat_id, msg_id)] = (mid, content_hash)
    return found


Prepared = tuple[
    int,
    int,
    tuple[object, ...],
    tuple[object, ...] | None,
    tuple[int, str, str] | None,
    object,
]
"""A message as the store writes it, made without the database: ``(chat_id, msg_id, values,
media, sender, question)``, where ``values`` are the message columns after the identity but
its content hash (``_VALUE_COLUMNS``), ``media`` the media row without its ``mid``, ``sender``
``(sender_id, kind, display name)``, each None where there is none, and ``question`` a poll's
question (part of the content hash, not a column of its own). Plain values only, so that a
reader process can hand it over cheaply."""

_KIND = _VALUE_COLUMNS.index("kind")


def prepare(m: ExportMessage) -> Prepared:
    """What ``store_prepared`` writes for message ``m``: everything that does not read the store."""
    values = (
        m.date,
        m.edit_date,
        m.kind,
        m.sender_id,
        m.sender_name,
        m.text,
        _JSON.encode(m.entities) if m.entities else None,
        m.reply_to_msg_id,
        m.reply_to_peer_id,
        m.topic_id,
        m.forwarded_from,
        m.via_bot,
        m.reactions_total,
        _JSON.encode(m.reactions) if m.reactions else None,
        m.service_action,
        int(m.has_link),
        _json_list(_mentions(m)),
        m.grouped_id,
    )
    media = question = None
    if m.media is not None:
        media = _media_values(m.media)
        question = m.media.extra.get("question")
    sender = None
    if m.sender_id is not None and m.sender_name:
        sender = (m.sender_id, m.sender_kind or "user", m.sender_name)
    return (m.chat_id, m.msg_id, values, media, sender, question)


def is_service(p: Prepared) -> bool:
    """Whether prepared message ``p`` is a service message (a join, a pin, a title change)."""
    return p[2][_KIND] != "message"


def store_messages(conn: Connection, account: str, messages: Sequence[ExportMessage]) -> StoreStats:
    """Upsert ``messages`` (any chats, already upserted) and announce what changed.

    A message repeated within ``messages`` is stored as if the later copy came in a batch of
    its own: it updates the earlier one, or is unchanged when its hash is the same.

    Returns:
        Counts of new, updated and unchanged messages and media by kind.
    """
    return store_prepared(conn, account, [prepare(m) for m in messages])


def store_prepared(conn: Connection, account: str, messages: Sequence[Prepared]) -> StoreStats:
    """``store_messages`` for messages already through ``prepare``."""
    stats = StoreStats()
    for run in _distinct_runs(messages):
        _store_run(conn, account, run, stats)
    return stats


def _distinct_runs(messages: Sequence[Prepared]) -> Iterator[Sequence[Prepared]]:
    """``messages`` cut into consecutive runs in which no ``(chat_id, msg_id)`` repeats."""
    keys = [(p[0], p[1]) for p in messages]
    if len(set(keys)) == len(keys):
        if messages:
            yield messages
        return
    start = 0
    seen: set[tuple[int, int]] = set()
    for i, key in enumerate(keys):
        if key in seen:
            yield messages[start:i]
            start = i
            seen.clear()
        seen.add(key)
    yield messages[start:]


def _store_run(
    conn: Connection, account: str, messages: Sequence[Prepared], stats: StoreStats
) -> None:
    """``store_prepared`` for messages whose keys are distinct.

    A new message gets ``mid`` = the largest stored ``mid`` + 1, in order: what SQLite itself
    assigns to an INTEGER PRIMARY KEY (no AUTOINCREMENT) inside this write transaction, given
    here so that new rows need no second lookup and go in many to a statement.
    """
    existing = _lookup(conn, account, [(p[0], p[1]) for p in messages])
    next_mid = int(conn.execute("SELECT COALESCE(MAX(mid), 0) FROM messages").fetchone()[0]) + 1
    inserts: list[tuple[object, ...]] = []
    updates: list[tuple[object, ...]] = []
    media_rows: list[tuple[object, ...]] = []
    media_gone: list[tuple[int]] = []
    senders: dict[int, tuple[str, str]] = {}
    events = []
    for p in messages:
        chat_id, msg_id, prepared, media, sender, _question = p
        digest = _digest(p)
        before = existing.get((chat_id, msg_id))
        if before is not None and before[1] == digest:
            stats.unchanged += 1
            continue
        if before is None:
            stats.new += 1
            mid = next_mid
            next_mid += 1
            inserts.append((mid, account, chat_id, msg_id, *prepared, digest))
        else:
            stats.updated += 1
            mid = before[0]
            updates.append((*prepared, digest, mid))
        if media is not None:
            kind = str(media[0])
            stats.media[kind] = stats.media.get(kind, 0) + 1
            media_rows.append((mid, *media))
        elif before is not None:
            # A new mid has no media row: a deleted message's media went with it (ON DELETE
            # CASCADE), so only a stored message can have media to lose.
            media_gone.append((mid,))
        if sender is not None:
            senders[sender[0]] = (sender[1], sender[2])
        events.append((FEED_KIND, account, chat_id, msg_id, "upsert"))
    if updates:
        conn.executemany(_UPDATE_MESSAGE, updates)
    if inserts:
        db.insert_rows(conn, _INSERT_MESSAGE, inserts)
    if media_gone:
        conn.executemany("DELETE FROM media WHERE mid = ?", media_gone)
    if media_rows:
        conn.executemany(_UPSERT_MEDIA, media_rows)
    if senders:
        conn.executemany(
            "INSERT INTO senders (account, sender_id, kind, display_name) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (account, sender_id) DO UPDATE SET display_name = excluded.display_name",
            [(account, sid, kind, name) for sid, (kind, name) in senders.items()],
        )
    feed.append(conn, events)


def _media_values(media: ExportMedia) -> tuple[object, ...]:
    """A media row without its ``mid``."""
    extra = dict(media.extra)
    if media.path:
        extra["export_path"] = media.path
    return (
        media.kind,
        media.file_name,
        media.mime,
        media.size,
        _JSON.encode(extra) if extra else None,
    )


def set_extracted(
    conn: Connection, mid: int, state: str, text: str | None, error: str | None = None
) -> None:
    """Record the outcome of reading a message's media and announce the message again."""
    set_extracted_many(conn, [(mid, state, text, error)])


def set_extracted_many(
    conn: Connection, outcomes: Sequence[tuple[int, str, str | None, str | None]]
) -> None:
    """``set_extracted`` for each ``(mid, state, text, error)``; a message whose media gave
    text is announced again."""
    conn.executemany(
        "UPDATE media SET extract_state = ?, extracted_text = ?, extract_error = ?,"
        " extracted_at = unixepoch() WHERE mid = ?",
        [(state, text, error, mid) for mid, state, text, error in outcomes],
    )
    events = []
    for mid, _, text, _ in outcomes:
        if not text:
            continue
        row = conn.execute(
            "SELECT account, chat_id, msg_id FROM messages WHERE mid = ?", (mid,)
        ).fetchone()
        if row is not None:
            events.append((FEED_KIND, row[0], row[1], row[2], "upsert"))
    if events:
        feed.append(conn, events)


def delete_messages(conn: Connection, account: str, chat_id: int, msg_ids: Sequence[int]) -> int:
    """Delete messages (their media cascade) and announce each deletion; returns how many."""
    deleted = 0
    events = []
    for msg_id in msg_ids:
        cur = conn.execute(
            "DELETE FROM messages WHERE account = ? AND chat_id = ? AND msg_id = ?",
            (account, chat_id, msg_id),
        )
        if cur.rowcount:
            deleted += 1
            events.append((FEED_KIND, account, chat_id, msg_id, "delete"))
    feed.append(conn, events)
    return deleted


def delete_chat(conn: Connection, account: str, chat_id: int) -> int:
    """Delete a chat and all its messages, announcing every deletion; returns messages deleted."""
    msg_ids = [
        int(r[0])
        for r in conn.execute(
            "SELECT msg_id FROM messages WHERE account = ? AND chat_id = ?", (account, chat_id)
        )
    ]
    deleted = delete_messages(conn, account, chat_id, msg_ids)
    conn.execute("DELETE FROM tags WHERE account = ? AND chat_id = ?", (account, chat_id))
    conn.execute("DELETE FROM chats WHERE account = ? AND chat_id = ?", (account, chat_id))
    return deleted


def refresh_counts(conn: Connection, account: str, chat_ids: Iterable[int]) -> None:
    """Recompute the stored message count and newest id of chats."""
    for chat_id in set(chat_ids):
        conn.execute(
            "UPDATE chats SET message_count = (SELECT COUNT(*) FROM messages m"
            "  WHERE m.account = chats.account AND m.chat_id = chats.chat_id"
            "  AND m.kind = 'message'),"
            " last_msg_id = MAX(last_msg_id, COALESCE((SELECT MAX(msg_id) FROM messages m"
            "  WHERE m.account = chats.account AND m.chat_id = chats.chat_id), 0))"
            " WHERE account = ? AND chat_id = ?",
            (account, chat_id),
        )


def status(conn: Connection) -> tuple[int, dict[str, int]]:
    """The schema version of ``ingest.db`` and its counts: chats, messages, pending media, feed."""
    counts = conn.execute(
        "SELECT (SELECT COUNT(*) FROM chats), (SELECT COUNT(*) FROM messages),"
        " (SELECT COUNT(*) FROM media WHERE extract_state = 'pending')"
    ).fetchone()
    version = db.schema_version(conn, OWNER)
    details = {
        "chats": counts[0],
        "messages": counts[1],
        "media_pending": counts[2],
        "feed_head": feed.head(conn),
    }
    return version, details
