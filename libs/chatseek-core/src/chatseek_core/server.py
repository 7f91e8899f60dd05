"""The server bootstrap every service shares: interceptor, health, reflection, limits, SIGTERM.

``build_server`` returns a bound, not yet started ``grpc.aio.Server`` with:
* one interceptor that turns a ``ChatseekError`` into ``google.rpc.Status`` with an
  ``ErrorInfo`` (reason, domain ``<svc>.chatseek``) and ``Help``/``RetryInfo`` details, turns
  anything else into INTERNAL with one server-side traceback, bounds concurrent calls per
  method (excess is shed with RESOURCE_EXHAUSTED and a retry hint), propagates the caller's
  deadline to downstream calls, and logs one INFO line per RPC;
* the standard health service (NOT_SERVING until the caller marks it SERVING) and reflection;
* message size limits.
``serve_forever`` runs until SIGTERM/SIGINT, then flips health to NOT_SERVING and stops with grace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from grpc_status import rpc_status

from chatseek_core import deadline
from chatseek_core.aio import in_flight, quiesce
from chatseek_core.client import FLOW_CONTROL_OPTIONS
from chatseek_core.db import storage_error
from chatseek_core.errors import ChatseekError, Overloaded

__all__ = [
    "MAX_MESSAGE_BYTES",
    "ServerHandle",
    "build_server",
    "serve_forever",
    "shut_down",
    "status_for",
]

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_CONCURRENT_PER_METHOD = 64
SHUTDOWN_GRACE_S = 5.0
QUIESCE_TIMEOUT_S = 10.0
OVERLOAD_RETRY_S = 0.5
# gRPC sends a status in at most 16 KiB of trailing metadata (its details base64-encoded, its
# message percent-encoded); an error echoing an over-long input (a 10 000-character tag) is
# clipped to fit, or the client would get a bare RESOURCE_EXHAUSTED instead of the error.
STATUS_METADATA_BUDGET = 12 * 1024
STATUS_CLIPS = (4096, 512, 64)
MAX_STATUS_CANDIDATES = 20
SERVER_OPTIONS = [
    *FLOW_CONTROL_OPTIONS,
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _metadata_bytes(status: status_pb2.Status) -> int:
    """At most what ``status`` takes in trailing metadata (base64 details, escaped message)."""
    return 4 * int(status.ByteSize()) // 3 + 3 * len(status.message.encode())


def _status(exc: ChatseekError, service: str, limit: int) -> status_pb2.Status:
    info = error_details_pb2.ErrorInfo(
        reason=exc.reason,
        domain=f"{service}.chatseek",
        metadata={key: _clip(value, limit) for key, value in exc.metadata.items()},
    )
    if exc.candidates:
        candidates = exc.candidates[:MAX_STATUS_CANDIDATES]
        info.metadata["candidates"] = "\n".join(_clip(c, limit) for c in candidates)
    packed: list[any_pb2.Any] = []
    holder = any_pb2.Any()
    holder.Pack(info)
    packed.append(holder)
    if exc.hint:
        holder = any_pb2.Any()
        holder.Pack(
            error_details_pb2.Help(
                links=[error_details_pb2.Help.Link(description=_clip(exc.hint, limit))]
            )
        )
        packed.append(holder)
    if exc.retry_after_s is not None:
        holder = any_pb2.Any()
        seconds = int(exc.retry_after_s)
        holder.Pack(
            error_details_pb2.RetryInfo(
                retry_delay=duration_pb2.Duration(
                    seconds=seconds, nanos=int((exc.retry_after_s - seconds) * 1e9)
                )
            )
        )
        packed.append(holder)
    return status_pb2.Status(
        code=exc.code.value[0], message=_clip(exc.message, limit), details=packed
    )


def status_for(exc: ChatseekError, service: str) -> status_pb2.Status:
    """The ``google.rpc.Status`` a client receives for ``exc``.

    Texts are clipped (message, hint, metadata values, candidates) as far as it takes for the
    status to fit gRPC's trailing metadata.
    """
    for limit in STATUS_CLIPS:
        status = _status(exc, service, limit)
        if _metadata_bytes(status) <= STATUS_METADATA_BUDGET:
            break
    return status


def _internal_status() -> status_pb2.Status:
    return status_pb2.Status(code=code_pb2.INTERNAL, message="internal error; see the service log")


class _Interceptor(grpc.aio.ServerInterceptor):
    def __init__(self, service: str, max_concurrent: int) -> None:
        self._service = service
        self._max = max_concurrent
        self._active: dict[str, int] = {}

    def _enter(self, method: str) -> None:
        count = self._active.get(method, 0)
        if count >= self._max:
            raise Overloaded(
                f"{method} is at its limit of {self._max} concurrent calls",
                hint="retry after a short pause",
                retry_after_s=OVERLOAD_RETRY_S,
            )
        self._active[method] = count + 1

    def _leave(self, method: str) -> None:
        self._active[method] = max(0, self._active.get(method, 1) - 1)

    async def _fail(
        self,
        context: grpc.aio.ServicerContext[Any, Any],
        method: str,
        started: float,
        exc: Exception,
    ) -> None:
        ms = (time.perf_counter() - started) * 1000
        unwritable = None if isinstance(exc, ChatseekError) else storage_error(exc)
        if unwritable is not None:
            log.warning("rpc %s: %s", method, unwritable.message)
            exc = unwritable
        if isinstance(exc, ChatseekError):
            log.info("rpc %s %s %s %.1fms", method, exc.code.name, exc.reason, ms)
            await context.abort_with_status(rpc_status.to_status(status_for(exc, self._service)))
        if isinstance(exc, NotImplementedError):
            log.info("rpc %s UNIMPLEMENTED %.1fms", method, ms)
            await context.abort_with_status(
                rpc_status.to_status(
                    status_pb2.Status(
                        code=code_pb2.UNIMPLEMENTED, message=f"{method} is not implemented"
                    )
                )
            )
        log.error("rpc %s INTERNAL %.1fms", method, ms, exc_info=exc)
        await context.abort_with_status(rpc_status.to_status(_internal_status()))

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        if method.startswith(("/grpc.health", "/grpc.reflection")):
            return handler
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                self._wrap_unary(method, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                self._wrap_stream(method, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(
                self._wrap_unary(method, handler.stream_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream:
            return grpc.stream_stream_rpc_method_handler(
                self._wrap_stream(method, handler.stream_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _wrap_unary(self, method: str, inner: Any) -> Any:
        async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            started = time.perf_counter()
            token = deadline.enter(context.time_remaining())
            try:
                self._enter(method)
                try:
                    response = await inner(request, context)
                finally:
                    self._leave(method)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if _is_abort(exc):
                    raise
                await self._fail(context, method, started, exc)
                raise
            finally:
                deadline.leave(token)
            log.info("rpc %s OK %.1fms", method, (time.perf_counter() - started) * 1000)
            return response

        return call

    def _wrap_stream(self, method: str, inner: Any) -> Any:
        async def call(
            request: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            started = time.perf_counter()
            token = deadline.enter(context.time_remaining())
            try:
                self._enter(method)
                try:
                    async for item in inner(request, context):
                        yield item
                finally:
                    self._leave(method)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if _is_abort(exc):
                    raise
                await self._fail(context, method, started, exc)
                raise
            finally:
                deadline.leave(token)
            log.info("rpc %s OK %.1fms", method, (time.perf_counter() - started) * 1000)

        return call


def _is_abort(exc: BaseException) -> bool:
    return type(exc).__name__ == "AbortError"


@dataclass
class ServerHandle:
    """A bound server, its port and its health servicer."""

    server: grpc.aio.Server
    port: int
    health: health.HealthServicer
    service_names: tuple[str, ...]

    def set_serving(self, serving: bool = True) -> None:
        """Flip every registered service (and the overall "" entry) to SERVING or NOT_SERVING."""
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ("", *self.service_names):
            self.health.set(name, status)


def build_server(
    *,
    service: str,
    listen: str,
    register: Callable[[grpc.aio.Server], Iterable[str]],
    max_concurrent_per_method: int = DEFAULT_MAX_CONCURRENT_PER_METHOD,
) -> ServerHandle:
    """Create and bind a server; ``register`` adds servicers and returns their full names.

    Raises:
        RuntimeError: the listen address could not be bound.
    """
    server = grpc.aio.server(
        interceptors=[_Interceptor(service, max_concurrent_per_method)], options=SERVER_OPTIONS
    )
    names = tuple(register(server))
    health_servicer = health.HealthServicer(experimental_non_blocking=True)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (
            *names,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        ),
        server,
    )
    port = server.add_insecure_port(listen)
    if port == 0:
        raise RuntimeError(f"cannot bind {listen}")
    handle = ServerHandle(server=server, port=port, health=health_servicer, service_names=names)
    handle.set_serving(False)
    return handle


async def serve_forever(
    handle: ServerHandle,
    *,
    on_stop: Callable[[], Awaitable[None]] | None = None,
    background: Iterable[Callable[[], Coroutine[Any, Any, None]]] = (),
) -> bool:
    """Serve until SIGTERM or SIGINT, then stop (see ``shut_down``); returns its answer."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    tasks: list[asyncio.Task[None]] = [asyncio.create_task(job()) for job in background]
    await stop.wait()
    log.info("stopping")
    return await shut_down(handle, tasks, on_stop=on_stop, grace_s=SHUTDOWN_GRACE_S)


async def shut_down(
    handle: ServerHandle,
    tasks: Iterable[asyncio.Task[None]],
    *,
    on_stop: Callable[[], Awaitable[None]] | None,
    grace_s: float | None,
    quiesce_s: float = QUIESCE_TIMEOUT_S,
) -> bool:
    """Stop in the order that keeps every SQLite handle valid while a thread may use it.

    NOT_SERVING; the server stops taking calls and lets running ones finish (``grace_s``);
    background tasks are cancelled; then every blocking call already in a thread is waited for
    (``aio.quiesce``) and only then ``on_stop`` closes connections. When threads are still
    busy after ``quiesce_s`` (a long import or re-cut), ``on_stop`` is skipped and False is
    returned: the caller ends the process without waiting for them, which is as safe as a
    kill (SQLite rolls back what was not committed; every operation resumes on re-run).
    """
    handle.set_serving(False)
    await handle.server.stop(grace_s)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    if not await quiesce(quiesce_s):
        log.warning(
            "%d blocking call(s) still running after %.1f s; leaving connections open",
            in_flight(),
            quiesce_s,
        )
        return False
    if on_stop is not None:
        await on_stop()
    return True
