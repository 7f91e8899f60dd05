"""Local labels on chats, senders and messages (``tag:work`` in strict search).

Tags never leave the machine. A tag is lower-case ``a-z``, ``0-9`` and ``-``, 1 to 32
characters. Exactly one target per tag row: a chat, a sender, or one message of a chat.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from chatseek_core import db
from chatseek_core.db import Connection
from chatseek_core.errors import InvalidValue, MessageNotFound

__all__ = ["TagTarget", "add_tag", "list_tags", "remove_tag", "validate_tag"]

TAG_RE = re.compile(r"[a-z0-9-]{1,32}")


@dataclass(frozen=True)
class TagTarget:
    """What a tag is on: ``kind`` is chat, sender or message."""

    account: str
    kind: str
    chat_id: int = 0
    sender_id: int = 0
    msg_id: int = 0


def validate_tag(tag: str) -> str:
    """Return ``tag`` when well-formed.

    Raises:
        InvalidValue: not 1-32 characters of lower-case a-z, 0-9 and '-'.
    """
    if not TAG_RE.fullmatch(tag):
        raise InvalidValue(
            f"invalid tag {tag!r}",
            hint="tags are 1-32 characters of lower-case a-z, 0-9 and '-'",
            metadata={"field": "tag"},
        )
    return tag


def _check_target(conn: Connection, target: TagTarget) -> None:
    if target.kind not in ("chat", "sender", "message"):
        raise InvalidValue(
            f"tag target kind {target.kind!r} is not chat, sender or message",
            metadata={"field": "kind"},
        )
    if target.kind == "message":
        row = conn.execute(
            "SELECT 1 FROM messages WHERE account = ? AND chat_id = ? AND msg_id = ?",
            (target.account, target.chat_id, target.msg_id),
        ).fetchone()
        if row is None:
            raise MessageNotFound(
                f"no stored message {target.chat_id}/{target.msg_id}",
                hint="check the chat and message id",
            )
    if target.kind == "sender" and target.sender_id == 0:
        raise InvalidValue("a sender tag needs a sender id", metadata={"field": "sender"})


def _row(tag: str, target: TagTarget) -> tuple[str, str, str, int, int, int]:
    """``(tag, target, account, chat_id, sender_id, msg_id)``: unused ids are 0."""
    return (
        tag,
        target.kind,
        target.account,
        target.chat_id if target.kind != "sender" else 0,
        target.sender_id if target.kind == "sender" else 0,
        target.msg_id if target.kind == "message" else 0,
    )


def add_tag(conn: Connection, tag: str, target: TagTarget) -> bool:
    """Attach ``tag``; returns False when it was already there.

    Runs in a transaction of its own, or joins the caller's.
    """
    with db.transaction(conn):
        validate_tag(tag)
        _check_target(conn, target)
        cur = conn.execute(
            "INSERT INTO tags (tag, target, account, chat_id, sender_id, msg_id)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            _row(tag, target),
        )
        return cur.rowcount > 0


def remove_tag(conn: Connection, tag: str, target: TagTarget) -> bool:
    """Detach ``tag``; returns False when it was not there.

    Runs in a transaction of its own, or joins the caller's.
    """
    with db.transaction(conn):
        validate_tag(tag)
        cur = conn.execute(
            "DELETE FROM tags WHERE tag = ? AND target = ? AND account = ? AND chat_id = ?"
            " AND sender_id = ? AND msg_id = ?",
            _row(tag, target),
        )
        return cur.rowcount > 0


def list_tags(conn: Connection, account: str) -> list[dict[str, Any]]:
    """Every tag of ``account`` with its target."""
    return [
        {"tag": r[0], "kind": r[1], "chat_id": r[2], "sender_id": r[3], "msg_id": r[4]}
        for r in conn.execute(
            "SELECT tag, target, chat_id, sender_id, msg_id FROM tags WHERE account = ?"
            " ORDER BY tag, target, chat_id, sender_id, msg_id",
            (account,),
        )
    ]
