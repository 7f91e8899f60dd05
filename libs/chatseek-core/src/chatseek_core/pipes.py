"""Room in the pipes between a process and the helper process it feeds from.

A pipe holds 64 KiB by default on Linux. A helper that writes frames of a few hundred
kilobytes then waits on every frame until the reading side has taken most of it, and a reading
thread of a busy Python process takes it only when it gets the interpreter lock: both sides
stall in turn. With room for a megabyte (the most an unprivileged process may ask for, by
default) a frame goes in at once and the helper goes on with the next.
"""

from __future__ import annotations

import sys

__all__ = ["PIPE_BYTES", "capacity", "widen"]

PIPE_BYTES = 1 << 20
# Linux's fcntl codes; the fcntl module names them from Python 3.10 on, on Linux only.
_F_SETPIPE_SZ = 1031
_F_GETPIPE_SZ = 1032


def widen(fd: int, size: int = PIPE_BYTES) -> int | None:
    """Give the pipe that ``fd`` is an end of room for ``size`` bytes, where the OS allows it.

    Returns:
        The pipe's capacity now (the kernel rounds ``size`` up to whole pages), or None where
        it cannot be changed: not Linux, ``fd`` not a pipe, or ``size`` refused (above
        ``/proc/sys/fs/pipe-max-size`` for an unprivileged process). The pipe then keeps the
        room it had, which is slower, never wrong.

    Raises:
        ValueError: ``size`` is not a positive C ``int`` (the kernel would read a truncated
            one: ``1 << 40`` would leave a pipe of one page).
    """
    if not 0 < size < 1 << 31:
        raise ValueError(f"a pipe size must be between 1 and 2**31 - 1 bytes, got {size}")
    return _fcntl(fd, _F_SETPIPE_SZ, size)


def capacity(fd: int) -> int | None:
    """How many bytes the pipe that ``fd`` is an end of holds; None where that cannot be read."""
    return _fcntl(fd, _F_GETPIPE_SZ, 0)


def _fcntl(fd: int, code: int, arg: int) -> int | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import fcntl

        return int(fcntl.fcntl(fd, code, arg))
    except (ImportError, OSError):
        return None
