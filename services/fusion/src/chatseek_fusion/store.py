"""Read-only views fusion needs: units (from unitize), chats and messages (from ingest).

The connection has ``ingest.db`` and ``unitize.db`` attached read-only as ``ingest`` and
``unitize``; nothing here writes. Message lines are
``chatseek_core.render.render_line``'s, the lines units are made of, so snippets read like the
units they come from; an album's later photos continue its first line's group, indented
(``ALBUM_INDENT``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from chatseek_core.db import Connection
from chatseek_core.text import normalise

__all__ = [
    "COPY_WINDOW_S",
    "ChannelCopy",
    "ChatInfo",
    "MessageRow",
    "UnitRow",
    "ConversationInfo",
    "channel_copies",
    "chunks_holding",
    "conversation_infos",
    "conversations_of_messages",
    "load_chats",
    "load_messages",
    "load_messages_of",
    "load_units",
    "post_units",
]

T = TypeVar("T")

_CHUNK = 400
# Telegram copies a channel post into the linked discussion group within seconds.
COPY_WINDOW_S = 120
_CHANNEL_MARK = -1_000_000_000_000


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


@dataclass(frozen=True)
class ChannelCopy:
    """A discussion group's automatic copy of a channel post."""

    account: str
    group_id: int
    copy_msg_id: int
    channel_id: int
    post_msg_id: int


def _chunks(seq: Sequence[T]) -> Iterable[Sequence[T]]:
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


def chunks_holding(
    conn: Connection, unit_ids: Sequence[int], chunk_ids: Sequence[int]
) -> dict[int, list[int]]:
    """``{unit_id: [chunk_id, …]}``: which of ``chunk_ids`` hold a message of each unit (units
    no such chunk holds are absent)."""
    if not unit_ids or not chunk_ids:
        return {}
    out: dict[int, list[int]] = {}
    # The unary + keeps SQLite from probing the primary key once per (message, chunk id) pair:
    # each message's holders are read by (account, chat, message) and filtered (80 ms → 2 ms for
    # 250 units and 200 chunks at 100k messages).
    for unit_id, chunk_id in conn.execute(
        "SELECT DISTINCT m.unit_id, c.unit_id FROM json_each(?) j"
        " JOIN unitize.unit_members m ON m.unit_id = j.value"
        " JOIN unitize.unit_members c ON c.account = m.account AND c.chat_id = m.chat_id"
        "  AND c.msg_id = m.msg_id"
        " WHERE +c.unit_id IN (SELECT value FROM json_each(?))",
        (json.dumps([int(u) for u in unit_ids]), json.dumps([int(c) for c in chunk_ids])),
    ):
        out.setdefault(int(unit_id), []).append(int(chunk_id))
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


@dataclass(frozen=True)
class ConversationInfo:
    """A conversation of a current build, as a conversation search result names it."""

    build_id: int
    conversation_id: int
    first_msg_id: int
    last_msg_id: int
    start_date: int
    end_date: int
    message_count: int
    participants: list[str]


def conversations_of_messages(
    conn: Connection, wanted: Mapping[tuple[str, int], Iterable[int]]
) -> dict[tuple[str, int], dict[int, tuple[int, int]]]:
    """Each message's conversation in its chat's *current* build: ``(account, chat)`` → msg id
    → ``(build_id, conversation_id)``; chats without a current build and messages the build
    does not hold are absent. One query per chat (and per 400 ids)."""
    out: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}
    for (account, chat_id), ids in wanted.items():
        found: dict[int, tuple[int, int]] = {}
        for chunk in _chunks(sorted(set(ids))):
            marks = ",".join("?" for _ in chunk)
            for r in conn.execute(
                "SELECT l.msg_id, l.build_id, l.conversation_id FROM unitize.current_builds b"
                " JOIN unitize.links l ON l.build_id = b.build_id"
                f" WHERE b.account = ? AND b.chat_id = ? AND l.msg_id IN ({marks})",
                (account, chat_id, *chunk),
            ):
                found[int(r[0])] = (int(r[1]), int(r[2]))
        if found:
            out[(account, chat_id)] = found
    return out


def conversation_infos(
    conn: Connection, keys: Iterable[tuple[int, int]]
) -> dict[tuple[int, int], ConversationInfo]:
    """Conversations by ``(build_id, conversation_id)``; one query per build."""
    by_build: dict[int, list[int]] = {}
    for build_id, conversation_id in set(keys):
        by_build.setdefault(build_id, []).append(conversation_id)
    out: dict[tuple[int, int], ConversationInfo] = {}
    for build_id, ids in by_build.items():
        for chunk in _chunks(sorted(ids)):
            marks = ",".join("?" for _ in chunk)
            for r in conn.execute(
                "SELECT conversation_id, first_msg_id, last_msg_id, start_date, end_date,"
                " message_count, participants FROM unitize.conversations"
                f" WHERE build_id = ? AND conversation_id IN ({marks})",
                (build_id, *chunk),
            ):
                out[(build_id, int(r[0]))] = ConversationInfo(
                    build_id=build_id,
                    conversation_id=int(r[0]),
                    first_msg_id=int(r[1]),
                    last_msg_id=int(r[2]),
                    start_date=int(r[3]),
                    end_date=int(r[4]),
                    message_count=int(r[5]),
                    participants=list(json.loads(r[6])),
                )
    return out


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


def load_messages_of(
    conn: Connection, wanted: Mapping[tuple[str, int], Iterable[int]]
) -> dict[tuple[str, int], dict[int, MessageRow]]:
    """Messages of several chats at once, one query per chat: ``(account, chat)`` → id → row."""
    return {
        key: load_messages(conn, key[0], key[1], sorted(set(ids))) for key, ids in wanted.items()
    }


def channel_copies(conn: Connection, units: Iterable[UnitRow]) -> dict[int, ChannelCopy]:
    """The automatic copy of a channel post that each group unit holds, by unit id.

    A copy is a forwarded message sent by a channel this account also stores, whose text is
    a post of that channel sent at most ``COPY_WINDOW_S`` before it. Exports do not say which
    group is a channel's discussion group, and a synced account may hold both chats, so the
    copy is recognised by what it is. Posts without text are never matched. A unit holding
    several copies is keyed by its first.
    """
    by_chat: dict[tuple[str, int], list[UnitRow]] = {}
    for u in units:
        if u.kind != "post":
            by_chat.setdefault((u.account, u.chat_id), []).append(u)
    out: dict[int, ChannelCopy] = {}
    for (account, chat_id), group_units in by_chat.items():
        ids = sorted({i for u in group_units for i in u.msg_ids})
        found: dict[int, ChannelCopy] = {}
        for chunk in _chunks(ids):
            marks = ",".join("?" for _ in chunk)
            # The channel's posts in the window before each forwarded message, latest first;
            # texts compare normalised (``normalise``), here, for these few pairs.
            normalised: dict[int, str] = {}
            for copy_id, copy_text, channel_id, post_id, post_text in conn.execute(
                "SELECT m.msg_id, m.text, p.chat_id, p.msg_id, p.text FROM ingest.messages m"
                " JOIN ingest.chats c ON c.account = m.account"
                f"  AND c.chat_id = {_CHANNEL_MARK} - m.sender_id AND c.type = 'channel'"
                " JOIN ingest.messages p ON p.account = m.account AND p.chat_id = c.chat_id"
                "  AND p.date BETWEEN m.date - ? AND m.date AND p.text <> ''"
                " WHERE m.account = ? AND m.chat_id = ? AND m.fwd_from IS NOT NULL"
                f"  AND m.text <> '' AND m.msg_id IN ({marks})"
                " ORDER BY m.msg_id, p.date DESC",
                (COPY_WINDOW_S, account, chat_id, *chunk),
            ):
                copy_id = int(copy_id)
                if copy_id in found:
                    continue
                norm = normalised.get(copy_id)
                if norm is None:
                    norm = normalised[copy_id] = normalise(copy_text)
                if norm and normalise(post_text) == norm:
                    found[copy_id] = ChannelCopy(
                        account, chat_id, copy_id, int(channel_id), int(post_id)
                    )
        for u in group_units:
            copy = next((found[i] for i in u.msg_ids if i in found), None)
            if copy is not None:
                out[u.unit_id] = copy
    return out


def post_units(
    conn: Connection, posts: Iterable[tuple[str, int, int]]
) -> dict[tuple[str, int, int], UnitRow]:
    """The post unit holding each ``(account, channel_id, post_msg_id)`` (its first part)."""
    found: dict[tuple[str, int, int], int] = {}
    for account, channel_id, post_id in set(posts):
        row = conn.execute(
            "SELECT u.unit_id FROM unitize.unit_members um"
            " JOIN unitize.units u ON u.unit_id = um.unit_id"
            " WHERE um.account = ? AND um.chat_id = ? AND um.msg_id = ? AND u.kind = 'post'"
            "  AND u.chat_id = um.chat_id ORDER BY u.key LIMIT 1",
            (account, channel_id, post_id),
        ).fetchone()
        if row is not None:
            found[(account, channel_id, post_id)] = int(row[0])
    units = load_units(conn, sorted(set(found.values())))
    return {key: units[unit_id] for key, unit_id in found.items() if unit_id in units}


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
