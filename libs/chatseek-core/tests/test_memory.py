"""The C allocator of a service: free pages go back to the OS after a big piece of work."""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from chatseek_core import consumer, memory
from chatseek_core.consumer import FeedLoop


def _child(script: str, *args: str, **env: str) -> str:
    """The standard output of ``script`` run in a fresh interpreter, the allocator's
    ``MALLOC_*`` settings of this environment left out and ``env`` added."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**environ, **env},
    )
    return done.stdout


# A child process fragments its heap the way a build does (many mid-sized blocks, a few kept
# among them), then reports its RSS before and after ``memory.release``.
_FRAGMENTED = """
import json, sys
from chatseek_core import memory
glibc = memory.tune()
def rss_mib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024
blocks = [bytes(1000) + bytes([i % 251]) for i in range(300_000)]
kept = blocks[::64]
del blocks
before = rss_mib()
memory.release()
print(json.dumps({"glibc": glibc, "kept": len(kept), "before": before, "after": rss_mib()}))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="RSS is read from /proc")
def test_release_gives_a_fragmented_heaps_free_pages_back() -> None:
    out = json.loads(_child(_FRAGMENTED))
    if not out["glibc"]:
        pytest.skip("the C library is not glibc: memory.release does nothing there")
    # About 290 MiB were allocated and all but one block in 64 freed; the kept blocks keep the
    # heap's top, so without the release every freed page stays in the process.
    assert out["before"] > 250
    assert out["before"] - out["after"] > 200, out


# Eight threads allocate at once and hold it; glibc's own report (``malloc_info``) counts the
# arenas they were given.
_ARENAS = """
import ctypes, re, sys, tempfile, threading
from chatseek_core import memory
if sys.argv[1] == "tune":
    memory.tune()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.fclose.argtypes = [ctypes.c_void_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
ready, done = threading.Barrier(9), threading.Event()
held = []
def work():
    held.append([bytes(2000) for _ in range(200)])
    ready.wait()
    done.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
ready.wait()
with tempfile.NamedTemporaryFile(suffix=".xml") as out:
    f = libc.fopen(out.name.encode(), b"w")
    libc.malloc_info(0, f)
    libc.fclose(f)
    arenas = len(re.findall("<heap nr=", open(out.name).read()))
done.set()
for t in threads:
    t.join()
print(arenas)
"""


def _arenas(mode: str, **env: str) -> int:
    return int(_child(_ARENAS, mode, **env))


def test_tune_caps_the_arenas_unless_the_environment_sets_them() -> None:
    if not hasattr(ctypes.CDLL(None), "gnu_get_libc_version"):
        pytest.skip("the C library is not glibc: memory.tune does nothing there")
    assert _arenas("plain") > memory.ARENA_MAX  # glibc's default: an arena per thread, nearly
    assert _arenas("tune") == memory.ARENA_MAX
    assert _arenas("tune", MALLOC_ARENA_MAX="4") == 4


async def test_the_feed_loop_releases_memory_after_a_pass_that_did_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    released: list[tuple[int, bool]] = []
    steps: list[int] = []

    def release(*, collect: bool = True) -> None:
        released.append((threading.get_ident(), collect))

    monkeypatch.setattr(memory, "release", release)
    monkeypatch.setattr(consumer, "COLLECT_AFTER_EVENTS", 10)
    # Three passes that do work (5, 6 and 3 events), each ended by a step that finds none.
    work = iter([4, 1, 0, 6, 0, 3, 0])

    def step() -> int:
        steps.append(threading.get_ident())
        return next(work, 0)

    loop = FeedLoop("test", step, poll_interval_s=0.01)
    task = asyncio.create_task(loop.run())
    try:
        while len(steps) < 10:  # the working passes, then idle polls
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    # Once after each pass that consumed events, on the loop's own thread; idle passes give
    # nothing back because they freed nothing. The collection runs once 10 events have passed
    # since the last: 5, then 11 (collected), then 3.
    thread = steps[0]
    assert released == [(thread, False), (thread, True), (thread, False)]


# A child process fills 48-byte blocks of Python's small-object allocator with a million
# tuples and frees them all, spread-out ones first: those go onto the interpreter's tuple free
# list, one in every few hundred, and keep every 1 MiB arena of the million mapped.
_FREE_LISTS = """
import json, sys
from chatseek_core import memory
def rss_mib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024
start = rss_mib()
held = [(None, k & 127) for k in range(1_000_000)]
for k in range(0, len(held), 400):
    held[k] = None
del held
before = rss_mib()
memory.release(collect=sys.argv[1] == "collect")
print(json.dumps({"start": start, "before": before, "after": rss_mib()}))
"""


def _free_lists(mode: str) -> dict[str, float]:
    return dict(json.loads(_child(_FREE_LISTS, mode)))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="RSS is read from /proc")
def test_release_collects_the_free_lists_that_pin_pythons_arenas() -> None:
    kept = _free_lists("trim")
    # About 46 MiB of tuples, all freed, but the few on the free list hold their arenas.
    assert kept["before"] - kept["start"] > 30, kept
    assert kept["before"] - kept["after"] < 10, kept
    collected = _free_lists("collect")
    assert collected["before"] - collected["after"] > 30, collected


# A child process serves twenty "requests" the way model inference does: each fills buffers of
# 6, 24 and 48 MiB (hidden states, a feed-forward layer, an attention matrix bigger than glibc's
# 32 MiB cap on sliding thresholds) and frees them; it counts the page faults of the requests
# after the first two. Modes: thresholds held low, glibc's sliding ones, held for inference.
_REQUESTS = """
import resource, sys
from chatseek_core import memory
mode = sys.argv[1]
if mode != "slide":
    memory.tune(inference=mode == "inference")
def request():
    buffers = [bytearray(b"x") * (size << 20) for size in (6, 24, 48)]
    del buffers
for _ in range(2):
    request()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    request()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_thresholds_held_for_inference_keep_every_requests_buffers_in_the_heap() -> None:
    if not hasattr(ctypes.CDLL(None), "gnu_get_libc_version"):
        pytest.skip("the C library is not glibc: memory.tune does nothing there")
    low, sliding, inference = (
        int(_child(_REQUESTS, mode)) for mode in ("low", "slide", "inference")
    )
    # 78 MiB of buffers a request, faulted in again every time: about 20,000 pages of 4 KiB
    # (fewer where huge pages back anonymous maps).
    assert low >= 200, (low, sliding, inference)
    # Sliding thresholds still map the buffer above their cap apart, and fault it in again.
    assert sliding * 4 > low, (low, sliding, inference)
    # Held for inference, the first requests' pages serve every later one.
    assert inference * 20 < low, (low, sliding, inference)
