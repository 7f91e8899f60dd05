"""The flood-wait policy every Telegram-using core function shares."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from telethon import errors

from chatseek_core.errors import FloodWait

__all__ = ["FLOOD_ERRORS", "FLOOD_SLEEP_THRESHOLD_S", "FloodNotice", "FloodPolicy"]

log = logging.getLogger(__name__)

FLOOD_SLEEP_THRESHOLD_S = 60.0
MAX_FLOOD_RETRIES = 5
FLOOD_ERRORS: tuple[type[Exception], ...] = tuple(
    cls
    for cls in (errors.FloodWaitError, getattr(errors, "FloodPremiumWaitError", None))
    if cls is not None
)

T = TypeVar("T")


FloodNotice = Callable[[float], None]
"""Told the seconds of every flood wait being slept through (0 once it is over)."""


@dataclass
class FloodPolicy:
    """Sleeps through short flood waits and turns longer ones into ``FloodWait``.

    A wait is slept through when it is at most ``threshold_s`` and ends before ``deadline``
    (a ``clock`` reading; ``None`` = no deadline), at most ``MAX_FLOOD_RETRIES`` times in a row
    without progress in between. ``FLOOD_PREMIUM_WAIT`` (a wait Telegram imposes on accounts
    without Premium) is treated as a flood wait. ``on_wait`` hears each wait slept through.
    """

    threshold_s: float = FLOOD_SLEEP_THRESHOLD_S
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    deadline: float | None = None
    slept_s: float = field(default=0.0)
    on_wait: FloodNotice | None = None

    async def wait(self, exc: BaseException, attempt: int) -> None:
        """Sleep through the flood wait ``exc`` (the ``attempt``-th in a row), or refuse it.

        Raises:
            FloodWait: the wait is too long, would pass the deadline, or keeps coming back.
        """
        seconds = float(getattr(exc, "seconds", 0) or 0)
        too_long = seconds > self.threshold_s
        past_deadline = self.deadline is not None and self.clock() + seconds > self.deadline
        if too_long or past_deadline or attempt > MAX_FLOOD_RETRIES:
            raise _flood(seconds) from exc
        log.info("telegram flood wait of %.0f s: sleeping through it", seconds)
        if self.on_wait is not None:
            self.on_wait(seconds)
        await self.sleep(seconds)
        self.slept_s += seconds
        if self.on_wait is not None:
            self.on_wait(0.0)

    async def call(self, request: Callable[[], Awaitable[T]]) -> T:
        """Run ``request()``; retry it after sleeping through an acceptable flood wait.

        Raises:
            FloodWait: the wait is too long, would pass the deadline, or keeps coming back;
                ``retry_after_s`` says how long Telegram asked to wait.
        """
        attempt = 0
        while True:
            try:
                return await request()
            except FLOOD_ERRORS as exc:
                attempt += 1
                await self.wait(exc, attempt)


def _flood(wait: float) -> FloodWait:
    return FloodWait(
        f"Telegram asked to wait {wait:.0f} s before the next request",
        hint="run it again later; everything fetched so far is stored",
        retry_after_s=wait,
    )
