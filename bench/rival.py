"""chatseek beside grepogram 0.3.0 on the same 100k-message export, runs alternating.

What is compared is what a user waits and pays for to search an export by words: for
grepogram, one ``grepogram import`` process (it stores, cuts and indexes before it exits); for
chatseek, ``bench.pipeline.words_end_to_end`` (``chatseek import`` into a running ingest,
gateway, unitize and lexical, until every word index has caught up). CPU is user + system
seconds of every process; memory is grepogram's peak RSS against the sum of the chatseek
processes' peaks. The runs alternate so a noisy neighbour hurts both alike.

grepogram is not part of this repository. The section installs it from the package index into
a scratch virtual environment under the user's cache directory, at run time, and skips with
the reason when it cannot: grepogram needs Python 3.12 (``CHATSEEK_BENCH_PYTHON312``, else
``python3.12`` on ``PATH``, else a pyenv 3.12). It loads sqlite-vec, so its Python must load
SQLite extensions; a pyenv build cannot, so where ``import sqlite3`` refuses extensions the
scratch environment maps ``sqlite3`` to ``sqlean.py`` (the same SQLite with extension loading,
as chatseek itself uses) through a ``sitecustomize``. Its dense index is left out (no
sentence-transformers), as is ours: both are measured to words only.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.measure import ratio

__all__ = ["RIVAL", "rival_section"]

RIVAL = "grepogram==0.3.0"
MESSAGES = 100_000
RUNS = 2
TIMEOUT_S = 1800.0
_SHIM = '''"""Map sqlite3 to sqlean.py, whose SQLite loads extensions (chatseek bench shim)."""
import sys

import sqlean
import sqlean.dbapi2

sys.modules["sqlite3"] = sqlean
sys.modules["sqlite3.dbapi2"] = sqlean.dbapi2
'''
_CAN_LOAD = "import sqlite3; sqlite3.connect(':memory:').enable_load_extension(True)"


def _python312() -> str | None:
    """The first candidate that runs and is 3.12 (a pyenv shim on ``PATH`` may do neither)."""
    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    candidates = [os.environ.get("CHATSEEK_BENCH_PYTHON312"), shutil.which("python3.12")]
    for candidate in [*candidates, *reversed(pyenv)]:
        if not candidate:
            continue
        check = "import sys; raise SystemExit(sys.version_info[:2] != (3, 12))"
        try:
            ok = subprocess.run([candidate, "-c", check], capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            continue
        if ok.returncode == 0:
            return candidate
    return None


def _venv(python: str, progress: Callable[[str], None]) -> Path:
    """The scratch environment with grepogram installed (made once, then reused)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    venv = cache / "chatseek-bench" / RIVAL.replace("==", "-")
    exe = venv / "bin" / "grepogram"
    if exe.exists():
        return venv
    progress(f"rival: installing {RIVAL} into {venv}")
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, RIVAL], check=True, timeout=900, capture_output=True)
    loads = subprocess.run([str(venv / "bin" / "python"), "-c", _CAN_LOAD], capture_output=True)
    if loads.returncode != 0:
        subprocess.run([*pip, "sqlean.py"], check=True, timeout=600, capture_output=True)
        site = subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        (Path(site) / "sitecustomize.py").write_text(_SHIM)
    return venv


# Runs the command as its own child and prints that child's usage. Linux starts a process's
# peak RSS at what its parent held when it forked, so a child of this benchmark's process
# (hundreds of MiB after a 1M pipeline) would report at least that much: a small launcher
# forks the measured process instead.
_LAUNCHER = """
import json, os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
print(json.dumps({"rc": os.waitstatus_to_exitcode(status), "cpu_s": usage.ru_utime + usage.ru_stime,
                  "peak_kib": usage.ru_maxrss}))
"""


def _grepogram_import(venv: Path, export: Path, home: Path) -> dict[str, float]:
    """Wall, CPU and peak RSS of one ``grepogram import`` into an empty home."""
    env = {**os.environ, "GREPOGRAM_HOME": str(home)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(venv / "bin" / "grepogram"), "import", str(export)],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    seconds = time.perf_counter() - started
    lines = done.stdout.strip().splitlines()
    usage = json.loads(lines[-1]) if done.returncode == 0 and lines else {"rc": done.returncode}
    if usage["rc"] != 0:
        raise RuntimeError(f"grepogram import failed ({usage['rc']}): {done.stderr[-2000:]}")
    return {
        "seconds": round(seconds, 2),
        "cpu_s": round(usage["cpu_s"], 2),
        "peak_rss_mib": round(usage["peak_kib"] / 1024, 1),
    }


def _best(runs: list[dict[str, Any]], key: str) -> float:
    return min(float(r[key]) for r in runs)


def rival_section(progress: Callable[[str], None]) -> dict[str, Any]:
    """Both tools to words on one generated 100k export, ``RUNS`` times each, alternating."""
    from bench.generate import generate
    from bench.pipeline import words_end_to_end

    python = _python312()
    if python is None:
        return {"skipped": "no Python 3.12 found (set CHATSEEK_BENCH_PYTHON312)"}
    try:
        venv = _venv(python, progress)
    except (subprocess.SubprocessError, OSError) as exc:
        return {"skipped": f"could not install {RIVAL}: {exc}"}
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="chatseek-rival-") as tmp:
        export = Path(tmp) / "export"
        generate(export / "result.json", MESSAGES)
        for run in range(RUNS):
            theirs.append(_grepogram_import(venv, export, Path(tmp) / f"grepogram-{run}"))
            progress(f"rival: grepogram run {run + 1}: {theirs[-1]}")
            mine = words_end_to_end(export, Path(tmp) / f"chatseek-{run}", progress)
            ours.append(
                {
                    "seconds": mine["seconds"],
                    "cpu_s": mine["cpu_total_s"],
                    "peak_rss_mib": mine["peak_rss_total_mib"],
                    "peak_rss_by_process_mib": mine["peak_rss_mib"],
                }
            )
    cpu_ours, cpu_theirs = _best(ours, "cpu_s"), _best(theirs, "cpu_s")
    rss_ours, rss_theirs = _best(ours, "peak_rss_mib"), _best(theirs, "peak_rss_mib")
    wall_ours, wall_theirs = _best(ours, "seconds"), _best(theirs, "seconds")
    return {
        "rival": RIVAL,
        "messages": MESSAGES,
        "runs": RUNS,
        "chatseek": ours,
        "grepogram": theirs,
        "best_cpu_s": {"chatseek": cpu_ours, "grepogram": cpu_theirs},
        "best_seconds": {"chatseek": wall_ours, "grepogram": wall_theirs},
        "best_peak_rss_mib": {"chatseek": rss_ours, "grepogram": rss_theirs},
        "cpu_over_rival": ratio(cpu_ours, cpu_theirs, 2),
        "seconds_over_rival": ratio(wall_ours, wall_theirs, 2),
        "rss_over_rival": ratio(rss_ours, rss_theirs, 2),
    }
