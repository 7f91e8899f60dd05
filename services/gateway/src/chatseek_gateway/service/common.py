"""What the gateway's servicers share: the context type, the account, chat resolution and
passing a downstream operation's streamed events through.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import TypeVar

import grpc

from chatseek.common.v1 import common_pb2
from chatseek.ingest.v1 import ingest_service_pb2 as ingest_pb
from chatseek_core.client import call, decode_error
from chatseek_gateway.deps import Deps
from chatseek_gateway.shapes import Evented

__all__ = ["RESOLVE_TIMEOUT_S", "Ctx", "account_of", "chat_ids", "forward_events"]

Ctx = grpc.aio.ServicerContext
RESOLVE_TIMEOUT_S = 30.0

Event = TypeVar("Event")


def account_of(deps: Deps, account: str) -> str:
    """The request's account, or the active one."""
    return account or deps.settings.account


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
