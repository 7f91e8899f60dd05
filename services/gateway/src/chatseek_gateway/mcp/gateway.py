"""The MCP server's line to the gateway: one asyncio gRPC channel, opened on first use.

A ``grpc.aio`` channel belongs to the event loop it was created in, so the channel is opened
lazily inside the loop that serves the tools. Before the first call an optional ``ensure`` hook
runs in a worker thread: the stdio command uses it to start the local stack when no gateway
answers. A failed ``ensure`` is retried on the next call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc

from chatseek_core.aio import to_thread
from chatseek_core.client import aio_channel

__all__ = ["GatewayConnection"]


class GatewayConnection:
    """A lazily opened ``GatewayServiceStub`` over an asyncio channel.

    Args:
        addr: the gateway's ``host:port``.
        ensure: blocking hook run once before the first call (e.g. start the local stack);
            it raises a ``ChatseekError`` when the gateway cannot be reached.
    """

    def __init__(self, addr: str, *, ensure: Callable[[], None] | None = None) -> None:
        self.addr = addr
        self._ensure = ensure
        self._channel: grpc.aio.Channel | None = None
        self._stub: Any = None
        self._lock: asyncio.Lock | None = None

    async def stub(self) -> Any:
        """The gateway stub, opening the channel (after ``ensure``) on first use.

        Raises:
            ChatseekError: whatever ``ensure`` raised.
        """
        if self._stub is not None:
            return self._stub
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._stub is None:
                if self._ensure is not None:
                    await to_thread(self._ensure)
                from chatseek.gateway.v1 import gateway_service_pb2_grpc

                self._channel = aio_channel(self.addr)
                self._stub = gateway_service_pb2_grpc.GatewayServiceStub(self._channel)
        return self._stub

    async def close(self) -> None:
        """Close the channel (a later call opens a new one)."""
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            await channel.close()
