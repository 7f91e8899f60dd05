"""What every CLI command shares: the gateway stub, the calls, output and error exits.

A call goes straight to the gateway. Only when nothing answers there (an UNAVAILABLE that no
server sent, and a health probe that confirms it) is the local stack started, saying so on
stderr, and the call made again: a running stack pays for no probe. ``call`` is for unary RPCs,
``operation`` for the streaming ones whose progress ``run_operation`` shows. This module is
imported by every command, so it imports nothing heavy at the top: the CLI must start fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any, TypeAlias, TypeVar, overload

if TYPE_CHECKING:
    import grpc
    from rich.console import Console

    from chatseek_core.errors import ChatseekError
    from chatseek_core.settings import Settings
    from chatseek_gateway.cli.progress import OperationT
    from chatseek_gateway.stubs import GatewayStubs

__all__ = [
    "EXIT_CODES",
    "LONG_TIMEOUT_S",
    "SOURCE_HELP",
    "Subparsers",
    "at_least_one",
    "call",
    "emit",
    "ensure_gateway",
    "exit_code_for",
    "gateway",
    "operation",
    "print_error",
    "run_operation",
    "settings",
]

SOURCE_HELP = "active (the active account, the default; telegram is the same) or all"

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
# After the stack came up: how long the CLI's channel may take to connect (its backoff from the
# refused first attempt is up to 0.5 s; see chatseek_core.client).
GATEWAY_READY_TIMEOUT_S = 10.0
LONG_TIMEOUT_S = 24 * 3600.0
# grpc core's words for a call that never left the client (nothing listens at the address).
NEVER_SENT = "failed to connect"

# What ``add_subparsers`` returns: a command module's ``register`` adds its parsers to it.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

Req = TypeVar("Req")
Resp = TypeVar("Resp")

_settings: Settings | None = None


_stubs: GatewayStubs | None = None


def settings() -> Settings:
    """The CLI's settings, parsed once."""
    global _settings
    if _settings is None:
        from chatseek_core.settings import load_settings

        _settings = load_settings()
    return _settings


def gateway() -> GatewayStubs:
    """The gateway's stubs over one blocking channel, opened on first use (no probe)."""
    global _stubs
    if _stubs is None:
        from chatseek_core.client import sync_channel
        from chatseek_gateway.stubs import GatewayStubs

        _stubs = GatewayStubs.over(sync_channel(settings().addr("gateway")))
    return _stubs


def _start_stack() -> None:
    """Start the local stack, saying so on stderr, and wait until the CLI's channel connects.

    Raises:
        Unavailable: a service did not come up (names it; hint: its logs).
    """
    import grpc

    from chatseek_gateway import stack

    cfg = settings()
    addr = cfg.addr("gateway")
    print(f"chatseek: no gateway at {addr}; starting the local stack…", file=sys.stderr)
    try:
        stack.up(cfg, on_progress=lambda line: print(f"  {line}", file=sys.stderr))
    except stack.StackError as exc:
        from chatseek_core.errors import Unavailable

        raise Unavailable(str(exc), hint="see `chatseek stack logs SERVICE`") from exc
    try:
        grpc.channel_ready_future(gateway().channel).result(timeout=GATEWAY_READY_TIMEOUT_S)
    except grpc.FutureTimeoutError:
        from chatseek_core.errors import Unavailable

        raise Unavailable(
            f"the local stack is up but the gateway at {addr} does not connect",
            hint="check `chatseek stack status` and `chatseek stack logs gateway`",
        ) from None


def ensure_gateway() -> None:
    """Start the local stack when no gateway answers a health probe (the MCP server's hook).

    Raises:
        Unavailable: the stack could not be started.
    """
    from chatseek_core.probe import check

    if check(settings().addr("gateway"), timeout=GATEWAY_PROBE_TIMEOUT_S) != "SERVING":
        _start_stack()


def _again_after(err: grpc.RpcError, idempotent: bool) -> bool:
    """After a failed first call: start the stack if the gateway is down; whether to call again.

    Only an UNAVAILABLE that no server sent can mean "no gateway"; a health probe tells a
    gateway that is not there from one that dropped a call. A call that may have reached the
    gateway (not idempotent, and not refused at connect) is not sent twice.
    """
    from chatseek_core.client import retryable
    from chatseek_core.probe import check

    if not retryable(err):
        return False
    again = idempotent or NEVER_SENT in (err.details() or "")
    if check(settings().addr("gateway"), timeout=GATEWAY_PROBE_TIMEOUT_S) != "SERVING":
        _start_stack()
    return again


def call(
    method: grpc.UnaryUnaryMultiCallable[Req, Resp],
    request: Req,
    *,
    timeout: float = 120.0,
    idempotent: bool = True,
) -> Resp:
    """Call a unary gateway RPC (a stub method, e.g. ``gateway().search.Search``) with a deadline.

    Errors arrive decoded.

    Raises:
        ChatseekError: the decoded error; ``Unavailable`` when the stack cannot be started.
    """
    import grpc

    from chatseek_core.client import decode_error, sync_call

    try:
        return method(request, timeout=timeout)
    except grpc.RpcError as err:
        if not _again_after(err, idempotent):
            raise decode_error(err, "gateway") from None
    return sync_call(method, request, timeout=timeout, idempotent=idempotent, peer="gateway")


@overload
def operation(
    method: grpc.UnaryStreamMultiCallable[Req, Resp],
    request: Req,
    *,
    timeout: float = LONG_TIMEOUT_S,
) -> Iterator[Resp]: ...


@overload
def operation(
    method: grpc.StreamStreamMultiCallable[Req, Resp],
    request: Callable[[], Iterator[Req]],
    *,
    timeout: float = LONG_TIMEOUT_S,
) -> Iterator[Resp]: ...


def operation(
    method: Callable[..., Iterator[Resp]], request: object, *, timeout: float = LONG_TIMEOUT_S
) -> Iterator[Resp]:
    """Start a server-streaming gateway RPC (a stub method); its responses.

    Errors in later responses are decoded by ``run_operation``.

    Args:
        request: the request message, or a function returning a fresh request iterator (a
            client stream such as ``Import``, rebuilt when the call is made again).

    Raises:
        ChatseekError: the first response failed (decoded); ``Unavailable`` as for ``call``.
    """
    import itertools

    import grpc

    from chatseek_core.client import decode_error

    def start() -> Iterator[Resp]:
        body = request() if callable(request) else request
        return method(body, timeout=timeout)

    responses = start()
    try:
        first = next(responses)
    except StopIteration:
        return iter(())
    except grpc.RpcError as err:
        if not _again_after(err, idempotent=False):
            raise decode_error(err, "gateway") from None
        responses = start()
        try:
            first = next(responses)
        except StopIteration:
            return iter(())
        except grpc.RpcError as again:
            raise decode_error(again, "gateway") from None
    return itertools.chain([first], responses)


def at_least_one(value: int, option: str, field: str) -> int:
    """``value`` of a count option; 0 would reach the server as "unset" and mean the default.

    Raises:
        InvalidArgument: ``value`` is below 1 (names the request ``field``).
    """
    if value < 1:
        from chatseek_core.errors import InvalidArgument

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


def run_operation(
    events: Iterable[OperationT],
    *,
    as_json: bool = False,
    console: Console | None = None,
    stream: IO[str] | None = None,
) -> dict[str, Any]:
    """Consume a stream of ``OperationEvent``-carrying responses, showing their progress.

    See ``chatseek_gateway.cli.progress.run_operation`` (imported here only when used).
    """
    from chatseek_gateway.cli.progress import run_operation as _run_operation

    return _run_operation(events, as_json=as_json, console=console, stream=stream)
