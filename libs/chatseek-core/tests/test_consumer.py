"""The feed loop: every step on one thread of its own, off the event loop, counted while it runs."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

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


async def test_a_call_cancelled_while_queued_gives_its_count_back_and_never_runs() -> None:
    """A service stopping cancels its feed loop, maybe just after it queued a step behind a
    running one: that step never runs, and ``quiesce`` must not wait for it."""
    one = ThreadPoolExecutor(max_workers=1)
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def busy() -> None:
        started.set()
        release.wait(10)

    running = asyncio.create_task(aio.run_in(one, busy))
    await asyncio.to_thread(started.wait, 10)
    queued = asyncio.create_task(aio.run_in(one, ran.append, "queued"))
    await asyncio.sleep(0.05)
    assert aio.in_flight() == 2
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    release.set()
    await running
    assert await aio.quiesce(2.0)
    assert aio.in_flight() == 0
    one.shutdown(wait=True)
    assert ran == []


async def test_a_call_cancelled_while_running_counts_until_its_thread_returns() -> None:
    started, release = threading.Event(), threading.Event()

    def busy() -> str:
        started.set()
        release.wait(10)
        return "done"

    task = asyncio.create_task(aio.to_thread(busy))
    await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert aio.in_flight() == 1
    assert not await aio.quiesce(0.05)
    release.set()
    assert await aio.quiesce(2.0)


@pytest.mark.parametrize("turns", [0, 1, 2, 3, 4])
async def test_a_loop_cancelled_just_as_it_is_nudged_stops(turns: int) -> None:
    """Cancelling the loop while a nudge is on its way to it ends it, whatever turn of the
    event loop the cancel lands on (``asyncio.wait_for`` of Python 3.11 returned the wake-up
    instead, and the loop, and a service's shutdown awaiting it, went on for ever)."""
    loop = FeedLoop("t", lambda: 0, poll_interval_s=30.0)
    task = asyncio.create_task(loop.run())
    await asyncio.wait_for(loop.idle.wait(), timeout=5)
    loop.nudge()
    for _ in range(turns):
        await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=5)
    assert task in done, f"the loop went on after its cancel ({turns} turns after the nudge)"
    assert task.cancelled()


async def test_woken_says_whether_the_event_came_before_the_timeout() -> None:
    event = asyncio.Event()
    assert await aio.woken(event, 0.01) is False
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await aio.woken(event, 5.0) is True
    assert await aio.woken(event, 5.0) is True  # already set


@pytest.mark.parametrize("turns", [0, 1, 2, 3])
async def test_a_cancel_landing_as_the_event_is_set_reaches_the_waiter(turns: int) -> None:
    event = asyncio.Event()
    waiting = asyncio.create_task(aio.woken(event, 30.0))
    await asyncio.sleep(0)
    event.set()
    for _ in range(turns):
        await asyncio.sleep(0)
    if waiting.cancel():  # not done yet: the cancel must reach it, not the wake-up
        with pytest.raises(asyncio.CancelledError):
            await waiting
    else:
        assert waiting.result() is True
