"""The C allocator of a long-lived service: fewer arenas, big blocks mapped, freed pages given back.

Python hands every block over 512 bytes, and numpy every array, to the C library's ``malloc``.
glibc's defaults suit short programs, not a service that builds a 650k-message chat once and
then idles:

* each thread that allocates gets an arena of its own (up to eight per core), and memory one
  arena freed is not reused by another: the feed thread's free pages sat beside the pages a
  conversation build allocated on a worker thread;
* after a big block is freed, the threshold above which blocks are mapped apart rises (up to
  32 MiB), so later big arrays come from the heap, whose free middle is never given back.

``tune`` (once, at start, before any thread) caps the arenas at two and fixes both thresholds:
low for a service whose big blocks come from builds made once in a while; high for one that
needs tens of MiB of fresh buffers on every request, as model inference does (``inference``).
``release`` gives the free pages of every arena back to the OS, after a big piece of work (the
embed service: once inference has idled), and first the arenas of Python's own allocator that
its free lists held.

Low thresholds are wrong for inference: each buffer is mapped, faulted in page by page and
unmapped again per call. In the embed service that made a 32-text batch 1.55× slower (five times
the page faults, sys time 0.7 → 3.2 s over 128 texts). glibc's sliding thresholds, tried next,
only partly help: they stop at 32 MiB, an attention matrix of a 32-text batch is bigger, and
the heap's top is trimmed whenever a request frees more than twice the threshold, so MiniLM
still faulted about 125,000 pages in for every 128 texts (0.2 s of system time, and about 10% of
the service's time per pass). Held high, a burst's buffers stay in the heap until ``release``.
Measured on unitize building every chat of the bench's 1M-message archive after importing it
(``bench/PROFILES.md``, "The allocator"). Elsewhere than glibc ``tune`` does nothing and
``release`` only collects; a setting the environment already makes (``MALLOC_ARENA_MAX`` and the
like) is left to it.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
from functools import cache
from typing import Any

__all__ = [
    "ARENA_MAX",
    "INFERENCE_MMAP_THRESHOLD_BYTES",
    "INFERENCE_TRIM_THRESHOLD_BYTES",
    "MMAP_THRESHOLD_BYTES",
    "TRIM_THRESHOLD_BYTES",
    "release",
    "tune",
]

log = logging.getLogger(__name__)

ARENA_MAX = 2
MMAP_THRESHOLD_BYTES = 128 * 1024
"""glibc's starting value, held: a block this big or bigger is mapped apart and unmapped when
freed."""
TRIM_THRESHOLD_BYTES = 1024 * 1024
"""Free memory at the top of the heap past this is given back at once."""
INFERENCE_MMAP_THRESHOLD_BYTES = 256 * 1024 * 1024
"""For inference: blocks under this come from the heap (a second arena still maps a block over
its 64 MiB heap apart)."""
INFERENCE_TRIM_THRESHOLD_BYTES = 1024 * 1024 * 1024
"""For inference: free memory at the top of the heap is kept up to this, for the next request."""

# mallopt's parameters (malloc.h) and the variable that sets each from the environment.
_ARENA = (-8, "MALLOC_ARENA_MAX", ARENA_MAX)  # M_ARENA_MAX
_MMAP, _MMAP_ENV = -3, "MALLOC_MMAP_THRESHOLD_"  # M_MMAP_THRESHOLD
_TRIM, _TRIM_ENV = -1, "MALLOC_TRIM_THRESHOLD_"  # M_TRIM_THRESHOLD


@cache
def _glibc() -> Any | None:
    """The process's C library when it is glibc (which has ``mallopt`` and ``malloc_trim``)."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    return libc


def tune(*, inference: bool = False) -> bool:
    """Apply ``ARENA_MAX`` and hold the mmap and trim thresholds, each unless the environment
    sets it.

    Call once, before the process starts threads. Returns whether the allocator is glibc's.

    Args:
        inference: Hold the thresholds high (``INFERENCE_*``), for a process that allocates
            big short-lived buffers on every request and calls ``release`` once it idles;
            else low (``MMAP_THRESHOLD_BYTES``, ``TRIM_THRESHOLD_BYTES``).
    """
    libc = _glibc()
    if libc is None:
        return False
    mmap, trim = (
        (INFERENCE_MMAP_THRESHOLD_BYTES, INFERENCE_TRIM_THRESHOLD_BYTES)
        if inference
        else (MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES)
    )
    for param, env, value in (_ARENA, (_MMAP, _MMAP_ENV, mmap), (_TRIM, _TRIM_ENV, trim)):
        if env not in os.environ and not libc.mallopt(param, value):
            log.warning("the C allocator refused %s=%d", env, value)
    return True


def release(*, collect: bool = True) -> None:
    """Give freed memory back to the OS after a big piece of work, not after every request.

    Args:
        collect: First run a full garbage collection. Beyond cycles, it empties the
            interpreter's free lists (thousands of spare tuples, lists, dicts and floats).
            Each spare object sits in a 1 MiB arena of Python's small-object allocator and
            keeps the whole arena mapped: after unitize cut the 1M bench archive, 48 arenas
            held by them went back at once (``bench/PROFILES.md``, "Free lists"). It walks
            every tracked object: 5-7 ms over the 30k left after that cut, in process.

    Then glibc's ``malloc_trim`` gives the free pages of every C allocator arena back; it
    costs a walk over the arenas, milliseconds.
    """
    if collect:
        gc.collect()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
