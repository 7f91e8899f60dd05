"""The one progress stream: a pass's reports in order, then its result, from any thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from chatseek_core.aio import progress_stream, stream_progress


def _count(n: int, *, on_progress: Callable[[object], None]) -> str:
    for i in range(n):
        on_progress((i, n, threading.current_thread() is threading.main_thread()))
    return f"counted {n}"


async def test_a_blocking_pass_streams_every_report_from_its_thread_then_its_result() -> None:
    events = [e async for e in stream_progress(_count, 50)]
    assert events[-1] == ("result", "counted 50")
    assert events[:-1] == [("progress", (i, 50, False)) for i in range(50)]


async def test_an_async_pass_streams_its_reports_then_its_result() -> None:
    async def work(on_progress: Callable[[object], None]) -> int:
        for i in range(3):
            on_progress(i)
            await asyncio.sleep(0)
        return 42

    assert [e async for e in progress_stream(work)] == [
        ("progress", 0),
        ("progress", 1),
        ("progress", 2),
        ("result", 42),
    ]


async def test_a_failing_pass_raises_after_the_reports_before_the_failure() -> None:
    async def work(on_progress: Callable[[object], None]) -> None:
        on_progress("first")
        raise ValueError("broken")

    seen = []
    with pytest.raises(ValueError, match="broken"):
        async for event in progress_stream(work):
            seen.append(event)
    assert seen == [("progress", "first")]


@pytest.mark.parametrize("cancel", [True, False])
async def test_a_consumer_that_stops_early_cancels_the_pass_only_when_asked(cancel: bool) -> None:
    finished = asyncio.Event()
    cancelled = asyncio.Event()

    async def work(on_progress: Callable[[object], None]) -> None:
        on_progress("started")
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        finished.set()

    stream = progress_stream(work, cancel=cancel)
    assert await anext(stream) == ("progress", "started")
    await stream.aclose()
    if cancel:
        assert cancelled.is_set() and not finished.is_set()
    else:
        await asyncio.wait_for(finished.wait(), 5)
        assert not cancelled.is_set()
