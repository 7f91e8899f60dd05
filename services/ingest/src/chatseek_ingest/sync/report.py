"""What a sync tells while it runs (``SyncProgress``) and when it ends (``SyncReport``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

__all__ = ["Progress", "SyncProgress", "SyncReport", "UnavailableChat"]


@dataclass(frozen=True)
class SyncProgress:
    """One progress event of a sync; nothing in it quotes message text.

    Attributes:
        chats_done: chats brought up to date so far; ``chats_total``: chats in this run.
        note: one short line for a log.
        chat: the title of the chat being fetched now ("" between chats).
        chat_messages: messages of that chat stored so far in this run.
        messages: messages (and comments) stored so far in this run, for a rate.
        wait_s: a flood wait being slept through now, in seconds from this event; 0 when none.
        account: the account being synced.
    """

    chats_done: int
    chats_total: int
    note: str
    chat: str = ""
    chat_messages: int = 0
    messages: int = 0
    wait_s: float = 0.0
    account: str = ""


Progress = Callable[[SyncProgress], None]
"""Receives a ``SyncProgress`` after every committed batch and around every flood wait."""


class UnavailableChat(TypedDict):
    """A chat Telegram refused in a sync, with Telegram's reason (``unavailable_reason``)."""

    chat_id: int
    title: str
    reason: str


@dataclass
class SyncReport:
    """What one sync did (also its JSON document).

    Attributes:
        new: messages (and comments) stored for the first time.
        updated: stored messages whose content changed (edits, reactions).
        deleted: stored messages a re-read showed to be gone.
        chats_done: chats fetched up to date (and re-read) in this run.
        chats_remaining: chats left for a later run (stopped before, or skipped by a refresh).
        unavailable: ``{chat_id, title, reason}`` of each chat Telegram refused this run.
        flood_wait_s: the wait Telegram asked for when a flood wait stopped the run, else 0.
        stopped_by: ``"budget"`` or ``"flood_wait"`` when the run stopped early, else ``None``.
        takeout: ``"used"`` when the run fetched through a takeout session, ``"declined"`` when
            one was asked for and Telegram did not start it (the run went on without), else
            ``None``.
        warnings: one sentence each, never message text.
    """

    new: int = 0
    updated: int = 0
    deleted: int = 0
    chats_done: int = 0
    chats_remaining: int = 0
    unavailable: list[UnavailableChat] = field(default_factory=list)
    flood_wait_s: float = 0.0
    stopped_by: str | None = None
    takeout: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the report."""
        return asdict(self)
