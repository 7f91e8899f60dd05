"""The loop that keeps a consumer in step with its producers' feeds, and the nudges that wake it.

``FeedLoop`` runs a blocking ``step`` (apply one batch of feed events, return how many) in a thread
of its own until it returns 0, then sleeps until a ``Notify`` nudge or the poll interval, whichever
comes first. One thread, always the same: its connection is the service's one writer, with
one page cache and one allocator arena. Steps used to hop across the default executor's threads,
each opening a connection of its own: unitize cutting a 1M-message archive peaked at 449 MiB
then, 349 MiB now. Polling makes a lost nudge only a delay. ``Nudger`` tells consumers, best effort,
that a producer has committed; a consumer that is down simply catches up when it starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Protocol

import grpc

from chatseek_core import memory
from chatseek_core.aio import run_in, woken
from chatseek_core.client import aio_channel
from chatseek_core.errors import ChatseekError

__all__ = ["FeedLoop", "Notifiable", "Nudger"]

log = logging.getLogger(__name__)

NUDGE_TIMEOUT_S = 1.0
ERROR_BACKOFF_S = 2.0
COLLECT_AFTER_EVENTS = 20_000
"""Events consumed between two catch-ups that also run a full garbage collection
(``memory.release``): about a second's work, against milliseconds for the collection
(5-7 ms over the objects unitize holds after cutting the 1M bench archive)."""


class FeedLoop:
    """Drives ``step`` whenever there may be work.

    Args:
        name: for logs.
        step: blocking; applies one bounded batch and returns the number of events it consumed.
        poll_interval_s: the longest sleep between checks.
        after_work: called (on the loop) after a pass that consumed events, e.g. to nudge the
            next stage.
    """

    def __init__(
        self,
        name: str,
        step: Callable[[], int],
        *,
        poll_interval_s: float,
        after_work: Callable[[], object] | None = None,
    ) -> None:
        self.name = name
        self._step = step
        self._poll = poll_interval_s
        self._after_work = after_work
        self._wake = asyncio.Event()
        self.idle = asyncio.Event()
        self.passes = 0
        self._since_collect = 0
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"feed-{name}")

    def nudge(self) -> None:
        """Wake the loop now (called by the Notify RPC)."""
        self.idle.clear()
        self._wake.set()

    async def drain(self) -> int:
        """Run ``step`` until it reports no work; returns the events consumed."""
        total = 0
        while True:
            done = await run_in(self._thread, self._step)
            total += done
            if done == 0:
                return total

    async def run(self) -> None:
        """Loop forever (until cancelled)."""
        while True:
            self._wake.clear()
            try:
                consumed = await self.drain()
            except ChatseekError as exc:
                log.warning("%s: %s (%s); retrying", self.name, exc.message, exc.reason)
                await asyncio.sleep(ERROR_BACKOFF_S)
                continue
            except Exception:
                log.exception("%s: unexpected failure; retrying", self.name)
                await asyncio.sleep(ERROR_BACKOFF_S)
                continue
            self.passes += 1
            if consumed:
                # Caught up: what the pass freed goes back to the OS, not kept for the next;
                # the garbage collection too once enough work has passed since the last.
                self._since_collect += consumed
                collect = self._since_collect >= COLLECT_AFTER_EVENTS
                if collect:
                    self._since_collect = 0
                await run_in(self._thread, partial(memory.release, collect=collect))
            if consumed and self._after_work is not None:
                result = self._after_work()
                if asyncio.iscoroutine(result):
                    await result
            self.idle.set()
            await woken(self._wake, self._poll)


class Notifiable(Protocol):
    """A consumer's stub: its ``Notify`` takes that consumer's own ``NotifyRequest``."""

    @property
    def Notify(self) -> grpc.aio.UnaryUnaryMultiCallable[Any, Any]: ...


class Nudger:
    """Best-effort ``Notify`` calls to the consumers of a feed.

    Args:
        targets: ``(address, stub_factory)`` pairs; the factory takes a channel and returns a stub
            whose ``Notify`` accepts ``request``.
        request_factories: builds the NotifyRequest for each target.
    """

    def __init__(
        self,
        targets: Iterable[tuple[str, Callable[[grpc.aio.Channel], Notifiable], Callable[[], Any]]],
    ):
        self._targets = list(targets)
        self._stubs: list[tuple[Notifiable, Callable[[], Any]]] = []

    async def nudge(self) -> None:
        """Send every consumer a nudge; failures are logged at DEBUG and ignored."""
        if not self._stubs:
            for addr, factory, request in self._targets:
                self._stubs.append((factory(aio_channel(addr)), request))
        for stub, request in self._stubs:
            try:
                await stub.Notify(request(), timeout=NUDGE_TIMEOUT_S)
            except Exception as exc:  # a consumer that is down catches up by polling
                log.debug("nudge failed: %s", exc)
