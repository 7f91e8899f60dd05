"""How long operations show their progress: ``rich`` on a terminal, JSON lines with ``--json``.

Long operations stream ``OperationEvent``s; ``run_operation`` draws them with ``rich`` on a
terminal (one line per stage, one for the item being worked on with its count and rate, and
the flood wait being waited out, counted down), writes each as one JSON line on stderr with
``--json`` (stdout keeps the one result document), and stays silent when piped otherwise.
Imported only by a command that runs such an operation: ``rich`` costs the CLI's start-up.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeVar

import grpc
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from chatseek_core.client import decode_error
from chatseek_core.wire_json import event_report

if TYPE_CHECKING:
    from chatseek.common.v1 import common_pb2

__all__ = ["PROGRESS_FIELDS", "Operation", "OperationT", "progress_json", "run_operation"]

REFRESH_PER_SECOND = 4
PROGRESS_FIELDS = ("stage", "done", "total", "note", "item", "item_done", "count", "wait_s")


class Operation(Protocol):
    """One response of a streamed operation (import, sync, embed, ...): it carries an event."""

    @property
    def event(self) -> common_pb2.OperationEvent: ...


OperationT = TypeVar("OperationT", bound=Operation)


def progress_json(progress: common_pb2.Progress) -> dict[str, Any]:
    """One progress event as the JSON object ``--json`` streams on stderr."""
    out: dict[str, Any] = {"event": "progress"}
    for name in PROGRESS_FIELDS:
        out[name] = getattr(progress, name)
    if progress.account:
        out["account"] = progress.account
    return out


class _WaitColumn(ProgressColumn):
    """The flood wait being waited out, counted down from when its event arrived."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__()
        self._clock = clock

    def render(self, task: Task) -> Text:
        until = float(task.fields.get("wait_until") or 0.0)
        left = until - self._clock()
        if left <= 0:
            return Text(str(task.fields.get("detail") or ""), style="dim")
        return Text(f"Telegram flood wait: {left:.0f} s left", style="yellow")


class _Display:
    """The ``rich`` view of an operation's progress events on a terminal."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description:>12}"),
            BarColumn(bar_width=30),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            _WaitColumn(clock),
            console=console,
            refresh_per_second=REFRESH_PER_SECOND,
            transient=False,
        )
        self._stages: dict[str, TaskID] = {}
        self._items: dict[str, TaskID] = {}
        self._started = clock()

    def __enter__(self) -> _Display:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def update(self, p: common_pb2.Progress) -> None:
        stage = self._stages.get(p.stage)
        total = p.total if p.total > 0 else None
        wait_until = self._clock() + p.wait_s if p.wait_s > 0 else 0.0
        detail = p.note if not p.item else ""
        if stage is None:
            stage = self._progress.add_task(p.stage, total=total, detail=detail)
            self._stages[p.stage] = stage
        self._progress.update(
            stage, completed=p.done, total=total, detail=detail, wait_until=wait_until
        )
        if p.item:
            self._item(p)

    def _item(self, p: common_pb2.Progress) -> None:
        elapsed = max(self._clock() - self._started, 1e-6)
        rate = f"{p.count / elapsed:.0f} msg/s" if p.count else ""
        detail = f"{p.item_done} messages  {rate}".rstrip()
        key = f"{p.stage}/{p.item}"
        task = self._items.get(key)
        if task is None:
            task = self._progress.add_task(f"  {p.item[:24]}", total=None, detail=detail)
            self._items[key] = task
        self._progress.update(task, completed=p.item_done, detail=detail)


def run_operation(
    events: Iterable[OperationT],
    *,
    as_json: bool = False,
    console: Console | None = None,
    stream: IO[str] | None = None,
) -> dict[str, Any]:
    """Consume a stream of ``OperationEvent``-carrying responses, showing their progress.

    Args:
        as_json: write every progress event as one JSON line on stderr (``--json``).
        console: where to draw; by default stderr, and only when it is a terminal.
        stream: where ``as_json`` writes (default stderr).

    Returns:
        The final report document.
    """
    out = stream if stream is not None else sys.stderr
    if console is None and not as_json and sys.stderr.isatty():
        console = Console(stderr=True)
    display = _Display(console) if console is not None and not as_json else None
    result: dict[str, Any] = {}
    if display is not None:
        display.__enter__()
    try:
        for response in _events(events):
            kind = response.WhichOneof("event")
            if kind == "progress":
                if as_json:
                    out.write(json.dumps(progress_json(response.progress), ensure_ascii=False))
                    out.write("\n")
                    out.flush()
                elif display is not None:
                    display.update(response.progress)
            elif (report := event_report(response)) is not None:
                result = report
    finally:
        if display is not None:
            display.__exit__(None, None, None)
    return result


def _events(responses: Iterable[Operation]) -> Iterator[common_pb2.OperationEvent]:
    try:
        for response in responses:
            yield response.event
    except grpc.RpcError as err:
        raise decode_error(err, "gateway") from None
