"""Stopping a service never closes a connection under a thread that may still be using it."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from chatseek_core import db
from chatseek_core.aio import in_flight, to_thread
from chatseek_core.runner import Running
from chatseek_core.server import build_server, shut_down
from chatseek_testing.services import serving


def _register(server: Any) -> list[str]:
    return []


async def _until(flag: threading.Event) -> None:
    while not flag.is_set():
        await asyncio.sleep(0.01)


async def test_connections_close_only_after_a_cancelled_jobs_thread_returns(
    tmp_path: Path,
) -> None:
    conn = db.connect(tmp_path / "owner.db")
    conn.execute("CREATE TABLE t (x INTEGER)")
    events: list[str] = []
    entered = threading.Event()

    def write_slowly() -> None:
        entered.set()
        with db.transaction(conn):
            time.sleep(0.3)  # the job's task is cancelled meanwhile; its thread goes on
            conn.execute("INSERT INTO t VALUES (1)")
        events.append("committed")

    async def job() -> None:
        await to_thread(write_slowly)

    async def close() -> None:
        events.append("closing")
        conn.close()

    handle = build_server(service="probe", listen="127.0.0.1:0", register=_register)
    async with serving(Running(handle=handle, background=[job], on_stop=close)):
        await _until(entered)
    assert events == ["committed", "closing"]
    assert in_flight() == 0
    reopened = db.connect(tmp_path / "owner.db", readonly=True)
    assert reopened.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1


async def test_a_thread_busy_past_the_wait_leaves_connections_open() -> None:
    release = threading.Event()
    entered = threading.Event()
    closed: list[bool] = []

    def stuck() -> None:
        entered.set()
        release.wait(10)

    async def job() -> None:
        await to_thread(stuck)

    async def close() -> None:
        closed.append(True)

    handle = build_server(service="probe", listen="127.0.0.1:0", register=_register)
    await handle.server.start()
    task = asyncio.create_task(job())
    await _until(entered)
    assert not await shut_down(handle, [task], on_stop=close, grace_s=None, quiesce_s=0.1)
    assert closed == []
    assert in_flight() == 1
    release.set()
    while in_flight():
        await asyncio.sleep(0.01)
