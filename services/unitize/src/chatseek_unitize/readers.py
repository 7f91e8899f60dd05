"""Reads of the current conversation build: conversations, their messages, and the link graph.

Owns no table. Invariants:
* Every read goes through ``current_builds`` to a ``complete`` build, so a build in progress,
  a failed one or a superseded one is never visible.
* Conversation ids are positions within one build; documents say so in ``note``.
* Dates are ISO 8601 UTC; every message carries its locator ``tg:<account>/<chat>/<msg>``.
"""

from __future__ import annotations

import json
from typing import Any

from chatseek_core.dates import iso_utc
from chatseek_core.db import Connection
from chatseek_core.errors import InvalidValue, MessageNotFound, NotFound
from chatseek_unitize import loader
from chatseek_unitize.batches import current_build_id

__all__ = [
    "DEFAULT_LIST_LIMIT",
    "IDS_NOTE",
    "MAX_LIST_LIMIT",
    "chat_links",
    "list_conversations",
    "locator",
    "message_links",
    "show_conversation",
]

DEFAULT_LIST_LIMIT = 50
MAX_LIST_LIMIT = 1000
MAX_CHAIN = 10_000
IDS_NOTE = (
    "conversation ids belong to this build and change when the chat is rebuilt; "
    "re-list conversations after a build instead of keeping their ids"
)


def locator(account: str, chat_id: int, msg_id: int) -> str:
    """The stable qualified locator of a message."""
    return f"tg:{account}/{chat_id}/{msg_id}"


def list_conversations(
    conn: Connection,
    account: str,
    chat_id: int,
    *,
    since: int = 0,
    limit: int = DEFAULT_LIST_LIMIT,
) -> dict[str, Any]:
    """The current build's conversations, newest last message first.

    Args:
        since: Only conversations whose last message is at or after this unix time (0: all).
        limit: At most this many (1..``MAX_LIST_LIMIT``; 0 means the default).

    Returns:
        ``{chat_id, build_id, total, conversations: [{conversation_id, first_msg_id,
        last_msg_id, start, end, message_count, participants, locator}], note}``.

    Raises:
        InvalidValue: ``limit`` out of range.
        IndexNotReady: the chat has no build yet.
    """
    limit = limit or DEFAULT_LIST_LIMIT
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidValue(
            f"limit must be between 1 and {MAX_LIST_LIMIT}", metadata={"field": "limit"}
        )
    build_id = current_build_id(conn, account, chat_id)
    total = int(
        conn.execute(
            "SELECT COUNT(*) FROM conversations WHERE build_id = ? AND end_date >= ?",
            (build_id, since),
        ).fetchone()[0]
    )
    rows = conn.execute(
        "SELECT conversation_id, first_msg_id, last_msg_id, start_date, end_date,"
        " message_count, participants FROM conversations WHERE build_id = ? AND end_date >= ?"
        " ORDER BY end_date DESC, conversation_id DESC LIMIT ?",
        (build_id, since, limit),
    ).fetchall()
    return {
        "chat_id": chat_id,
        "build_id": build_id,
        "total": total,
        "conversations": [
            {
                "conversation_id": int(r[0]),
                "first_msg_id": int(r[1]),
                "last_msg_id": int(r[2]),
                "start": iso_utc(int(r[3])),
                "end": iso_utc(int(r[4])),
                "message_count": int(r[5]),
                "participants": json.loads(r[6]),
                "locator": locator(account, chat_id, int(r[1])),
            }
            for r in rows
        ],
        "note": IDS_NOTE,
    }


def show_conversation(
    conn: Connection, account: str, chat_id: int, conversation_id: int
) -> dict[str, Any]:
    """The messages of one conversation of the current build, in chronological order.

    Returns:
        ``{chat_id, build_id, conversation_id, messages: [{msg_id, locator, date, sender,
        text, media, parent_id, reason, confidence}], note}``; a message deleted since the
        build shows ``deleted: true`` and no text.

    Raises:
        NotFound: the build has no such conversation.
        IndexNotReady: the chat has no build yet.
    """
    build_id = current_build_id(conn, account, chat_id)
    rows = conn.execute(
        "SELECT msg_id, parent_id, reason, confidence FROM links"
        " WHERE build_id = ? AND conversation_id = ?",
        (build_id, conversation_id),
    ).fetchall()
    if not rows:
        raise NotFound(
            f"conversation {conversation_id} is not in the current build of chat {chat_id}",
            hint="conversation ids change between builds; list the conversations again",
            metadata={"conversation_id": str(conversation_id)},
        )
    msgs = loader.load_ids(conn, account, chat_id, [int(r[0]) for r in rows])
    out: list[dict[str, Any]] = []
    for msg_id, parent_id, reason, confidence in rows:
        m = msgs.get(int(msg_id))
        item: dict[str, Any] = {
            "msg_id": int(msg_id),
            "locator": locator(account, chat_id, int(msg_id)),
            "parent_id": None if parent_id is None else int(parent_id),
            "reason": str(reason),
            "confidence": float(confidence),
        }
        if m is None:
            item.update(deleted=True, date=None, sender=None, text="", media=None, media_text=None)
        else:
            item.update(
                date=iso_utc(m.date),
                sender=m.sender_name,
                text=m.text,
                media=m.media_kind,
                media_text=m.media_text,
                sort=(m.date, m.msg_id),
            )
        out.append(item)
    out.sort(key=lambda i: i.pop("sort", (2**62, i["msg_id"])))
    return {
        "chat_id": chat_id,
        "build_id": build_id,
        "conversation_id": conversation_id,
        "messages": out,
        "note": IDS_NOTE,
    }


def message_links(conn: Connection, account: str, chat_id: int, msg_id: int) -> dict[str, Any]:
    """The chosen parent chain of a message up to its conversation's root, and what lost.

    Returns:
        ``{chat_id, build_id, msg_id, conversation_id, chain: [{msg_id, parent_id, reason,
        confidence, locator}], rejected: [{candidate_id, score}], note}``; ``chain`` starts at
        the message itself; ``candidate_id`` null stands for "start a new conversation".

    Raises:
        MessageNotFound: the message is not part of the current build.
        IndexNotReady: the chat has no build yet.
    """
    build_id = current_build_id(conn, account, chat_id)
    row = conn.execute(
        "SELECT conversation_id, rejected FROM links WHERE build_id = ? AND msg_id = ?",
        (build_id, msg_id),
    ).fetchone()
    if row is None:
        raise MessageNotFound(
            f"message {msg_id} is not in the current conversation build of chat {chat_id}",
            hint="service and empty messages belong to no conversation; newer messages need "
            "a rebuild",
            metadata={"msg_id": str(msg_id)},
        )
    chain: list[dict[str, Any]] = []
    node: int | None = msg_id
    while node is not None and len(chain) < MAX_CHAIN:
        link = conn.execute(
            "SELECT parent_id, reason, confidence FROM links WHERE build_id = ? AND msg_id = ?",
            (build_id, node),
        ).fetchone()
        if link is None:
            break
        parent = None if link[0] is None else int(link[0])
        chain.append(
            {
                "msg_id": node,
                "parent_id": parent,
                "reason": str(link[1]),
                "confidence": float(link[2]),
                "locator": locator(account, chat_id, node),
            }
        )
        node = parent
    rejected = [
        {"candidate_id": None if int(c) < 0 else int(c), "score": float(s)}
        for c, s in (json.loads(row[1]) if row[1] else [])
    ]
    return {
        "chat_id": chat_id,
        "build_id": build_id,
        "msg_id": msg_id,
        "conversation_id": int(row[0]),
        "chain": chain,
        "rejected": rejected,
        "note": IDS_NOTE,
    }


def chat_links(conn: Connection, account: str, chat_id: int) -> dict[int, int | None]:
    """Every message id of the chat mapped to its parent in the current build (None: a start).

    Messages the build gave no link (service and empty messages, and messages stored after
    the build) map to None: each starts, or is, a conversation of its own.

    Raises:
        IndexNotReady: the chat has no build yet.
    """
    build_id = current_build_id(conn, account, chat_id)
    parents: dict[int, int | None] = {m: None for m in loader.message_ids(conn, account, chat_id)}
    for msg_id, parent_id in conn.execute(
        "SELECT msg_id, parent_id FROM links WHERE build_id = ?", (build_id,)
    ):
        parents[int(msg_id)] = None if parent_id is None else int(parent_id)
    return dict(sorted(parents.items()))
