"""How a tool calls the gateway, and how an expected failure becomes its result.

``GatewayCalls`` makes the calls over one ``GatewayConnection``: a unary RPC's answer as JSON, a
streaming operation's final report. ``tool`` wraps each tool method: an expected failure
(``ChatseekError``, raised by validation or decoded from the gateway) comes back as a normal
result ``{"error", "reason", "hint", "candidates"?, "field"?}`` (``error_result``); anything else
is a bug and surfaces as a tool error. One log line per call, without the arguments. A request
that names no account is sent for the connection's account (``with_account``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from chatseek_core.client import call, stream
from chatseek_core.errors import ChatseekError
from chatseek_core.wire_json import answer_json, event_report
from chatseek_gateway.mcp.gateway import GatewayConnection
from chatseek_gateway.shapes import Evented

if TYPE_CHECKING:
    import grpc
    from google.protobuf.message import Message

    from chatseek_gateway.stubs import AsyncGatewayStubs

__all__ = [
    "READ_TIMEOUT_S",
    "SEARCH_TIMEOUT_S",
    "WRITE_TIMEOUT_S",
    "GatewayCalls",
    "error_result",
    "tool",
    "with_account",
]

log = logging.getLogger(__name__)

P = ParamSpec("P")
Area = TypeVar("Area")
Req = TypeVar("Req", bound="Message")
Doc = TypeVar("Doc", bound="Message")
Evt = TypeVar("Evt", bound=Evented)
ToolMethod = Callable[Concatenate[Area, P], Awaitable[dict[str, Any]]]

READ_TIMEOUT_S = 60.0
SEARCH_TIMEOUT_S = 120.0
WRITE_TIMEOUT_S = 120.0
SYNC_MARGIN_S = 30.0
# The request fields ``with_account`` reads by name, whatever the request's type.
ACCOUNT_FIELD = "account"
SOURCE_FIELD = "source"


def error_result(exc: ChatseekError) -> dict[str, Any]:
    """The tool result for an expected failure: ``{"error", "reason", "hint", ...}``.

    The field an invalid argument names is lifted to the top level as ``field``.
    """
    out: dict[str, Any] = dict(exc.to_dict())
    field_name = exc.metadata.get("field")
    if field_name:
        out["field"] = field_name
    return out


def tool(method: ToolMethod[Area, P]) -> ToolMethod[Area, P]:
    """Turn expected failures into error results and log one line per call (no arguments)."""

    @functools.wraps(method)
    async def wrapper(self: Area, /, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            result = await method(self, *args, **kwargs)
        except ChatseekError as exc:
            ms = (time.perf_counter() - started) * 1000
            log.info("tool %s %s %.1fms", method.__name__, exc.reason, ms)
            return error_result(exc)
        log.info("tool %s OK %.1fms", method.__name__, (time.perf_counter() - started) * 1000)
        return result

    return wrapper


def with_account(request: Message, account: str) -> None:
    """Fill in ``account`` where ``request``, or a request inside it, leaves it empty.

    A request for every account (``source`` all) keeps its empty account: there it means no
    account in particular. Nothing changes when ``account`` is empty.
    """
    if not account:
        return
    fields = request.DESCRIPTOR.fields_by_name
    if ACCOUNT_FIELD in fields and not getattr(request, ACCOUNT_FIELD):
        if not _for_every_account(request):
            setattr(request, ACCOUNT_FIELD, account)
    for field in request.DESCRIPTOR.fields:
        single = field.message_type is not None and not field.is_repeated
        if single and request.HasField(field.name):
            with_account(getattr(request, field.name), account)


def _for_every_account(request: Message) -> bool:
    source = request.DESCRIPTOR.fields_by_name.get(SOURCE_FIELD)
    if source is None or source.enum_type is None:
        return False
    value = source.enum_type.values_by_number.get(getattr(request, SOURCE_FIELD))
    return value is not None and value.name == "SOURCE_ALL"


class GatewayCalls:
    """The gateway calls the tools make, over one connection (which the caller closes).

    Args:
        gateway: the connection to the gateway's gRPC facade.
    """

    def __init__(self, gateway: GatewayConnection) -> None:
        self._gateway = gateway

    async def document(
        self,
        rpc: Callable[[AsyncGatewayStubs], grpc.aio.UnaryUnaryMultiCallable[Req, Doc]],
        request: Req,
        *,
        timeout: float = READ_TIMEOUT_S,
        idempotent: bool = True,
    ) -> dict[str, Any]:
        """Call the unary RPC that ``rpc`` picks from the gateway's stubs; its answer as JSON."""
        method = rpc(await self._gateway.stubs())
        with_account(request, self._gateway.account)
        reply = await call(method, request, timeout=timeout, idempotent=idempotent, peer="gateway")
        return answer_json(reply)

    async def operation(
        self,
        rpc: Callable[[AsyncGatewayStubs], grpc.aio.UnaryStreamMultiCallable[Req, Evt]],
        request: Req,
        timeout: float,
    ) -> dict[str, Any]:
        """Run a streaming operation; returns its final report (progress is dropped)."""
        method = rpc(await self._gateway.stubs())
        with_account(request, self._gateway.account)
        report: dict[str, Any] = {}
        responses = stream(method, request, timeout=timeout, peer="gateway")
        async for response in responses:
            if (result := event_report(response.event)) is not None:
                report = result
        return report

    async def sync(self, budget_s: float, chats: list[str]) -> dict[str, Any]:
        """Run the gateway's sync of ``chats`` within ``budget_s``; its final report."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.SyncRequest(budget_s=budget_s, chats=chats)
        return await self.operation(lambda g: g.archive.Sync, request, budget_s + SYNC_MARGIN_S)
