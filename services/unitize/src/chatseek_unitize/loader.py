"""Reading ``Msg`` values and chat facts out of the attached, read-only ``ingest`` database.

Owns the one mapping from ingest rows (``messages`` + ``media``) to the unitize core's ``Msg``;
nothing else in this service selects message columns. Invariants:
* The connection has ``ingest.db`` attached as ``ingest``; nothing here writes.
* A reply into another chat (``reply_to_peer_id`` set) is not a reply for unitize.
* Media text is the extracted text when there is some, else the poll question, contact name or
  venue description kept in the media's ``extra``.
* Every query is bounded by the caller (ids, a key range and a limit, or one chat).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chatseek_core.db import Connection
from chatseek_unitize.model import Msg

__all__ = [
    "ChatInfo",
    "IN_CHUNK",
    "SELECT_MESSAGES",
    "album_members",
    "chat_info",
    "children_of",
    "comments_of",
    "content_hashes",
    "earlier_in_topic",
    "iter_chat",
    "load_chat",
    "load_ids",
    "senders",
    "load_topic_page",
    "message_ids",
    "row_to_msg",
    "stored_count",
]

_NO_MENTIONS = "[]"
IN_CHUNK = 500
"""The most values bound into one ``IN (...)`` list."""
DENSE_SLACK = 4
"""``load_ids`` reads a range when it spans at most a quarter more ids than it wants."""
STREAM_BATCH = 2000
"""Rows ``iter_chat`` fetches at a time."""

SELECT_MESSAGES = (
    "SELECT m.msg_id, m.date, m.sender_id, m.sender_name, m.text, m.reply_to_msg_id,"
    " m.reply_to_peer_id, m.topic_id, md.kind, md.file_name, md.extracted_text, md.extra,"
    " m.reactions_total, m.kind, m.comment_channel_id, m.comment_post_id, m.mentions,"
    " m.edit_date, m.grouped_id FROM ingest.messages m LEFT JOIN ingest.media md"
    " ON md.mid = m.mid"
)
_SELECT_IDS = "SELECT m.msg_id FROM ingest.messages m"


@dataclass(frozen=True, slots=True)
class ChatInfo:
    """What unitize needs to know about one ingest chat.

    Attributes:
        account: The account the chat belongs to.
        chat_id: Marked chat id.
        type: Ingest chat type (private, saved, bot, group, supergroup, forum, channel).
        title: The chat's title, possibly empty.
        linked_chat_id: The discussion group of a channel, or None.
    """

    account: str
    chat_id: int
    type: str
    title: str
    linked_chat_id: int | None


def _media_text(kind: str | None, extracted: str | None, extra_json: str | None) -> str | None:
    if extracted:
        return str(extracted)
    if not kind or not extra_json:
        return None
    try:
        extra: Any = json.loads(extra_json)
    except ValueError:
        return None
    if not isinstance(extra, dict):
        return None
    if kind == "poll":
        parts = [extra.get("question")]
    elif kind == "contact":
        parts = [extra.get("first_name"), extra.get("last_name")]
    elif kind == "venue":
        parts = [extra.get("place_name"), extra.get("address")]
    else:
        return None
    text = " ".join(str(p) for p in parts if p)
    return text or None


def _mentions(raw: str | None) -> tuple[str, ...]:
    if not raw or raw == _NO_MENTIONS:
        return ()
    try:
        value: Any = json.loads(raw)
    except ValueError:
        return ()
    if not isinstance(value, list):
        return ()
    return tuple(str(v) for v in value if v)


def row_to_msg(row: Sequence[Any], shared: dict[Any, Any] | None = None) -> Msg:
    """Turn one row of the module's message SELECT into a ``Msg``.

    SQLite hands integer columns back as ``int`` already; only NULLs and text need care here.
    With ``shared``, equal sender ids and names become the same objects across the rows that
    share it: SQLite makes new ones for every row, which a chat of many messages by few
    senders holds hundreds of thousands of times.
    """
    (
        msg_id,
        date,
        sender_id,
        sender_name,
        text,
        reply_to,
        reply_peer,
        topic_id,
        media_kind,
        file_name,
        extracted,
        extra,
        reactions,
        kind,
        comment_channel,
        comment_post,
        mentions,
        edit_date,
        grouped_id,
    ) = row
    if shared is not None:
        sender_id = shared.setdefault(sender_id, sender_id)
        sender_name = shared.setdefault(sender_name, sender_name)
    return Msg(
        msg_id,
        date,
        sender_id,
        sender_name or "",
        text or "",
        None if reply_peer is not None else reply_to,
        topic_id,
        media_kind,
        file_name,
        _media_text(media_kind, extracted, extra) if media_kind or extracted else None,
        reactions or 0,
        kind == "service",
        (comment_channel, comment_post)
        if comment_channel is not None and comment_post is not None
        else None,
        _mentions(mentions),
        edit_date,
        grouped_id,
    )


def _rows(
    conn: Connection, sql: str, params: Sequence[Any], wanted: Collection[int] | None = None
) -> list[Msg]:
    """Run a message SELECT on a plain-tuple cursor and convert every row, or only the rows
    whose message id ``wanted`` holds (the others are skipped before they are decoded)."""
    cur = conn.cursor()
    cur.row_factory = None
    shared: dict[Any, Any] = {}
    rows = cur.execute(sql, params)
    if wanted is None:
        return [row_to_msg(r, shared) for r in rows]
    return [row_to_msg(r, shared) for r in rows if r[0] in wanted]


def chat_info(conn: Connection, account: str, chat_id: int) -> ChatInfo | None:
    """The chat's facts, or None when ingest no longer has it."""
    row = conn.execute(
        "SELECT type, title, linked_chat_id FROM ingest.chats WHERE account = ? AND chat_id = ?",
        (account, chat_id),
    ).fetchone()
    if row is None:
        return None
    linked = None if row[2] is None else int(row[2])
    return ChatInfo(account, chat_id, str(row[0]), str(row[1] or ""), linked)


def _chunks(values: Sequence[int]) -> Iterable[Sequence[int]]:
    for start in range(0, len(values), IN_CHUNK):
        yield values[start : start + IN_CHUNK]


def load_ids(
    conn: Connection, account: str, chat_id: int, msg_ids: Iterable[int]
) -> dict[int, Msg]:
    """The messages of ``msg_ids`` that ingest still has, by id.

    Ids that lie close together (a feed batch of new messages) are read as one range of the
    ``(account, chat_id, msg_id)`` index, the few rows between them skipped before they are
    decoded: a range costs about a sixth less than looking each id up.
    """
    ids = sorted(set(msg_ids))
    out: dict[int, Msg] = {}
    if len(ids) > 1 and ids[-1] - ids[0] < len(ids) + len(ids) // DENSE_SLACK:
        return {
            msg.msg_id: msg
            for msg in _rows(
                conn,
                f"{SELECT_MESSAGES} WHERE m.account = ? AND m.chat_id = ?"
                " AND m.msg_id BETWEEN ? AND ?",
                (account, chat_id, ids[0], ids[-1]),
                set(ids),
            )
        }
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        for msg in _rows(
            conn,
            f"{SELECT_MESSAGES} WHERE m.account = ? AND m.chat_id = ? AND m.msg_id IN ({marks})",
            (account, chat_id, *chunk),
        ):
            out[msg.msg_id] = msg
    return out


def album_members(
    conn: Connection, account: str, chat_id: int, grouped_ids: Iterable[int]
) -> dict[int, Msg]:
    """Every stored message of the albums (media groups) ``grouped_ids``, by id."""
    groups = sorted(set(grouped_ids))
    out: dict[int, Msg] = {}
    for chunk in _chunks(groups):
        marks = ",".join("?" * len(chunk))
        for msg in _rows(
            conn,
            f"{SELECT_MESSAGES} WHERE m.account = ? AND m.chat_id = ?"
            f" AND m.grouped_id IN ({marks})",
            (account, chat_id, *chunk),
        ):
            out[msg.msg_id] = msg
    return out


def children_of(
    conn: Connection,
    account: str,
    chat_id: int,
    parent_ids: Iterable[int],
    pool: Mapping[int, Msg] | None = None,
) -> list[Msg]:
    """Same-chat messages replying to any of ``parent_ids``.

    With ``pool`` (messages already read in this transaction, by id), only the replies' ids are
    selected and the ones the pool holds are taken from it (see ``_pooled``).
    """
    ids = sorted(set(parent_ids))
    out: list[Msg] = []
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        where = (
            f" WHERE m.account = ? AND m.chat_id = ?"
            f" AND m.reply_to_msg_id IN ({marks}) AND m.reply_to_peer_id IS NULL"
        )
        params = (account, chat_id, *chunk)
        if pool is None:
            out.extend(_rows(conn, SELECT_MESSAGES + where, params))
        else:
            out.extend(_pooled(conn, account, chat_id, _SELECT_IDS + where, params, pool))
    return out


def load_topic_page(
    conn: Connection,
    account: str,
    chat_id: int,
    topic_id: int | None,
    start: tuple[int, int] | None,
    limit: int,
    pool: Mapping[int, Msg] | None = None,
) -> list[Msg]:
    """Up to ``limit`` messages of one topic from ``start`` (a ``chrono_key``) on, in order.

    Args:
        topic_id: The topic, or None for messages outside topics.
        start: The first ``(date, msg_id)`` to return, inclusive; None for the topic's start.
        pool: Messages already read in this transaction, by id: only the page's ids are
            selected, and the messages the pool holds are taken from it (see ``_pooled``).
    """
    date, msg_id = start if start is not None else (-(2**62), -(2**62))
    where = (
        " WHERE m.account = ? AND m.chat_id = ? AND m.topic_id IS ?"
        " AND m.date >= ? AND (m.date > ? OR m.msg_id >= ?)"
        " ORDER BY m.date, m.msg_id LIMIT ?"
    )
    params = (account, chat_id, topic_id, date, date, msg_id, limit)
    if pool is None:
        return _rows(conn, SELECT_MESSAGES + where, params)
    return _pooled(conn, account, chat_id, _SELECT_IDS + where, params, pool)


def _pooled(
    conn: Connection,
    account: str,
    chat_id: int,
    sql: str,
    params: Sequence[Any],
    pool: Mapping[int, Msg],
) -> list[Msg]:
    """The messages whose ids ``sql`` selects, in its order: from ``pool`` where it has them,
    the rest read by id.

    A feed batch has already read its changed messages, and the window pages and replies it
    walks next are mostly those same messages: selecting ids alone skips the media join and
    the row decoding (a 2,048-message page: about 1 ms against 10). Within one transaction a
    pooled message equals what a full read returns.
    """
    ids = [row[0] for row in conn.execute(sql, params)]
    missing = [i for i in ids if i not in pool]
    read = load_ids(conn, account, chat_id, missing) if missing else {}
    out: list[Msg] = []
    for i in ids:
        msg = pool.get(i)
        if msg is None:
            msg = read.get(i)
        if msg is not None:
            out.append(msg)
    return out


def earlier_in_topic(
    conn: Connection, account: str, chat_id: int, msg: Msg, limit: int
) -> list[Msg]:
    """Up to ``limit`` non-service messages of ``msg``'s topic before it, nearest first."""
    return _rows(
        conn,
        f"{SELECT_MESSAGES} WHERE m.account = ? AND m.chat_id = ? AND m.topic_id IS ?"
        " AND m.date <= ? AND (m.date < ? OR m.msg_id < ?) AND m.kind = 'message'"
        " ORDER BY m.date DESC, m.msg_id DESC LIMIT ?",
        (account, chat_id, msg.topic_id, msg.date, msg.date, msg.msg_id, limit),
    )


def stored_count(conn: Connection, account: str, chat_id: int, limit: int) -> int:
    """How many messages ingest holds for the chat, counting no further than ``limit``."""
    row = conn.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM ingest.messages"
        " WHERE account = ? AND chat_id = ? LIMIT ?)",
        (account, chat_id, limit),
    ).fetchone()
    return int(row[0])


def iter_chat(
    conn: Connection, account: str, chat_id: int, batch: int = STREAM_BATCH
) -> Iterator[Msg]:
    """Every message of one chat, in ``chrono_key`` order, read ``batch`` rows at a time:
    ``load_chat`` without holding the chat."""
    cur = conn.cursor()
    cur.row_factory = None
    cur.execute(
        f"{SELECT_MESSAGES} WHERE m.account = ? AND m.chat_id = ? ORDER BY m.date, m.msg_id",
        (account, chat_id),
    )
    shared: dict[Any, Any] = {}
    try:
        while rows := cur.fetchmany(batch):
            for r in rows:
                yield row_to_msg(r, shared)
    finally:
        cur.close()


def senders(conn: Connection, account: str, chat_id: int) -> list[tuple[int | None, str]]:
    """Each (topic id, sender name) of one chat's messages, once."""
    return [
        (topic, name or "")
        for topic, name in conn.execute(
            "SELECT DISTINCT topic_id, sender_name FROM ingest.messages"
            " WHERE account = ? AND chat_id = ?",
            (account, chat_id),
        )
    ]


def load_chat(conn: Connection, account: str, chat_id: int) -> list[Msg]:
    """Every message of one chat, in ``chrono_key`` order."""
    return _rows(
        conn,
        f"{SELECT_MESSAGES} WHERE m.account = ? AND m.chat_id = ? ORDER BY m.date, m.msg_id",
        (account, chat_id),
    )


def comments_of(
    conn: Connection,
    account: str,
    group_id: int,
    channel_id: int,
    post_ids: Iterable[int] | None = None,
) -> list[Msg]:
    """Discussion-group messages of ``group_id`` that comment on posts of ``channel_id``.

    Args:
        post_ids: Only comments on these posts; None for every post.
    """
    base = f"{SELECT_MESSAGES} WHERE m.account = ? AND m.chat_id = ? AND m.comment_channel_id = ?"
    if post_ids is None:
        return _rows(conn, base, (account, group_id, channel_id))
    out: list[Msg] = []
    for chunk in _chunks(sorted(set(post_ids))):
        marks = ",".join("?" * len(chunk))
        out.extend(
            _rows(
                conn,
                f"{base} AND m.comment_post_id IN ({marks})",
                (account, group_id, channel_id, *chunk),
            )
        )
    return out


def content_hashes(
    conn: Connection, account: str, chat_id: int, msg_ids: Iterable[int]
) -> dict[int, str]:
    """Ingest's ``content_hash`` of each stored message of ``msg_ids``."""
    ids = sorted(set(msg_ids))
    out: dict[int, str] = {}
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        for msg_id, digest in conn.execute(
            "SELECT msg_id, content_hash FROM ingest.messages"
            f" WHERE account = ? AND chat_id = ? AND msg_id IN ({marks})",
            (account, chat_id, *chunk),
        ):
            out[int(msg_id)] = str(digest)
    return out


def message_ids(conn: Connection, account: str, chat_id: int) -> list[int]:
    """Every message id ingest stores for one chat, ascending."""
    return [
        int(r[0])
        for r in conn.execute(
            "SELECT msg_id FROM ingest.messages WHERE account = ? AND chat_id = ? ORDER BY msg_id",
            (account, chat_id),
        )
    ]
