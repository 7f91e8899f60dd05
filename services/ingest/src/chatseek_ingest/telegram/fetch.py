"""Fetching from Telegram across flood waits, and telling a refused chat from an error.

A message iteration resumes after the last message received when a flood wait is slept
through; a refusal of the chat or the session ends it with what came before.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict, TypeVar, Unpack

from telethon import errors

from chatseek_core.errors import FloodWait
from chatseek_ingest.telegram.client import TelegramClientLike
from chatseek_ingest.telegram.flood import FLOOD_ERRORS, FloodPolicy

__all__ = [
    "UNAVAILABLE_ERRORS",
    "FetchArgs",
    "Fetched",
    "collect",
    "fetch_messages",
    "unavailable_reason",
]

T = TypeVar("T")


class FetchArgs(TypedDict, total=False):
    """The ``iter_messages`` bounds a fetch passes on (``TelegramClientLike.iter_messages``)."""

    offset_date: datetime | None
    max_id: int
    min_id: int
    reply_to: int | None


UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    errors.ChannelPrivateError,
    errors.ChatForbiddenError,
    errors.ChannelInvalidError,
    errors.ChatIdInvalidError,
    errors.PeerIdInvalidError,
    errors.UserBannedInChannelError,
    errors.ChatAdminRequiredError,
)
"""What Telegram raises for a chat this account cannot read: left, kicked, private, deleted."""
_UNKNOWN_PEER = ("Could not find the input entity", "No user has")


@dataclass
class Fetched:
    """What one resumable message iteration returned, and what stopped it early.

    Attributes:
        messages: the messages in the order they came (every one Telegram sent before a stop).
        stop: ``None`` when the iteration ran to its end; else a ``FloodWait`` too long to
            sleep through, the error Telegram refused the chat with (see
            ``unavailable_reason``), or its refusal of the session (signed out, revoked).
            What came before it is in ``messages``.
    """

    messages: list[Any]
    stop: BaseException | None = None


async def fetch_messages(
    client: TelegramClientLike,
    policy: FloodPolicy,
    peer: Any,
    limit: int | None,
    *,
    reverse: bool,
    **kwargs: Unpack[FetchArgs],
) -> Fetched:
    """Iterate ``client.iter_messages`` and keep every message it yields, across flood waits.

    Telethon pages a history 100 messages per request, and a flood wait can strike any of
    them. After one is slept through, the iteration starts again just after the last message
    received (``min_id`` oldest first, ``max_id`` newest first), so nothing is fetched twice.
    A wait the policy refuses, or a refusal of the chat or of the session mid-way, ends the
    iteration with what came before it. Any other error propagates.
    """
    got: list[Any] = []
    attempt = 0
    while True:
        left = None if limit is None else limit - len(got)
        if left is not None and left <= 0:
            return Fetched(got)
        args = kwargs.copy()
        if got:
            if reverse:
                args["min_id"] = max(int(args.get("min_id") or 0), int(got[-1].id))
                args.pop("offset_date", None)
            else:
                args["max_id"] = int(got[-1].id)
        before = len(got)
        try:
            async for message in client.iter_messages(peer, left, reverse=reverse, **args):
                got.append(message)
            return Fetched(got)
        except FLOOD_ERRORS as exc:
            attempt = 1 if len(got) > before else attempt + 1
            try:
                await policy.wait(exc, attempt)
            except FloodWait as stop:
                return Fetched(got, stop)
        except Exception as exc:
            if unavailable_reason(exc) is None and not isinstance(exc, errors.UnauthorizedError):
                raise
            return Fetched(got, exc)


async def collect(iterator: AsyncIterable[T]) -> list[T]:
    """Drain one of the client's async iterators into a list."""
    return [item async for item in iterator]


def unavailable_reason(exc: BaseException) -> str | None:
    """A short, stable reason when ``exc`` means Telegram refuses a chat, else ``None``.

    Besides Telegram's own refusals this covers Telethon's ``ValueError`` for a peer the
    session has never seen.
    """
    if isinstance(exc, UNAVAILABLE_ERRORS):
        return type(exc).__name__.removesuffix("Error")
    if isinstance(exc, ValueError) and any(text in str(exc) for text in _UNKNOWN_PEER):
        return "UnknownPeer"
    return None
