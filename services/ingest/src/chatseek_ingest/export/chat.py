"""The chat being streamed: its header, its marked id and, in a forum, each message's topic."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Mapping
from typing import Any

from chatseek_ingest.export.fields import MAX_DIGITS, SUPERGROUP_ID_OFFSET, clipped
from chatseek_ingest.export.source import malformed
from chatseek_ingest.model import ExportChat, ExportWarning

__all__ = ["Chat", "forum_topic", "header_ready", "make_header", "mark_chat"]

GENERAL_TOPIC_ID = 1

_CHAT_TYPES = {
    "personal_chat": "private",
    "bot_chat": "bot",
    "replies": "bot",
    "verification_codes": "bot",
    "saved_messages": "saved",
    "private_group": "group",
    "private_supergroup": "supergroup",
    "public_supergroup": "supergroup",
    "private_channel": "channel",
    "public_channel": "channel",
}
_NAMELESS_TITLES = {"saved_messages": "Saved Messages", "replies": "Replies"}


class _TopicIndex:
    """msg id -> forum topic id, compact: two int64 arrays while ids ascend, a dict otherwise."""

    __slots__ = ("_ids", "_topics", "_other")

    def __init__(self) -> None:
        self._ids = array("q")
        self._topics = array("q")
        self._other: dict[int, int] = {}

    def add(self, msg_id: int, topic: int) -> None:
        if not self._ids or msg_id > self._ids[-1]:
            self._ids.append(msg_id)
            self._topics.append(topic)
        else:
            self._other[msg_id] = topic

    def get(self, msg_id: int) -> int | None:
        i = bisect_left(self._ids, msg_id)
        if i < len(self._ids) and self._ids[i] == msg_id:
            return int(self._topics[i])
        return self._other.get(msg_id)


class Chat:
    """State of the chat object being streamed."""

    __slots__ = (
        "section",
        "index",
        "obj",
        "location",
        "header",
        "chat_id",
        "skip",
        "orphan",
        "consumed",
        "forum",
        "roots",
        "topics",
    )

    def __init__(self, section: str, index: int, obj: dict[str, Any]) -> None:
        self.section = section
        self.index = index
        self.obj = obj
        self.location = f"{section}.list[{index}]" if section else ""
        self.header: ExportChat | None = None
        self.chat_id: int | None = None
        self.skip = False
        self.orphan = False
        self.consumed = 0
        self.forum = False
        self.roots: set[int] = set()
        self.topics = _TopicIndex()

    def message_location(self, index: int) -> str:
        return f"{self.location}.messages[{index}]" if self.location else f"messages[{index}]"


def header_ready(obj: Mapping[str, object], finished: bool) -> bool:
    """Whether a chat's header keys are all read (or the chat object is)."""
    if "id" not in obj or "type" not in obj:
        return finished
    kind = obj.get("type")
    return finished or "name" in obj or (type(kind) is str and kind in _NAMELESS_TITLES)


def mark_chat(chat_type: str, raw_id: int) -> int:
    """The marked id (``-id`` for a group, ``-100…`` for a channel) of an exported chat."""
    if chat_type == "group":
        return -raw_id
    if chat_type in ("supergroup", "forum", "channel"):
        return -(SUPERGROUP_ID_OFFSET + raw_id)
    return raw_id


def make_header(cur: Chat, fields: Mapping[str, object], label: str) -> ExportChat | ExportWarning:
    """The header of ``cur`` read from ``fields``; a warning when its type is unknown (skipped).

    Raises:
        MalformedExport: no integer id in range, no string type, a name that is not a string.
    """
    where = cur.location or "top level"
    raw_id = fields.get("id")
    export_type = fields.get("type")
    name = fields.get("name")
    if type(raw_id) is not int:
        raise malformed(label, where, "a chat needs an integer 'id'")
    if abs(raw_id) >= 10**MAX_DIGITS:
        raise malformed(label, f"{where}.id".lstrip("."), "the chat id is out of range")
    if "type" not in fields or (export_type is not None and type(export_type) is not str):
        raise malformed(label, where, "a chat needs a string 'type'")
    if name is not None and type(name) is not str:
        raise malformed(label, f"{where}.name", "expected a string or null")
    chat_type = _CHAT_TYPES.get(export_type) if export_type is not None else None
    if export_type is None or chat_type is None:
        cur.skip = True
        return ExportWarning(
            kind="skipped",
            message=f"chat {raw_id} of unknown type {clipped(export_type)!r} skipped",
            location=where,
        )
    username = fields.get("username")
    if type(username) is str:
        username = username.lstrip("@") or None
    header = ExportChat(
        chat_id=mark_chat(chat_type, raw_id),
        raw_id=raw_id,
        type=chat_type,
        title=name or _NAMELESS_TITLES.get(export_type, ""),
        username=username if type(username) is str else None,
        export_type=export_type,
        is_left=cur.section == "left_chats",
        location=cur.location,
    )
    cur.header = header
    cur.chat_id = header.chat_id
    return header


def forum_topic(
    cur: Chat, msg_id: int, reply_to: int | None, reply_peer: int | None, action: str | None
) -> int | None:
    """Forum topic of a message, or ``None`` where the export does not tell.

    Exports keep only ``reply_to_message_id``: a plain post in a topic points at the topic's
    ``topic_created`` service message, a reply points at the replied message (whose topic is
    inherited), and a post without reply is in General. Service messages carry no reply, so
    apart from ``topic_created`` (the topic's root) their topic is unknown.
    """
    if action == "topic_created":
        cur.roots.add(msg_id)
        topic: int | None = msg_id
    elif reply_to is None:
        topic = None if action is not None else GENERAL_TOPIC_ID
    elif reply_peer is not None:
        topic = None
    elif reply_to in cur.roots:
        topic = reply_to
    else:
        topic = cur.topics.get(reply_to)
    if topic is not None:
        cur.topics.add(msg_id, topic)
    return topic
