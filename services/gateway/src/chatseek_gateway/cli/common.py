"""What every CLI command shares: the gateway stub, output, progress bars and error exits."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from typing import Any

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
BAR_WIDTH = 30

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


def _bar(stage: str, done: int, total: int, note: str) -> str:
    if total > 0:
        filled = int(BAR_WIDTH * min(done, total) / total)
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        return f"\r{stage:>10} [{bar}] {done}/{total} {note}"[:160]
    return f"\r{stage:>10} {done} {note}"[:160]


def run_operation(events: Iterable[Any]) -> dict[str, Any]:
    """Consume a stream of ``OperationEvent``-carrying responses; draw progress on a terminal.

    Returns:
        The final report document.
    """
    tty = sys.stderr.isatty()
    result: dict[str, Any] = {}
    drew = False
    for response in _events(events):
        kind = response.WhichOneof("event")
        if kind == "progress":
            if tty:
                p = response.progress
                sys.stderr.write(_bar(p.stage, p.done, p.total, p.note))
                sys.stderr.flush()
                drew = True
        elif kind == "result":
            result = from_document(response.result)
    if drew:
        sys.stderr.write("\n")
    return result


def _events(responses: Iterable[Any]) -> Iterator[Any]:
    import grpc

    from chatseek_core.client import decode_error

    try:
        for response in responses:
            yield response.event
    except grpc.RpcError as err:
        raise decode_error(err, "gateway") from None
