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

from chatseek_core import memory
from chatseek_core.consumer import FeedLoop

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
    done = subprocess.run(
        [sys.executable, "-c", _FRAGMENTED], capture_output=True, text=True, check=True, timeout=60
    )
    out = json.loads(done.stdout)
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
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", _ARENAS, mode],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**environ, **env},
    )
    return int(done.stdout)


def test_tune_caps_the_arenas_unless_the_environment_sets_them() -> None:
    if not hasattr(ctypes.CDLL(None), "gnu_get_libc_version"):
        pytest.skip("the C library is not glibc: memory.tune does nothing there")
    assert _arenas("plain") > memory.ARENA_MAX  # glibc's default: an arena per thread, nearly
    assert _arenas("tune") == memory.ARENA_MAX
    assert _arenas("tune", MALLOC_ARENA_MAX="4") == 4


async def test_the_feed_loop_releases_memory_after_a_pass_that_did_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    released: list[int] = []
    steps: list[int] = []
    monkeypatch.setattr(memory, "release", lambda: released.append(threading.get_ident()))
    work = iter([4, 1, 0])

    def step() -> int:
        steps.append(threading.get_ident())
        return next(work, 0)

    loop = FeedLoop("test", step, poll_interval_s=0.01)
    task = asyncio.create_task(loop.run())
    try:
        while len(steps) < 6:  # the working pass, then idle polls
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    # Once, after the pass that consumed events, on the loop's own thread; idle passes give
    # nothing back because they freed nothing.
    assert released == [steps[0]]
