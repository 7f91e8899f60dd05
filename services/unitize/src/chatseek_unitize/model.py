"""The value types of the unitize core: messages in, units out, and the cutting recipe.

Invariants:
* ``Msg`` and ``Unit`` are immutable; every function of the core is pure over them.
* ``Unit.key`` is stable within (chat, topic): the same messages cut by the same recipe give
  the same key, so stored unit ids and vectors survive a re-cut.
* ``Unit.content_hash`` is the sha256 of the recipe version and the unit text, so a change to
  either invalidates derived rows (FTS rows, vectors) and nothing else does.
* ``RECIPE_VERSION`` changes whenever the cutting rules or the line rendering change for units
  in general. A change that only concerns some units re-cuts every chat through a migration
  that marks it pending instead (recipe 0), so that the other units keep their hashes and
  vectors: albums (messages with a ``grouped_id``) did so in unitize migration 3.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from chatseek_core.errors import InvalidValue

__all__ = [
    "RECIPE_VERSION",
    "CutConfig",
    "Msg",
    "Unit",
    "UnitKind",
    "content_hash",
]

RECIPE_VERSION = 1

UnitKind = Literal["window", "thread", "post"]


# Not ``frozen``: a frozen dataclass sets each of its 16 fields through ``object.__setattr__``,
# 2.0 µs a message against 0.2, and a cut of a million messages builds more than a million of
# them. Nothing assigns to a ``Msg``; ``dataclasses.replace`` makes a changed copy.
@dataclass(slots=True, unsafe_hash=True)
class Msg:
    """One chat message as the unitize core sees it: a value, never changed once made.

    Attributes:
        msg_id: Telegram message id, unique within the chat.
        date: Send time, unix seconds UTC.
        sender_id: Sender's user/channel id, or None when unknown.
        sender_name: Display name (or nick) of the sender; may be empty.
        text: Message text or media caption; may be empty.
        reply_to: Id of the same-chat message this one replies to, or None.
        topic_id: Forum topic / native thread id, or None outside forums.
        media_kind: photo, video, voice, video_note, audio, sticker, animation, document,
            poll, contact, location, venue; None for plain text.
        file_name: Attached file's name, when there is one.
        media_text: Text read out of the media (OCR, PDF, transcript); for poll, contact and
            venue it is the question / contact / venue description.
        reactions: Total reaction count.
        is_service: True for service messages (joins, pins, topic creation...).
        comment_of: (channel chat id, post msg id) for a discussion-group comment.
        mentions: Lower-case usernames/names mentioned through entities; may be empty.
        edit_date: Last edit time, unix seconds UTC, or None.
        grouped_id: The media group (album) the message belongs to, or None; the messages of
            one album are never cut apart.
    """

    msg_id: int
    date: int
    sender_id: int | None = None
    sender_name: str = ""
    text: str = ""
    reply_to: int | None = None
    topic_id: int | None = None
    media_kind: str | None = None
    file_name: str | None = None
    media_text: str | None = None
    reactions: int = 0
    is_service: bool = False
    comment_of: tuple[int, int] | None = None
    mentions: tuple[str, ...] = ()
    edit_date: int | None = None
    grouped_id: int | None = None


@dataclass(frozen=True, slots=True)
class Unit:
    """A searchable slice of a chat: a window, a reply thread (part) or a channel post.

    Attributes:
        kind: 'window', 'thread' or 'post'.
        key: Stable identity within (chat, topic): ``w:<first id>``, ``t:<root id>:<part>``,
            ``p:<post id>`` (``p:<post id>:<part>`` for continuation parts of long comment
            sections).
        topic_id: Forum topic id, or None.
        msg_ids: Member message ids in text order.
        first_date: Earliest member date, unix seconds UTC.
        last_date: Latest member date, unix seconds UTC.
        senders: Distinct sender names in order of first appearance.
        reactions: Sum of the members' reactions.
        text: One rendered line per member, joined by newlines.
        content_hash: ``content_hash(recipe, text)``.
        recipe: The ``RECIPE_VERSION`` that produced the unit.
    """

    kind: UnitKind
    key: str
    topic_id: int | None
    msg_ids: tuple[int, ...]
    first_date: int
    last_date: int
    senders: tuple[str, ...]
    reactions: int
    text: str
    content_hash: str
    recipe: int = RECIPE_VERSION


@dataclass(frozen=True, slots=True)
class CutConfig:
    """Unit-cutting limits (DESIGN section 2).

    Raises:
        InvalidValue: a limit is out of range.

    Attributes:
        window_gap_min: A pause longer than this many minutes closes a window.
        window_max_msgs: A window holds at most this many messages.
        window_max_chars: Ceiling on a window's text length; one longer message still forms
            a window of its own.
        thread_max_msgs: A thread (or post-with-comments) unit holds at most this many
            messages; longer ones continue in further parts that repeat the root first.
    """

    window_gap_min: int = 30
    window_max_msgs: int = 30
    window_max_chars: int = 1500
    thread_max_msgs: int = 40

    def __post_init__(self) -> None:
        if self.window_gap_min < 0:
            raise InvalidValue("window_gap_min must be at least 0.")
        if self.window_max_msgs < 1 or self.window_max_chars < 1:
            raise InvalidValue("window_max_msgs and window_max_chars must be at least 1.")
        if self.thread_max_msgs < 2:
            raise InvalidValue("thread_max_msgs must be at least 2 (the root and one reply).")


def content_hash(recipe: int, text: str) -> str:
    """The hex sha256 of ``"<recipe>\\n<text>"``: the identity of a unit's or chunk's content."""
    return hashlib.sha256(f"{recipe}\n{text}".encode()).hexdigest()
