"""What the gateway's servicers share: the context type, the account, chat resolution, waiting
for a peer before a call that cannot be repeated, and passing a downstream operation's streamed
events through.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import TypeVar

import grpc
from grpc_health.v1 import health_pb2

from chatseek.common.v1 import common_pb2
from chatseek.ingest.v1 import ingest_service_pb2 as ingest_pb
from chatseek_core.client import call, decode_error
from chatseek_gateway.deps import Deps
from chatseek_gateway.shapes import Evented

__all__ = ["RESOLVE_TIMEOUT_S", "Ctx", "account_of", "chat_ids", "forward_events", "reach"]

Ctx = grpc.aio.ServicerContext
RESOLVE_TIMEOUT_S = 30.0
# Longer than a channel's reconnect backoff (``chatseek_core.client.MAX_RECONNECT_BACKOFF_MS``).
REACH_TIMEOUT_S = 2.0

Event = TypeVar("Event")


def account_of(deps: Deps, account: str) -> str:
    """The request's account, or the active one."""
    return account or deps.settings.account


async def reach(deps: Deps, peer: str) -> None:
    """Wait, up to ``REACH_TIMEOUT_S``, until the gateway's channel to ``peer`` is connected.

    A peer restarted a moment ago serves before this channel, still in its reconnect backoff,
    tries it again; until then a call fails at once as "unreachable". Unary calls that may be
    repeated retry past that; an upload or a long operation is started once, so it waits here
    first. A peer still down after the wait fails the call that follows, as before.
    """
    with contextlib.suppress(grpc.aio.AioRpcError):
        await deps.peers.health[peer].Check(
            health_pb2.HealthCheckRequest(), timeout=REACH_TIMEOUT_S, wait_for_ready=True
        )


async def chat_ids(deps: Deps, account: str, specs: list[str]) -> list[int]:
    """The ids of the chats ``specs`` name in ``account``, in ingest's order; [] for no specs.

    Raises:
        ChatNotFound / AmbiguousName: from ingest.
    """
    if not specs:
        return []
    reply = await call(
        deps.peers.ingest.ListChats,
        ingest_pb.ListChatsRequest(accounts=[account], specs=specs),
        timeout=RESOLVE_TIMEOUT_S,
        idempotent=True,
        peer="ingest",
    )
    return [int(c.chat.chat_id) for c in reply.chats]


async def forward_events(
    stream: AsyncIterable[Evented],
    wrap: Callable[[common_pb2.OperationEvent], Event],
    peer: str,
) -> AsyncIterator[Event]:
    """Pass a downstream operation's streamed ``OperationEvent``s through, decoding a failure.

    Raises:
        ChatseekError: the decoded failure of ``peer``.
    """
    try:
        async for response in stream:
            yield wrap(response.event)
    except grpc.aio.AioRpcError as err:
        raise decode_error(err, peer) from None
