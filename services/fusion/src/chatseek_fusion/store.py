"""Read-only views fusion needs: units (from unitize), chats and messages (from ingest).

The connection has ``ingest.db`` and ``unitize.db`` attached read-only as ``ingest`` and
``unitize``; nothing here writes. Message lines use the unit text format,
``[YYYY-MM-DD HH:MM] Sender: text`` (UTC), so snippets read like the units they come from; an
album's later photos continue its first line's group, indented (``ALBUM_INDENT``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from chatseek_core.db import Connection

__all__ = [
    "ALBUM_INDENT",
    "ChatInfo",
    "MessageRow",
    "UnitRow",
    "load_chats",
    "load_messages",
    "load_units",
    "render_line",
]

_CHUNK = 400
ALBUM_INDENT = "    "  # as unitize renders an album's second and later photos
_MEDIA_MARKERS = {
    "photo": "[photo]",
    "video": "[video]",
    "voice": "[voice]",
    "video_note": "[video note]",
    "audio": "[audio]",
    "sticker": "[sticker]",
    "animation": "[animation]",
    "poll": "[poll]",
    "contact": "[contact]",
    "location": "[location]",
    "venue": "[venue]",
}


@dataclass(frozen=True)
class UnitRow:
    """A unit as fusion shows it."""

    unit_id: int
    account: str
    chat_id: int
    topic_key: int
    kind: str
    build_id: int | None
    first_msg_id: int
    last_msg_id: int
    start_date: int
    end_date: int
    msg_ids: tuple[int, ...]
    senders: tuple[str, ...]
    reactions: int
    text: str


@dataclass(frozen=True)
class ChatInfo:
    """A chat's identity and completeness."""

    account: str
    chat_id: int
    type: str
    title: str
    username: str | None
    history_complete: bool
    last_fetched_at: int | None
    linked_chat_id: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "account": self.account,
            "id": self.chat_id,
            "type": self.type,
            "title": self.title,
            "username": self.username,
        }


@dataclass(frozen=True)
class MessageRow:
    """A stored message with what readers show."""

    account: str
    chat_id: int
    msg_id: int
    date: int
    sender_id: int | None
    sender_name: str
    text: str
    reply_to_msg_id: int | None
    topic_id: int | None
    kind: str
    media_kind: str | None
    file_name: str | None
    media_text: str | None
    content_hash: str
    comment_channel_id: int | None
    comment_post_id: int | None
    grouped_id: int | None = None


def _chunks(seq: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for start in range(0, len(seq), _CHUNK):
        yield seq[start : start + _CHUNK]


def load_units(conn: Connection, unit_ids: Sequence[int]) -> dict[int, UnitRow]:
    """The units with these ids that still exist."""
    out: dict[int, UnitRow] = {}
    for chunk in _chunks(list(unit_ids)):
        marks = ",".join("?" for _ in chunk)
        for r in conn.execute(
            "SELECT unit_id, account, chat_id, topic_key, kind, build_id, first_msg_id,"
            " last_msg_id, start_date, end_date, msg_ids, senders, reactions, text"
            f" FROM unitize.units WHERE unit_id IN ({marks})",
            list(chunk),
        ):
            out[int(r[0])] = UnitRow(
                unit_id=int(r[0]),
                account=r[1],
                chat_id=int(r[2]),
                topic_key=int(r[3]),
                kind=r[4],
                build_id=r[5],
                first_msg_id=int(r[6]),
                last_msg_id=int(r[7]),
                start_date=int(r[8]),
                end_date=int(r[9]),
                msg_ids=tuple(json.loads(r[10])),
                senders=tuple(json.loads(r[11])),
                reactions=int(r[12]),
                text=r[13],
            )
    return out


def load_chats(
    conn: Connection, keys: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], ChatInfo]:
    """Chats by ``(account, chat_id)``."""
    out: dict[tuple[str, int], ChatInfo] = {}
    for account, chat_id in set(keys):
        r = conn.execute(
            "SELECT type, title, username, history_complete, last_fetched_at, linked_chat_id"
            " FROM ingest.chats WHERE account = ? AND chat_id = ?",
            (account, chat_id),
        ).fetchone()
        if r is not None:
            out[(account, chat_id)] = ChatInfo(
                account=account,
                chat_id=chat_id,
                type=r[0],
                title=r[1],
                username=r[2],
                history_complete=bool(r[3]),
                last_fetched_at=r[4],
                linked_chat_id=r[5],
            )
    return out


_MESSAGE_COLUMNS = (
    "m.account, m.chat_id, m.msg_id, m.date, m.sender_id, m.sender_name, m.text,"
    " m.reply_to_msg_id, m.topic_id, m.kind, md.kind, md.file_name, md.extracted_text,"
    " m.content_hash, m.comment_channel_id, m.comment_post_id, m.grouped_id"
)


def _message(r: Sequence[Any]) -> MessageRow:
    return MessageRow(
        account=r[0],
        chat_id=int(r[1]),
        msg_id=int(r[2]),
        date=int(r[3]),
        sender_id=r[4],
        sender_name=r[5],
        text=r[6],
        reply_to_msg_id=r[7],
        topic_id=r[8],
        kind=r[9],
        media_kind=r[10],
        file_name=r[11],
        media_text=r[12],
        content_hash=r[13],
        comment_channel_id=r[14],
        comment_post_id=r[15],
        grouped_id=r[16],
    )


def load_messages(
    conn: Connection, account: str, chat_id: int, msg_ids: Sequence[int]
) -> dict[int, MessageRow]:
    """Messages of one chat by id."""
    out: dict[int, MessageRow] = {}
    for chunk in _chunks(list(msg_ids)):
        marks = ",".join("?" for _ in chunk)
        for r in conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM ingest.messages m"
            " LEFT JOIN ingest.media md ON md.mid = m.mid"
            f" WHERE m.account = ? AND m.chat_id = ? AND m.msg_id IN ({marks})",
            (account, chat_id, *chunk),
        ):
            row = _message(r)
            out[row.msg_id] = row
    return out


def query_messages(conn: Connection, where: str, params: Sequence[Any]) -> list[MessageRow]:
    """Messages matching a WHERE clause over ``m`` (messages) and ``md`` (media)."""
    return [
        _message(r)
        for r in conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM ingest.messages m"
            f" LEFT JOIN ingest.media md ON md.mid = m.mid WHERE {where}",
            list(params),
        )
    ]


def render_line(m: MessageRow, *, continues_album: bool = False) -> str:
    """``[YYYY-MM-DD HH:MM] Sender: text`` with a visible media marker and its extracted text.

    ``continues_album`` renders an album's second or later photo: ``ALBUM_INDENT`` and the
    body, the album's first line carrying time and sender.
    """
    stamp = time.strftime("%Y-%m-%d %H:%M", time.gmtime(m.date))
    parts = []
    if m.media_kind:
        if m.media_kind == "document":
            parts.append(f"[document: {m.file_name or 'file'}]")
        else:
            parts.append(_MEDIA_MARKERS.get(m.media_kind, f"[{m.media_kind}]"))
        if m.media_text:
            parts.append(" ".join(m.media_text.split()))
    if m.text:
        parts.append(" ".join(m.text.split()))
    if continues_album:
        return ALBUM_INDENT + " ".join(parts)
    return f"[{stamp}] {m.sender_name or 'unknown'}: {' '.join(parts)}"
