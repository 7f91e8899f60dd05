"""Timing and memory helpers shared by the benchmark sections.

Every latency is summarised as p50/p95/p99 in milliseconds with its sample count; every ratio
is ``figure / reference`` of two numbers measured in the same run, rounded for reading. Nothing
here judges a number: targets live in ``bench.report``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "SETTLE_IDLE",
    "ChildPeaks",
    "children_of",
    "SETTLE_MAX_S",
    "SETTLE_WINDOW_S",
    "cpu_count",
    "cpu_seconds",
    "interleaved",
    "latency",
    "peak_rss_mib",
    "percentile",
    "process_costs",
    "ratio",
    "run_wall",
    "settle",
    "timed",
    "timings",
]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def latency(seconds: Sequence[float]) -> dict[str, float]:
    """``{p50_ms, p95_ms, p99_ms, n}`` of durations given in seconds."""
    ms = [v * 1000 for v in seconds]
    return {
        "p50_ms": round(percentile(ms, 0.5), 3),
        "p95_ms": round(percentile(ms, 0.95), 3),
        "p99_ms": round(percentile(ms, 0.99), 3),
        "n": len(ms),
    }


def timings(fn: Callable[[int], Any], runs: int) -> list[float]:
    """Seconds of ``runs`` calls of ``fn(i)``."""
    out = []
    for i in range(runs):
        started = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - started)
    return out


def interleaved(fns: Mapping[str, Callable[[int], Any]], runs: int) -> dict[str, list[float]]:
    """Seconds of ``runs`` calls of each ``fn(i)``, taken in turn (the order rotating each round).

    Alternating the variants makes a noisy machine's slow spells fall on all of them alike, so
    their ratio holds even when the absolute times drift.
    """
    names = list(fns)
    out: dict[str, list[float]] = {name: [] for name in names}
    for i in range(runs):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            fns[name](i)
            out[name].append(time.perf_counter() - started)
    return out


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """``(seconds, result)`` of one call."""
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def ratio(figure: float, reference: float, digits: int = 3) -> float | None:
    """``figure / reference``, or None when the reference is zero or missing."""
    if not reference:
        return None
    return round(figure / reference, digits)


def peak_rss_mib(pid: int) -> float:
    """A process's peak resident set (``VmHWM``) in MiB; 0 when it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return 0.0
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds a live process has used so far, with its children's, running
    or waited for (ingest's export reader); 0 when it cannot be read."""
    return _cpu_of(pid) + sum(_cpu_of(child) for child in children_of(pid))


def process_costs(pid: int | None = None) -> tuple[float, float, int]:
    """User and system CPU seconds and minor page faults so far, of process ``pid`` (from
    ``/proc``) or, when None, of this one (``getrusage``); zeros when they cannot be read."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime, usage.ru_stime, usage.ru_minflt
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0, 0
    tick = os.sysconf("SC_CLK_TCK")
    # After the closing parenthesis: minflt is the 8th field, utime and stime the 12th and 13th.
    return int(fields[11]) / tick, int(fields[12]) / tick, int(fields[7])


def _cpu_of(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # After the command's closing parenthesis: utime, stime, cutime and cstime are the 12th to
    # 15th fields.
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def children_of(pid: int) -> list[int]:
    """The live child processes of ``pid`` (none when it cannot be read)."""
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        return found
    return found


class ChildPeaks:
    """The largest ``VmHWM`` of any child of each watched process, sampled on a thread.

    A service's helper process (ingest's export reader) ends before the section reads memory,
    so its peak is caught while it runs: ``VmHWM`` only grows, so the last sample is at most
    ``every_s`` short of its peak.
    """

    def __init__(self, every_s: float = 0.2) -> None:
        self.every_s = every_s
        self.watched: dict[str, int] = {}
        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="child-peaks", daemon=True)
        self._thread.start()

    def watch(self, name: str, pid: int) -> None:
        self.watched[name] = pid

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            for name, pid in list(self.watched.items()):
                for child in children_of(pid):
                    peak = peak_rss_mib(child)
                    if peak > self.peaks.get(name, 0.0):
                        self.peaks[name] = peak

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def run_wall(argv: Sequence[str], env: Mapping[str, str], timeout_s: float = 120.0) -> float:
    """Wall seconds of one process run to completion (start-up included); raises on failure."""
    started = time.perf_counter()
    proc = subprocess.run(
        list(argv), env=dict(env), capture_output=True, timeout=timeout_s, check=False
    )
    took = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv[:6])} exited {proc.returncode}: {proc.stderr.decode()[-400:]}"
        )
    return took


def cpu_count() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


SETTLE_IDLE = 0.9
"""The share of CPU time that must be idle over ``SETTLE_WINDOW_S`` before a section starts."""
SETTLE_WINDOW_S = 1.0
SETTLE_MAX_S = 60.0


def _cpu_times() -> tuple[float, float] | None:
    """(idle, total) jiffies of every CPU from ``/proc/stat``; None where there is none.

    I/O wait counts as idle (the CPU was free); steal counts as busy (another guest had it).
    """
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [float(x) for x in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 5:
        return None
    # user nice system idle iowait irq softirq steal (guest and guest_nice are inside user)
    return fields[3] + fields[4], sum(fields[:8])


def settle(
    max_wait_s: float = SETTLE_MAX_S, idle: float = SETTLE_IDLE, window_s: float = SETTLE_WINDOW_S
) -> dict[str, float]:
    """Let the machine go quiet before a section is timed.

    Writes dirty pages out (``os.sync``), then waits until the CPUs sit ``idle`` idle over a
    ``window_s`` window, for at most ``max_wait_s``, so that no section starts while the one
    before it still writes back or winds down, and the report can say how quiet each start
    was. It does not remove the host's own noise: the embed section's service overhead read
    the same after the 1M pipeline with it as without (bench/PROFILES.md).

    Returns:
        ``waited_s`` (sync included) and the ``idle`` share of the last window; only
        ``waited_s`` where ``/proc/stat`` is not readable.
    """
    started = time.monotonic()
    os.sync()
    share = -1.0
    while True:
        before = _cpu_times()
        time.sleep(window_s)
        after = _cpu_times()
        if before is None or after is None:
            return {"waited_s": round(time.monotonic() - started, 1)}
        total = after[1] - before[1]
        share = (after[0] - before[0]) / total if total > 0 else 1.0
        if share >= idle or time.monotonic() - started >= max_wait_s:
            return {"waited_s": round(time.monotonic() - started, 1), "idle": round(share, 3)}
