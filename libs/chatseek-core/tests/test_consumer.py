"""The feed loop: every step on one thread of its own, off the event loop, counted while it runs."""

from __future__ import annotations

import asyncio
import threading

from chatseek_core import aio
from chatseek_core.consumer import FeedLoop


async def test_every_step_runs_on_the_same_thread_of_its_own() -> None:
    threads: list[int] = []
    work = iter([3, 2, 1, 0, 5, 0])

    def step() -> int:
        threads.append(threading.get_ident())
        return next(work)

    loop = FeedLoop("test", step, poll_interval_s=60.0)
    assert await loop.drain() == 6
    assert await loop.drain() == 5
    # Beside the loop's steps, other blocking calls keep running in the default executor.
    elsewhere = await aio.to_thread(threading.get_ident)
    assert len(threads) == 6
    assert len(set(threads)) == 1
    assert threads[0] not in {threading.main_thread().ident, elsewhere}


async def test_a_running_step_counts_as_in_flight_until_it_returns() -> None:
    started, release = threading.Event(), threading.Event()

    def step() -> int:
        started.set()
        release.wait(10)
        return 0

    loop = FeedLoop("test", step, poll_interval_s=60.0)
    task = asyncio.create_task(loop.drain())
    await asyncio.to_thread(started.wait, 10)
    assert aio.in_flight() == 1
    release.set()
    assert await task == 0
    assert aio.in_flight() == 0
