"""The result documents of strict search and counting, and their JSON form.

Invariants:
* An envelope always carries items, paging, the query description (language, versions,
  timezone, order), ``words_ready`` and coverage, also with zero hits.
* ``to_json()`` returns plain JSON values only (dicts, lists, str, int, float, bool, None);
  dates are ISO 8601 UTC strings ending in ``Z``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from chatseek_core import dates

__all__ = [
    "AccountCoverage",
    "AlbumPhoto",
    "Bucket",
    "ChatCoverage",
    "ChatRef",
    "ContextMessage",
    "Coverage",
    "Envelope",
    "Item",
    "QueryInfo",
    "SenderRef",
    "StatsResult",
    "iso_utc",
]


def iso_utc(ts: float | None) -> str | None:
    """``2026-03-29T10:00:00Z`` for unix seconds ``ts``, whole seconds like every other date
    chatseek writes (None stays None)."""
    return None if ts is None else dates.iso_utc(int(ts))


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, slots=True)
class ChatRef:
    """The chat a message belongs to."""

    id: int
    type: str
    title: str
    username: str | None


@dataclass(frozen=True, slots=True)
class SenderRef:
    """Who sent a message (``id`` is None for anonymous or channel posts without a sender)."""

    id: int | None
    name: str


@dataclass(frozen=True, slots=True)
class ContextMessage:
    """A chronological neighbour of a hit in the same chat."""

    msg_id: int
    locator: str
    date: str | None
    sender: SenderRef
    text: str


@dataclass(frozen=True, slots=True)
class AlbumPhoto:
    """One photo (video, file) of the album a hit belongs to.

    ``matched`` says whether the query matched this photo itself; its ``snippet`` then marks
    the matching words with ``**``. ``media`` is ``{kind, file_name, text}`` with the text
    read out of it (clipped), like an item's.
    """

    msg_id: int
    locator: str
    text: str
    snippet: str
    media: dict[str, Any] | None
    matched: bool


@dataclass(frozen=True, slots=True)
class Item:
    """One hit: the message, where it lives and how to open it.

    An album (messages sharing a media group) is one hit: the item is the album's best-ranked
    matching photo, and ``album`` lists every photo of it in order (None outside albums).
    """

    account: str
    chat_id: int
    msg_id: int
    locator: str
    chat: ChatRef
    sender: SenderRef
    date: str | None
    text: str
    snippet: str
    link: str
    fallback_link: str | None
    topic_id: int | None
    media: dict[str, Any] | None = None
    context_before: tuple[ContextMessage, ...] | None = None
    context_after: tuple[ContextMessage, ...] | None = None
    album: tuple[AlbumPhoto, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """This item as JSON; the context lists appear only when context was asked for, the
        album only for a hit in an album."""
        out: dict[str, Any] = _plain(self)
        before = out.pop("context_before")
        after = out.pop("context_after")
        if before is not None or after is not None:
            out["context"] = {"before": before or [], "after": after or []}
        if out["album"] is None:
            del out["album"]
        return out


@dataclass(frozen=True, slots=True)
class QueryInfo:
    """What was run: language and versions, the timezone used and the order applied."""

    language: str
    version: int
    fields_version: int
    preset_version: int
    timezone: str
    order: str


@dataclass(frozen=True, slots=True)
class ChatCoverage:
    """One searched chat and how complete its local copy is."""

    account: str
    chat_id: int
    title: str
    type: str
    history_complete: bool
    last_fetched_at: str | None


@dataclass(frozen=True, slots=True)
class AccountCoverage:
    """One searched account: its provider and how many of its chats are complete."""

    account: str
    provider: str
    chats: int
    chats_complete: int


@dataclass(frozen=True, slots=True)
class Coverage:
    """What the answer covers. ``inventory_complete`` is False: the store does not verify that
    it holds every chat of an account."""

    accounts: tuple[AccountCoverage, ...]
    chats: tuple[ChatCoverage, ...]
    inventory_complete: bool = False

    @property
    def complete(self) -> bool:
        """Whether every searched chat is completely downloaded."""
        return all(chat.history_complete for chat in self.chats)


@dataclass(frozen=True, slots=True)
class Envelope:
    """The answer to one strict search request."""

    items: tuple[Item, ...]
    page: int
    limit: int
    has_more: bool
    next_page_token: str | None
    query: QueryInfo
    words_ready: bool
    coverage: Coverage

    def to_json(self) -> dict[str, Any]:
        """The whole document as JSON values."""
        return {
            "items": [item.to_json() for item in self.items],
            "page": self.page,
            "limit": self.limit,
            "has_more": self.has_more,
            "next_page_token": self.next_page_token,
            "query": _plain(self.query),
            "words_ready": self.words_ready,
            "coverage": _plain(self.coverage),
        }


@dataclass(frozen=True, slots=True)
class Bucket:
    """One group of a count: ``key`` is stable (locator, sender id, date), ``label`` readable."""

    key: str | int | None
    label: str
    count: int


@dataclass(frozen=True, slots=True)
class StatsResult:
    """Counts of exactly the messages a search would find, grouped ``by``."""

    by: str
    buckets: tuple[Bucket, ...]
    total: int
    lower_bound: bool
    query: QueryInfo
    words_ready: bool
    coverage: Coverage

    def to_json(self) -> dict[str, Any]:
        """The whole document as JSON values."""
        out: dict[str, Any] = _plain(self)
        return out
