"""The local stack: every service as a process on loopback, managed through pid files.

``up`` starts whatever is not already serving (``python -m chatseek_<svc>`` with the same env
variables the containers get), waits until every health check says SERVING and records pids
under ``$CHATSEEK_HOME/run``; ``down`` stops them (SIGTERM, then SIGKILL after a grace period) and
leaves no process behind; ``status`` reports SERVING, NOT_SERVING or DOWN per service. Service
logs rotate under ``$CHATSEEK_HOME/logs``; a crashed process's last words stay in ``run/<svc>.out``.
This module imports no service package, so the CLI stays fast.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from chatseek_core.probe import check
from chatseek_core.settings import SERVICES, Settings

__all__ = ["ServiceState", "StackError", "down", "logs", "status", "up"]

UP_TIMEOUT_S = 180.0
DOWN_GRACE_S = 10.0
POLL_S = 0.2
HEALTH_TIMEOUT_S = 1.0


class StackError(RuntimeError):
    """The stack could not be brought up or down; the message says which service and why."""


@dataclass(frozen=True)
class ServiceState:
    """One service of the local stack as ``stack status`` reports it."""

    name: str
    address: str
    pid: int | None
    health: str

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "address": self.address, "pid": self.pid, "health": self.health}


def _pid_file(settings: Settings, name: str) -> Path:
    return settings.run_dir / f"{name}.pid"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        return True
    with contextlib.suppress(OSError, IndexError):
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _read_pid(settings: Settings, name: str) -> int | None:
    path = _pid_file(settings, name)
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def status(settings: Settings) -> list[ServiceState]:
    """Every service's address, pid (when the stack started it) and health."""
    out = []
    for name in SERVICES:
        addr = settings.addr(name)
        out.append(
            ServiceState(
                name=name,
                address=addr,
                pid=_read_pid(settings, name),
                health=check(addr, timeout=HEALTH_TIMEOUT_S),
            )
        )
    return out


def _service_env(settings: Settings, name: str, base: Mapping[str, str]) -> dict[str, str]:
    env = dict(base)
    env["CHATSEEK_HOME"] = str(settings.home)
    env["CHATSEEK_DATA_DIR"] = str(settings.data_dir)
    env["CHATSEEK_LOG_DIR"] = str(settings.log_dir)
    env.setdefault("CHATSEEK_LOG_FORMAT", "text")
    for svc in SERVICES:
        env[f"CHATSEEK_{svc.upper()}_ADDR"] = settings.addr(svc)
    env["CHATSEEK_LISTEN"] = settings.addr(name)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _last_words(out: Path, limit: int = 400) -> str:
    """``": <the last line the service printed>"``, or nothing when it printed nothing."""
    try:
        lines = [line for line in out.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return f": {lines[-1].strip()[:limit]}" if lines else ""


def up(
    settings: Settings,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = UP_TIMEOUT_S,
    on_progress: Callable[[str], None] | None = None,
) -> list[ServiceState]:
    """Start every service not already SERVING and wait until all are.

    A start that fails stops the services this call started (those already running before it
    are left alone), so a failed ``up`` leaves nothing behind.

    Raises:
        StackError: a service exited or did not become SERVING in time (names it and points at
            its output file).
    """
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    settings.run_dir.chmod(0o700)
    settings.log_dir.mkdir(parents=True, exist_ok=True)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    base = dict(os.environ if env is None else env)
    started: dict[str, subprocess.Popen[bytes]] = {}
    for name in SERVICES:
        if check(settings.addr(name), timeout=HEALTH_TIMEOUT_S) == "SERVING":
            continue
        old = _read_pid(settings, name)
        if old is not None:
            continue  # still starting: wait for it below
        out = open(settings.run_dir / f"{name}.out", "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(
            [sys.executable, "-m", f"chatseek_{name}"],
            env=_service_env(settings, name, base),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(settings.home),
        )
        out.close()
        _pid_file(settings, name).write_text(f"{proc.pid}\n")
        started[name] = proc
        if on_progress:
            on_progress(f"started {name} (pid {proc.pid})")
    try:
        _wait_serving(settings, started, timeout_s, on_progress)
    except BaseException:
        # Stop what is still running; a service that exited by itself keeps its (dead) pid file
        # for whoever looks into why (`_read_pid` ignores a dead pid).
        running = {name: proc.pid for name, proc in started.items() if proc.poll() is None}
        _stop(settings, running, DOWN_GRACE_S)
        for proc in started.values():
            proc.poll()  # reap
        raise
    return status(settings)


def _wait_serving(
    settings: Settings,
    started: Mapping[str, subprocess.Popen[bytes]],
    timeout_s: float,
    on_progress: Callable[[str], None] | None,
) -> None:
    deadline = time.monotonic() + timeout_s
    pending = set(SERVICES)
    while pending:
        for name in sorted(pending):
            child = started.get(name)
            if child is not None and child.poll() is not None:
                printed = settings.run_dir / f"{name}.out"
                raise StackError(
                    f"{name} exited with code {child.returncode} while starting"
                    f"{_last_words(printed)}; see {printed}"
                )
            if check(settings.addr(name), timeout=HEALTH_TIMEOUT_S) == "SERVING":
                pending.discard(name)
                if on_progress and name in started:
                    on_progress(f"{name} is SERVING")
        if pending and time.monotonic() > deadline:
            raise StackError(
                f"not SERVING after {timeout_s:.0f}s: {', '.join(sorted(pending))}; "
                f"see {settings.run_dir}/<service>.out"
            )
        if pending:
            time.sleep(POLL_S)


def down(settings: Settings, *, grace_s: float = DOWN_GRACE_S) -> list[str]:
    """Stop every service this stack started; returns the names stopped."""
    pids = {name: pid for name in SERVICES if (pid := _read_pid(settings, name)) is not None}
    return _stop(settings, pids, grace_s)


def _stop(settings: Settings, pids: Mapping[str, int], grace_s: float) -> list[str]:
    """SIGTERM each process group, SIGKILL what outlives ``grace_s``, drop their pid files."""
    stopped = []
    for pid in pids.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(_alive(pid) for pid in pids.values()) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    for name, pid in pids.items():
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        stopped.append(name)
    deadline = time.monotonic() + grace_s
    while any(_alive(pid) for pid in pids.values()) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    for name in pids:
        with contextlib.suppress(FileNotFoundError):
            _pid_file(settings, name).unlink()
    return stopped


def logs(settings: Settings, name: str, lines: int = 200) -> str:
    """The last ``lines`` of a service's log (its rotated log, else its raw output)."""
    if name not in SERVICES:
        raise StackError(f"unknown service {name!r}; choose one of {', '.join(SERVICES)}")
    for path in (settings.log_dir / f"{name}.log", settings.run_dir / f"{name}.out"):
        if path.exists():
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""
