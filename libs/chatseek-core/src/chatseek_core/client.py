"""How one chatseek process calls another: channels, deadlines, retries and error decoding.

Every call has a deadline (its own timeout capped by the caller's, see ``deadline``). Only
idempotent reads retry, and only on an UNAVAILABLE that no server sent (the peer could not be
reached: down or restarting). An UNAVAILABLE a server answered with its own reason (no reranker
configured, a model that failed to load) is its answer and is not asked again. A failed call is
decoded from its ``google.rpc.Status``/``ErrorInfo`` back into the ``ChatseekError`` subclass the
server raised.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import TypeVar

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from chatseek_core import deadline
from chatseek_core.errors import (
    ChatseekError,
    DeadlineExceeded,
    Unavailable,
    error_class_for,
)

__all__ = [
    "CHANNEL_OPTIONS",
    "DEFAULT_TIMEOUT_S",
    "FLOW_CONTROL_OPTIONS",
    "RECEIVE_WINDOW_BYTES",
    "aio_channel",
    "call",
    "decode_error",
    "retryable",
    "stream",
    "sync_call",
    "sync_channel",
]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0
RETRIES = 2
RETRY_BACKOFF_S = 0.2
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# gRPC's reconnect backoff grows to 120 s while a peer is down, and calls fail fast until the next
# attempt: a restarted peer would stay "unreachable" for minutes. Keep it short (cheap on loopback).
INITIAL_RECONNECT_BACKOFF_MS = 100
MAX_RECONNECT_BACKOFF_MS = 500
RECEIVE_WINDOW_BYTES = 4 * 1024 * 1024
"""What a stream may receive ahead of the process reading it (HTTP/2 flow control)."""
# gRPC's default grows a connection's window with its bandwidth-delay estimate, which a busy
# loopback inflates: a reader that fell behind then held a 1M-message upload in memory by the
# hundred MiB (bench/PROFILES.md, "An upload held to its window"). Servers announce the same.
FLOW_CONTROL_OPTIONS = [
    ("grpc.http2.bdp_probe", 0),
    ("grpc.http2.lookahead_bytes", RECEIVE_WINDOW_BYTES),
]
CHANNEL_OPTIONS = [
    *FLOW_CONTROL_OPTIONS,
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.enable_http_proxy", 0),
    ("grpc.initial_reconnect_backoff_ms", INITIAL_RECONNECT_BACKOFF_MS),
    ("grpc.max_reconnect_backoff_ms", MAX_RECONNECT_BACKOFF_MS),
]

Req = TypeVar("Req")
Resp = TypeVar("Resp")


def aio_channel(addr: str) -> grpc.aio.Channel:
    """An asyncio channel to ``addr`` (host:port) with the house options."""
    return grpc.aio.insecure_channel(addr, options=CHANNEL_OPTIONS)


def sync_channel(addr: str) -> grpc.Channel:
    """A blocking channel to ``addr`` (the CLI's kind)."""
    return grpc.insecure_channel(addr, options=CHANNEL_OPTIONS)


def decode_error(err: grpc.RpcError, peer: str = "") -> ChatseekError:
    """Turn a failed call back into the ``ChatseekError`` the server raised.

    Calls without an ``ErrorInfo`` (a dead peer, a deadline) become the base class of their code.
    """
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    status = None
    try:
        status = rpc_status.from_call(err)  # type: ignore[arg-type]
    except (ValueError, AttributeError, TypeError):
        status = None
    reason = ""
    metadata: dict[str, str] = {}
    hint = ""
    retry_after: float | None = None
    message = err.details() if hasattr(err, "details") else str(err)
    if status is not None:
        message = status.message
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                reason = info.reason
                metadata = dict(info.metadata)
            elif detail.Is(error_details_pb2.Help.DESCRIPTOR):
                help_ = error_details_pb2.Help()
                detail.Unpack(help_)
                hint = "; ".join(link.description for link in help_.links)
            elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                retry = error_details_pb2.RetryInfo()
                detail.Unpack(retry)
                retry_after = retry.retry_delay.seconds + retry.retry_delay.nanos / 1e9
    candidates = metadata.pop("candidates", "").split("\n") if "candidates" in metadata else []
    if not reason:
        if code == grpc.StatusCode.UNAVAILABLE:
            return Unavailable(
                f"{peer or 'a chatseek service'} is unreachable: {message}",
                hint="start the stack with `chatseek stack up` or check `chatseek stack status`",
            )
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return DeadlineExceeded(
                f"{peer or 'a chatseek service'} did not answer in time",
                hint="retry, or raise the timeout",
            )
    cls = error_class_for(reason, code)
    return cls(
        message or code.name,
        hint=hint,
        metadata=metadata,
        candidates=candidates,
        retry_after_s=retry_after,
    )


def retryable(err: grpc.RpcError) -> bool:
    """Whether ``err`` is an UNAVAILABLE that no server sent: the peer was not reached.

    A server's own UNAVAILABLE carries an ``ErrorInfo``; asking again a few hundred milliseconds
    later gets the same answer (and spent 0.6 s per hybrid search on "no reranker").
    """
    code = err.code() if hasattr(err, "code") else None
    if code != grpc.StatusCode.UNAVAILABLE:
        return False
    try:
        status = rpc_status.from_call(err)  # type: ignore[arg-type]
    except (ValueError, AttributeError, TypeError):
        return True
    if status is None:
        return True
    return not any(d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR) for d in status.details)


async def call(
    method: grpc.aio.UnaryUnaryMultiCallable[Req, Resp],
    request: Req,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    idempotent: bool = False,
    peer: str = "",
) -> Resp:
    """Invoke a unary asyncio stub ``method`` with a deadline; decode failures.

    Raises:
        ChatseekError: the decoded server error (or Unavailable / DeadlineExceeded).
    """
    attempts = RETRIES + 1 if idempotent else 1
    for attempt in range(attempts):
        try:
            return await method(request, timeout=deadline.timeout_for(timeout))
        except grpc.aio.AioRpcError as err:
            decoded = decode_error(err, peer)
            retry = (
                idempotent
                and retryable(err)
                and attempt + 1 < attempts
                and (deadline.remaining() or 1.0) > RETRY_BACKOFF_S
            )
            if not retry:
                raise decoded from None
            await asyncio.sleep(RETRY_BACKOFF_S * (attempt + 1))
    raise AssertionError("unreachable")


async def stream(
    method: grpc.aio.UnaryStreamMultiCallable[Req, Resp],
    request: Req,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    peer: str = "",
) -> AsyncIterator[Resp]:
    """Iterate a server-streaming asyncio stub ``method``; decode failures."""
    try:
        async for item in method(request, timeout=deadline.timeout_for(timeout)):
            yield item
    except grpc.aio.AioRpcError as err:
        raise decode_error(err, peer) from None


def sync_call(
    method: grpc.UnaryUnaryMultiCallable[Req, Resp],
    request: Req,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    idempotent: bool = False,
    peer: str = "",
) -> Resp:
    """The blocking twin of ``call`` for the CLI."""
    attempts = RETRIES + 1 if idempotent else 1
    for attempt in range(attempts):
        try:
            return method(request, timeout=timeout)
        except grpc.RpcError as err:
            decoded = decode_error(err, peer)
            if not (idempotent and retryable(err) and attempt + 1 < attempts):
                raise decoded from None
            time.sleep(RETRY_BACKOFF_S * (attempt + 1))
    raise AssertionError("unreachable")
