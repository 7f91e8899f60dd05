"""The sync lock every Telegram-writing pass takes: one pass at a time per data dir.

An in-process lock plus a non-blocking ``flock`` on ``<data dir>/sync.lock``; a second pass is
refused with ``SyncRunning``, never queued.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from chatseek_core import db
from chatseek_core.aio import to_thread
from chatseek_core.errors import SyncRunning

__all__ = ["LOCK_FILE", "default_lock_path", "held_sync_lock", "sync_lock"]

LOCK_FILE = "sync.lock"
LOCK_FILE_MODE = 0o600

_PROCESS_LOCKS: dict[str, threading.Lock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


def default_lock_path(conn: db.Connection) -> Path | None:
    """``<directory of the main database file>/sync.lock``; ``None`` for an in-memory one."""
    for row in conn.execute("PRAGMA database_list"):
        if row[1] == "main":
            return Path(row[2]).parent / LOCK_FILE if row[2] else None
    return None


@contextlib.contextmanager
def sync_lock(path: Path | None) -> Iterator[None]:
    """Hold the sync lock for the block (an in-process lock, then ``flock`` on ``path``).

    Raises:
        SyncRunning: another sync or deletion pass holds it, in this process or another.
    """
    key = str(path.resolve()) if path is not None else ":memory:"
    with _PROCESS_LOCKS_GUARD:
        lock = _PROCESS_LOCKS.setdefault(key, threading.Lock())
    if not lock.acquire(blocking=False):
        raise _running()
    fd: int | None = None
    try:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, LOCK_FILE_MODE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise _running() from None
        yield
    finally:
        if fd is not None:
            os.close(fd)
        lock.release()


@contextlib.asynccontextmanager
async def held_sync_lock(path: Path | None) -> AsyncIterator[None]:
    """``sync_lock`` for a pass on the event loop: taken and released in a thread.

    Raises:
        SyncRunning: another sync or deletion pass holds it, in this process or another.
    """
    stack = contextlib.ExitStack()
    await to_thread(stack.enter_context, sync_lock(path))
    try:
        yield
    finally:
        await to_thread(stack.close)


def _running() -> SyncRunning:
    return SyncRunning(
        "another sync is running",
        hint="wait for it to finish (or let it run out its budget), then try again",
    )
