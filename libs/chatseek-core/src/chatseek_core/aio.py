"""The one helper that moves blocking work (SQLite, inference) off the event loop."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import AsyncIterator, Callable
from typing import ParamSpec, TypeVar

__all__ = ["stream_progress", "to_thread"]

P = ParamSpec("P")
R = TypeVar("R")


async def to_thread(func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run ``func`` in the default executor, keeping context variables (deadlines) intact."""
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    call = functools.partial(ctx.run, func, *args, **kwargs)
    return await loop.run_in_executor(None, call)


_DONE = object()


async def stream_progress(
    func: Callable[..., R], /, *args: object, **kwargs: object
) -> AsyncIterator[tuple[str, object]]:
    """Run blocking ``func(*args, on_progress=…, **kwargs)`` in a thread; stream its progress.

    Yields ``("progress", value)`` for every value ``func`` passes to ``on_progress`` (from its
    thread), then ``("result", return_value)``. An exception raised by ``func`` is re-raised here.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()

    def on_progress(value: object) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, value)

    task = asyncio.ensure_future(to_thread(func, *args, on_progress=on_progress, **kwargs))
    task.add_done_callback(lambda _: loop.call_soon_threadsafe(queue.put_nowait, _DONE))
    while True:
        item = await queue.get()
        if item is _DONE:
            break
        yield ("progress", item)
    while not queue.empty():
        item = queue.get_nowait()
        if item is not _DONE:
            yield ("progress", item)
    yield ("result", task.result())
