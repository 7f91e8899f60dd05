"""What every CLI command shares: the gateway stub, output, progress display and error exits.

Long operations stream ``OperationEvent``s; ``run_operation`` draws them with ``rich`` on a
terminal (one line per stage, one for the item being worked on with its count and rate, and
the flood wait being waited out, counted down), writes each as one JSON line on stderr with
``--json`` (stdout keeps the one result document), and stays silent when piped otherwise.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

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

from chatseek_core.client import sync_call, sync_channel
from chatseek_core.errors import ChatseekError, InvalidArgument
from chatseek_core.probe import check
from chatseek_core.proto_json import from_document
from chatseek_core.settings import Settings, load_settings

__all__ = [
    "EXIT_CODES",
    "at_least_one",
    "call",
    "emit",
    "exit_code_for",
    "gateway",
    "print_error",
    "progress_json",
    "run_operation",
    "settings",
]

EXIT_CODES = {
    "INVALID_ARGUMENT": 2,
    "NOT_FOUND": 3,
    "FAILED_PRECONDITION": 4,
    "UNAVAILABLE": 5,
    "RESOURCE_EXHAUSTED": 6,
    "DEADLINE_EXCEEDED": 7,
    "UNAUTHENTICATED": 8,
    "ALREADY_EXISTS": 9,
}
GATEWAY_PROBE_TIMEOUT_S = 1.0
LONG_TIMEOUT_S = 24 * 3600.0
REFRESH_PER_SECOND = 4
PROGRESS_FIELDS = ("stage", "done", "total", "note", "item", "item_done", "count", "wait_s")

_settings: Settings | None = None
_stub: Any = None


def settings() -> Settings:
    """The CLI's settings, parsed once."""
    global _settings
    if _settings is None:
        _settings = load_settings()
    return _settings


def gateway() -> Any:
    """The gateway stub; starts the local stack first (saying so) when nothing answers."""
    global _stub
    if _stub is not None:
        return _stub
    from chatseek.gateway.v1 import gateway_service_pb2_grpc

    cfg = settings()
    addr = cfg.addr("gateway")
    if check(addr, timeout=GATEWAY_PROBE_TIMEOUT_S) != "SERVING":
        from chatseek_gateway import stack

        print(f"chatseek: no gateway at {addr}; starting the local stack…", file=sys.stderr)
        try:
            stack.up(cfg, on_progress=lambda line: print(f"  {line}", file=sys.stderr))
        except stack.StackError as exc:
            from chatseek_core.errors import Unavailable

            raise Unavailable(str(exc), hint="see `chatseek stack logs SERVICE`") from exc
    _stub = gateway_service_pb2_grpc.GatewayServiceStub(sync_channel(addr))
    return _stub


def call(method_name: str, request: Any, *, timeout: float = 120.0, idempotent: bool = True) -> Any:
    """Call a unary gateway RPC by name with a deadline; errors arrive decoded."""
    stub = gateway()
    return sync_call(
        getattr(stub, method_name), request, timeout=timeout, idempotent=idempotent, peer="gateway"
    )


def at_least_one(value: int, option: str, field: str) -> int:
    """``value`` of a count option; 0 would reach the server as "unset" and mean the default.

    Raises:
        InvalidArgument: ``value`` is below 1 (names the request ``field``).
    """
    if value < 1:
        raise InvalidArgument(f"{option} must be at least 1", metadata={"field": field})
    return value


def exit_code_for(exc: ChatseekError) -> int:
    """The process exit code for an error: per status code, 1 for anything else."""
    return EXIT_CODES.get(exc.code.name, 1)


def print_error(exc: ChatseekError, as_json: bool = False) -> None:
    """Print an expected failure: JSON on stdout with --json, a readable line on stderr always."""
    if as_json:
        print(json.dumps(exc.to_dict(), ensure_ascii=False))
    print(f"error: {exc.message} ({exc.reason})", file=sys.stderr)
    span = exc.metadata.get("span")
    query = exc.metadata.get("query")
    if span and query is not None:
        start, _, end = span.partition(",")
        if start.isdigit() and end.isdigit():
            caret_start = _utf16_to_index(query, int(start))
            caret_end = max(caret_start + 1, _utf16_to_index(query, int(end)))
            print(f"  {query}", file=sys.stderr)
            print("  " + " " * caret_start + "^" * (caret_end - caret_start), file=sys.stderr)
    if exc.candidates:
        print("  candidates: " + ", ".join(exc.candidates), file=sys.stderr)
    if exc.hint:
        print(f"  hint: {exc.hint}", file=sys.stderr)


def _utf16_to_index(text: str, units: int) -> int:
    count = 0
    for index, ch in enumerate(text):
        if count >= units:
            return index
        count += 2 if ord(ch) > 0xFFFF else 1
    return len(text)


def emit(doc: Any, *, as_json: bool) -> None:
    """Print a JSON document (``--json``) compactly readable, UTF-8 kept."""
    if as_json:
        print(json.dumps(doc, ensure_ascii=False, indent=2))


def progress_json(progress: Any) -> dict[str, Any]:
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

    def update(self, p: Any) -> None:
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

    def _item(self, p: Any) -> None:
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
    events: Iterable[Any],
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
            elif kind == "result":
                result = from_document(response.result)
    finally:
        if display is not None:
            display.__exit__(None, None, None)
    return result


def _events(responses: Iterable[Any]) -> Iterator[Any]:
    import grpc

    from chatseek_core.client import decode_error

    try:
        for response in responses:
            yield response.event
    except grpc.RpcError as err:
        raise decode_error(err, "gateway") from None
