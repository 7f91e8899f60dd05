"""Reading around a hit: the reply thread, the chronological context, evidence packets.

Reading never marks anything read and never sends anything: it only reads ``ingest.db``.
A channel post's thread is the post followed by its comments from the discussion group, and
every message names the chat it is really in.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

from chatseek_core.dates import iso_utc
from chatseek_core.db import Connection
from chatseek_core.errors import InvalidArgument, MessageNotFound
from chatseek_core.links import deep_link, locator, parse_locator
from chatseek_fusion.store import ChatInfo, MessageRow, load_chats, load_messages, query_messages

__all__ = ["context", "evidence", "message_dict", "thread"]

MAX_THREAD = 2000
MAX_CONTEXT = 200
DEFAULT_EVIDENCE_CHARS = 4000
MAX_EVIDENCE_LOCATORS = 100


def _display_text(m: MessageRow) -> str:
    parts = []
    if m.media_kind:
        label = f"[document: {m.file_name}]" if m.media_kind == "document" else f"[{m.media_kind}]"
        parts.append(label)
        if m.media_text:
            parts.append(m.media_text)
    if m.text:
        parts.append(m.text)
    return " ".join(parts)


def message_dict(m: MessageRow, chat: ChatInfo | None) -> dict[str, Any]:
    """The JSON shape of a message in readers."""
    url, fallback = deep_link(
        chat.type if chat else "supergroup",
        m.chat_id,
        chat.username if chat else None,
        m.msg_id,
        m.topic_id,
    )
    return {
        "chat_id": m.chat_id,
        "msg_id": m.msg_id,
        "locator": locator(m.account, m.chat_id, m.msg_id),
        "date": iso_utc(m.date),
        "from_name": m.sender_name,
        "sender_id": m.sender_id,
        "text": _display_text(m),
        "url": url,
        "fallback_url": fallback,
        "reply_to_msg_id": m.reply_to_msg_id,
        "topic_id": m.topic_id,
    }


def _one(conn: Connection, account: str, chat_id: int, msg_id: int) -> MessageRow:
    found = load_messages(conn, account, chat_id, [msg_id])
    if msg_id not in found:
        raise MessageNotFound(
            f"message {msg_id} is not stored in chat {chat_id}",
            hint="check the id; `chatseek sync` fetches newer messages",
            metadata={"chat_id": str(chat_id), "msg_id": str(msg_id)},
        )
    return found[msg_id]


def _chat(conn: Connection, account: str, chat_id: int) -> ChatInfo | None:
    return load_chats(conn, [(account, chat_id)]).get((account, chat_id))


def _album_head(conn: Connection, m: MessageRow) -> MessageRow:
    """``m``'s album as one message: its first photo, replying where its first replying photo
    does (``m`` itself outside albums)."""
    if m.grouped_id is None:
        return m
    photos = query_messages(
        conn,
        "m.account = ? AND m.chat_id = ? AND m.grouped_id = ? ORDER BY m.msg_id",
        (m.account, m.chat_id, m.grouped_id),
    )
    reply = next((p.reply_to_msg_id for p in photos if p.reply_to_msg_id is not None), None)
    return replace(photos[0], reply_to_msg_id=reply) if photos else m


def thread(conn: Connection, account: str, chat_id: int, msg_id: int) -> dict[str, Any]:
    """The whole reply thread holding ``msg_id``, root first; a post with its comments.

    An album counts as one message: a reply to any photo belongs to the thread of the whole
    album, which holds every photo, its first one first when the album is the root.
    """
    start = _one(conn, account, chat_id, msg_id)
    chat = _chat(conn, account, chat_id)
    if start.comment_channel_id and start.comment_post_id:
        channel = _chat(conn, account, start.comment_channel_id)
        if channel is not None:
            return _post_thread(conn, account, channel, start.comment_post_id, chat_id, msg_id)
    if chat is not None and chat.type == "channel":
        return _post_thread(conn, account, chat, msg_id, chat_id, msg_id)
    root = _album_head(conn, start)
    seen = {root.msg_id}
    while root.reply_to_msg_id is not None and root.reply_to_msg_id not in seen:
        parent = load_messages(conn, account, chat_id, [root.reply_to_msg_id])
        if root.reply_to_msg_id not in parent:
            break
        root = _album_head(conn, parent[root.reply_to_msg_id])
        seen.add(root.msg_id)
    # Down the replies, and from any photo of an album to all of its photos.
    rows = query_messages(
        conn,
        "m.account = ? AND m.chat_id = ? AND m.msg_id IN ("
        " WITH RECURSIVE t(id) AS (SELECT ?"
        "  UNION SELECT c.msg_id FROM ingest.messages c, t"
        "  WHERE c.account = ? AND c.chat_id = ? AND c.reply_to_msg_id = t.id"
        "  UNION SELECT s.msg_id FROM t JOIN ingest.messages p ON p.account = ?"
        "   AND p.chat_id = ? AND p.msg_id = t.id JOIN ingest.messages s"
        "   ON s.account = p.account AND s.chat_id = p.chat_id AND s.grouped_id = p.grouped_id)"
        f" SELECT id FROM t LIMIT {MAX_THREAD}) ORDER BY m.date, m.msg_id",
        (account, chat_id, root.msg_id, account, chat_id, account, chat_id),
    )
    rows.sort(key=lambda m: (m.msg_id != root.msg_id, m.date, m.msg_id))
    return {
        "chat_id": chat_id,
        "msg_id": msg_id,
        "root_msg_id": root.msg_id,
        "messages": [message_dict(m, chat) for m in rows],
    }


def _post_thread(
    conn: Connection, account: str, channel: ChatInfo, post_id: int, chat_id: int, msg_id: int
) -> dict[str, Any]:
    post = load_messages(conn, account, channel.chat_id, [post_id]).get(post_id)
    messages = [message_dict(post, channel)] if post else []
    if channel.linked_chat_id:
        group = _chat(conn, account, channel.linked_chat_id)
        comments = query_messages(
            conn,
            "m.account = ? AND m.comment_channel_id = ? AND m.comment_post_id = ?"
            f" ORDER BY m.date, m.msg_id LIMIT {MAX_THREAD}",
            (account, channel.chat_id, post_id),
        )
        messages.extend(message_dict(c, group) for c in comments)
    return {"chat_id": chat_id, "msg_id": msg_id, "root_msg_id": post_id, "messages": messages}


def context(
    conn: Connection, account: str, chat_id: int, msg_id: int, before: int, after: int
) -> dict[str, Any]:
    """Neighbours of ``msg_id`` in date order, bounded to its forum topic when it has one."""
    if not (0 <= before <= MAX_CONTEXT and 0 <= after <= MAX_CONTEXT):
        raise InvalidArgument(
            f"before and after must be between 0 and {MAX_CONTEXT}",
            metadata={"field": "after" if 0 <= before <= MAX_CONTEXT else "before"},
        )
    center = _one(conn, account, chat_id, msg_id)
    chat = _chat(conn, account, chat_id)
    topic = "" if center.topic_id is None else " AND m.topic_id = ?"
    topic_params: tuple[Any, ...] = () if center.topic_id is None else (center.topic_id,)
    earlier = query_messages(
        conn,
        f"m.account = ? AND m.chat_id = ?{topic} AND (m.date, m.msg_id) < (?, ?)"
        " ORDER BY m.date DESC, m.msg_id DESC LIMIT ?",
        (account, chat_id, *topic_params, center.date, center.msg_id, before),
    )
    later = query_messages(
        conn,
        f"m.account = ? AND m.chat_id = ?{topic} AND (m.date, m.msg_id) > (?, ?)"
        " ORDER BY m.date, m.msg_id LIMIT ?",
        (account, chat_id, *topic_params, center.date, center.msg_id, after),
    )
    rows = [*reversed(earlier), center, *later]
    return {
        "chat_id": chat_id,
        "msg_id": msg_id,
        "topic_id": center.topic_id,
        "messages": [message_dict(m, chat) for m in rows],
    }


def evidence(conn: Connection, locators: list[str], max_chars: int) -> dict[str, Any]:
    """Evidence packets: identity, text (bounded), fingerprint and completeness per locator."""
    if not locators:
        raise InvalidArgument("give at least one locator", metadata={"field": "locators"})
    if len(locators) > MAX_EVIDENCE_LOCATORS:
        raise InvalidArgument(
            f"at most {MAX_EVIDENCE_LOCATORS} locators per call", metadata={"field": "locators"}
        )
    if max_chars < 0:
        raise InvalidArgument(
            "max_chars must not be negative (0 means the default)",
            metadata={"field": "max_chars"},
        )
    limit = max_chars or DEFAULT_EVIDENCE_CHARS
    packets = []
    for text in locators:
        account, chat_id, msg_id = parse_locator(text)
        m = _one(conn, account, chat_id, msg_id)
        chat = _chat(conn, account, chat_id)
        full = _display_text(m)
        packet = message_dict(m, chat)
        packet.update(
            {
                "chat": chat.to_dict() if chat else {"account": account, "id": chat_id},
                "sender": {"id": m.sender_id, "name": m.sender_name},
                "text": full[:limit],
                "fingerprint": "sha256:" + hashlib.sha256(full.encode("utf-8")).hexdigest(),
                "truncated": len(full) > limit,
                "bounds": {"chars_total": len(full), "chars_included": min(len(full), limit)},
                "chat_history_complete": bool(chat and chat.history_complete),
            }
        )
        packets.append(packet)
    return {
        "evidence": packets,
        "note": "an evidence packet shows stored messages; it cannot prove the chat's full history",
    }
