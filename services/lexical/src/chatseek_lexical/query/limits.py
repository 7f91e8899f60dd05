"""The budgets of the strict query language and the one way a budget is reported.

Invariants:
* Every budget has a stable name; exceeding it raises ``QueryLimit`` with ``metadata["budget"]``
  set to that name and the message naming it, never a partial answer.
* ``Budgets`` defaults to the profile's constants; tests and operators may pass tighter ones.
* ``Deadline`` is the single clock of one request: SQLite's progress handler and the batch loops
  both ask it, so the time budget covers everything a request does. It counts the CPU time of
  the request's thread, the query's own cost: a query within budget is not refused because
  the machine is busy (an import, other clients). The caller's gRPC deadline bounds wall time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

import sqlean

from chatseek_core.errors import QueryLimit
from chatseek_core.limits import MAX_QUERY_BYTES

__all__ = [
    "AUTOMATON_STATES",
    "BODY_BYTES_SCANNED",
    "CANDIDATES",
    "DEPTH",
    "NODES",
    "PATTERN_CHARS",
    "QUERY_BYTES",
    "TIME_MS",
    "VOCABULARY_EXPANSIONS",
    "Budgets",
    "Deadline",
    "DEFAULT_BUDGETS",
    "PROGRESS_STEPS",
    "budgeted",
    "exceeded",
]

QUERY_BYTES = MAX_QUERY_BYTES
DEPTH = 32
NODES = 256
PATTERN_CHARS = 1024
AUTOMATON_STATES = 10_000
VOCABULARY_EXPANSIONS = 10_000
CANDIDATES = 50_000
BODY_BYTES_SCANNED = 8 * 1024 * 1024
TIME_MS = 2000
# SQLite virtual machine steps between two looks at the deadline.
PROGRESS_STEPS = 10_000

_MS_PER_S = 1000.0


@dataclass(frozen=True, slots=True)
class Budgets:
    """Per-request ceilings; each field name is also the budget's reported name."""

    query_bytes: int = QUERY_BYTES
    depth: int = DEPTH
    nodes: int = NODES
    pattern_chars: int = PATTERN_CHARS
    automaton_states: int = AUTOMATON_STATES
    vocabulary_expansions: int = VOCABULARY_EXPANSIONS
    candidates: int = CANDIDATES
    body_bytes_scanned: int = BODY_BYTES_SCANNED
    time_ms: int = TIME_MS


DEFAULT_BUDGETS = Budgets()


def exceeded(budget: str, limit: int, what: str, span: tuple[int, int] | None = None) -> QueryLimit:
    """The ``QueryLimit`` for ``budget``: the message names the budget and its ceiling.

    Args:
        budget: the ``Budgets`` field name, reported as ``metadata["budget"]``.
        limit: the ceiling that was exceeded.
        what: a short description of what went over it.
        span: the UTF-16 span of the responsible node, when there is one.
    """
    metadata = {"budget": budget, "limit": str(limit)}
    if span is not None:
        metadata["span"] = f"{span[0]},{span[1]}"
    return QueryLimit(
        f"query exceeds the {budget} budget ({limit}): {what}",
        hint="narrow the query: add words, a chat or a date range, or simplify the pattern",
        metadata=metadata,
    )


@dataclass(slots=True)
class Deadline:
    """The time budget of one request, in CPU time of the thread that runs it."""

    budget_ms: int
    clock: Callable[[], float] = time.thread_time
    started: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def expired(self) -> bool:
        """True once the request has used its whole time budget."""
        return (self.clock() - self.started) * _MS_PER_S >= self.budget_ms

    def check(self, what: str) -> None:
        """Raise the ``time_ms`` ``QueryLimit`` when the budget is used up.

        Raises:
            QueryLimit: the request ran out of time; ``what`` says during which step.
        """
        if self.expired():
            raise exceeded("time_ms", self.budget_ms, what)

    def left_ms(self) -> int:
        """What is left of the budget, in milliseconds (0 once it has run out)."""
        return max(0, int(self.budget_ms - (self.clock() - self.started) * _MS_PER_S))


class Interruptible(Protocol):
    """A connection whose statements a progress handler can interrupt."""

    def set_progress_handler(self, handler: Callable[[], int] | None, n: int, /) -> None: ...


@contextmanager
def budgeted(conn: Interruptible, deadline: Deadline) -> Iterator[None]:
    """Enforce ``deadline`` on every SQLite statement ``conn`` runs inside the block.

    Raises:
        QueryLimit: the time budget ran out while SQLite was working.
    """
    conn.set_progress_handler(lambda: 1 if deadline.expired() else 0, PROGRESS_STEPS)
    try:
        yield
    except sqlean.OperationalError as exc:
        if "interrupt" in str(exc).lower():
            raise exceeded("time_ms", deadline.budget_ms, "the query ran out of time") from exc
        raise
    finally:
        conn.set_progress_handler(None, 0)
