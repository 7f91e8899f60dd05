"""The one helper that moves blocking work (SQLite, inference) off the event loop.

Invariant: every call started by ``to_thread`` (or ``run_in``) is counted until its thread
returns, even when the awaiting coroutine was cancelled (a thread cannot be). A stopping service
awaits ``quiesce`` before closing its connections, so no thread ever uses a closed SQLite handle.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor
from typing import ParamSpec, TypeVar, cast

from chatseek_core import memory

__all__ = [
    "drain",
    "in_flight",
    "progress_stream",
    "quiesce",
    "run_in",
    "stream_progress",
    "to_thread",
    "woken",
]

P = ParamSpec("P")
R = TypeVar("R")

QUIESCE_POLL_S = 0.02
_lock = threading.Lock()
_in_flight = 0


class _Call:
    """One counted call: it starts in its thread, or is abandoned first by its cancelled
    awaiter; whichever comes first decides who gives the count back."""

    __slots__ = ("abandoned", "call", "started")

    def __init__(self, call: Callable[[], object]) -> None:
        self.call = call
        self.started = False
        self.abandoned = False

    def __call__(self) -> object:
        global _in_flight
        with _lock:
            if self.abandoned:  # its awaiter is gone and the count given back
                return None
            self.started = True
        try:
            return self.call()
        finally:
            with _lock:
                _in_flight -= 1

    def abandon(self) -> None:
        """The awaiter was cancelled: a call still queued will never run, so its count goes
        now (a cancelled executor future never calls it; one that does sees ``abandoned``)."""
        global _in_flight
        with _lock:
            if not self.started and not self.abandoned:
                self.abandoned = True
                _in_flight -= 1


async def to_thread(func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run ``func`` in the default executor, keeping context variables (deadlines) intact."""
    return await run_in(None, func, *args, **kwargs)


async def run_in(
    executor: Executor | None, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs
) -> R:
    """``to_thread`` on ``executor`` (None: the default one), counted the same way."""
    global _in_flight
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    counted = _Call(functools.partial(ctx.run, func, *args, **kwargs))
    with _lock:
        _in_flight += 1
    try:
        future = loop.run_in_executor(executor, counted)
    except BaseException:
        with _lock:
            _in_flight -= 1
        raise
    try:
        return cast(R, await future)
    except asyncio.CancelledError:
        counted.abandon()
        raise


async def woken(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait until ``event`` is set or ``timeout_s`` has passed; True when it was set.

    A cancel always reaches the caller, even one that lands just as ``event`` is set: Python
    3.11's ``asyncio.wait_for`` returned the wake-up then, and a loop built on it (a service's
    feed loop) went on after its cancel, so the service's shutdown waited for it for ever.
    """
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait({waiter}, timeout=timeout_s)
    finally:
        waiter.cancel()
    return bool(done)


def in_flight() -> int:
    """Calls started by ``to_thread`` whose threads have not returned yet."""
    with _lock:
        return _in_flight


async def quiesce(timeout_s: float) -> bool:
    """Wait until no ``to_thread`` call is running; False when ``timeout_s`` passed first."""
    deadline = time.monotonic() + timeout_s
    while in_flight():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(QUIESCE_POLL_S)
    return True


async def drain(requests: AsyncIterator[object]) -> None:
    """Read and discard the rest of a client's request stream.

    A server that fails a client-streaming call must let the client finish sending first:
    grpc's asyncio client may otherwise report a write that fails as the call ends as
    ``INTERNAL: Internal error from Core`` instead of the status the server sent
    (grpc/grpc#36066). The call's deadline bounds the wait; a client that goes away ends it.
    """
    with contextlib.suppress(Exception):
        async for _ in requests:
            pass


_DONE = object()


async def progress_stream(
    work: Callable[[Callable[[object], None]], Awaitable[R]], *, cancel: bool = False
) -> AsyncGenerator[tuple[str, object], None]:
    """Run ``work(on_progress)`` as a task; stream what it reports, then what it returns.

    The one progress stream of every long RPC: yields ``("progress", value)`` for every value
    passed to ``on_progress`` (which any thread may call), in order, then
    ``("result", return_value)``. An exception raised by ``work`` is re-raised here. With
    ``cancel``, a consumer that stops early (a cancelled RPC) cancels the work; otherwise the
    work runs on to its end.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()

    def on_progress(value: object) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, value)

    task = asyncio.ensure_future(work(on_progress))
    task.add_done_callback(lambda _: loop.call_soon_threadsafe(queue.put_nowait, _DONE))
    try:
        while (item := await queue.get()) is not _DONE:
            yield ("progress", item)
        while not queue.empty():
            item = queue.get_nowait()
            if item is not _DONE:
                yield ("progress", item)
        yield ("result", task.result())
    finally:
        if cancel and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def stream_progress(
    func: Callable[..., R], /, *args: object, **kwargs: object
) -> AsyncGenerator[tuple[str, object], None]:
    """Run blocking ``func(*args, on_progress=…, **kwargs)`` in a thread; stream its progress.

    ``progress_stream`` over ``to_thread``: yields ``("progress", value)`` for every value
    ``func`` passes to ``on_progress`` (from its thread), then ``("result", return_value)``. An
    exception raised by ``func`` is re-raised here. Such a long operation's freed memory goes
    back to the OS when it ends (``memory.release``).
    """

    def run(on_progress: Callable[[object], None]) -> R:
        try:
            return func(*args, on_progress=on_progress, **kwargs)
        finally:
            memory.release()

    def work(on_progress: Callable[[object], None]) -> Awaitable[R]:
        return to_thread(run, on_progress)

    return progress_stream(work)
