"""Fault injection for the tests: a process that SIGKILLs itself around its n-th writing COMMIT.

``CHATSEEK_FAULT_KILL_AT="<owner>:<n>[:after]"`` makes a process die just before (or, with
``:after``, just after) the n-th COMMIT that wrote rows to ``<owner>.db``; empty transactions
are not counted, so an idle poll never moves the count. Shipped code knows nothing of this: the
kill point is a ``chatseek_core.db`` commit hook, and it is installed only in processes started
with ``SITE_DIR`` on ``PYTHONPATH`` (``armed_env`` sets both), whose ``sitecustomize`` arms it
when ``chatseek_core.db`` is first imported. A malformed value fails that import, naming the
variable, as a malformed setting does; a process that never opens a database (the CLI) is
unaffected.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chatseek_core.db import Connection

__all__ = ["FAULT_KILL_ENV", "SITE_DIR", "KillPoint", "armed_env", "install", "kill_point"]

log = logging.getLogger(__name__)

FAULT_KILL_ENV = "CHATSEEK_FAULT_KILL_AT"
SITE_DIR = Path(__file__).resolve().parent / "site"
"""The folder whose ``sitecustomize`` installs the kill point; put it on ``PYTHONPATH``."""
_DB_MODULE = "chatseek_core.db"


@dataclass(frozen=True)
class KillPoint:
    """Die around the ``commit``-th writing COMMIT to ``<owner>.db`` (after it when ``after``)."""

    owner: str
    commit: int
    after: bool


def kill_point(spec: str | None) -> KillPoint | None:
    """Parse ``<owner>:<n>[:after]`` (None when unset or empty).

    Raises:
        ValueError: a malformed value; the message names ``FAULT_KILL_ENV``.
    """
    if not spec:
        return None
    parts = spec.split(":")
    if len(parts) in (2, 3) and parts[0] and parts[1].isdigit() and int(parts[1]) >= 1:
        if len(parts) == 2 or parts[2] in ("before", "after"):
            return KillPoint(parts[0], int(parts[1]), len(parts) == 3 and parts[2] == "after")
    raise ValueError(f"{FAULT_KILL_ENV}={spec!r}: expected <owner>:<n>[:after] with n >= 1")


def armed_env(env: Mapping[str, str], fault: str | None) -> dict[str, str]:
    """``env`` for a child process that carries the kill point ``fault`` (None: disarmed)."""
    out = dict(env)
    out.pop(FAULT_KILL_ENV, None)
    if fault is not None:
        out[FAULT_KILL_ENV] = fault
        paths = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]
        if str(SITE_DIR) not in paths:
            out["PYTHONPATH"] = os.pathsep.join([str(SITE_DIR), *paths])
    return out


class _Killer:
    """The commit hook: counts writing commits to the owner's file, kills at the chosen one."""

    def __init__(self, point: KillPoint) -> None:
        self._point = point
        self._lock = threading.Lock()
        self._commits = 0
        self._armed = threading.local()

    def __call__(self, conn: Connection, phase: str) -> None:
        point = self._point
        if phase == "after":
            due, self._armed.due = getattr(self._armed, "due", False), False
            if due:
                self._kill()
            return
        if _owner_of(conn) != point.owner:
            return
        with self._lock:
            self._commits += 1
            due = self._commits == point.commit
        if due and not point.after:
            self._kill()
        self._armed.due = due

    def _kill(self) -> None:
        point = self._point
        log.warning(
            "fault injection: SIGKILL %s commit %d of %s",
            "after" if point.after else "before",
            point.commit,
            point.owner,
        )
        os.kill(os.getpid(), signal.SIGKILL)


def _owner_of(conn: Connection) -> str:
    for row in conn.execute("PRAGMA database_list"):
        if row[1] == "main":
            return Path(row[2]).stem if row[2] else ""
    return ""


def _arm(db: ModuleType) -> None:
    point = kill_point(os.environ.get(FAULT_KILL_ENV))
    if point is not None:
        db.add_commit_hook(_Killer(point))


def _arm_after(loader: importlib.abc.Loader) -> None:
    execute = loader.exec_module

    def exec_module(module: ModuleType) -> None:
        execute(module)
        _arm(module)

    loader.exec_module = exec_module  # type: ignore[method-assign]


class _ArmOnImport(importlib.abc.MetaPathFinder):
    """Arms the kill point right after ``chatseek_core.db`` executes, wherever it is found."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _DB_MODULE:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec: importlib.machinery.ModuleSpec | None = (
                find(fullname, path, target) if find is not None else None
            )
            if spec is not None and spec.loader is not None:
                _arm_after(spec.loader)
                return spec
        return None


def install() -> None:
    """Arm the kill point in this process (``sitecustomize`` calls this at start-up).

    Does nothing when ``FAULT_KILL_ENV`` is unset; arms at once when ``chatseek_core.db`` is
    already imported, otherwise when it is.
    """
    if not os.environ.get(FAULT_KILL_ENV):
        return
    db = sys.modules.get(_DB_MODULE)
    if db is not None:
        _arm(db)
    elif not any(isinstance(f, _ArmOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _ArmOnImport())
