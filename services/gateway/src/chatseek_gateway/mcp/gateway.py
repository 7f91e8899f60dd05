"""The MCP server's line to the gateway: one asyncio gRPC channel, opened on first use.

A ``grpc.aio`` channel belongs to the event loop it was created in, so the channel is opened
lazily inside the loop that serves the tools. Before the first call an optional ``ensure`` hook
runs in a worker thread: the stdio command uses it to start the local stack when no gateway
answers. A failed ``ensure`` is retried on the next call.

``account`` is the account the tools act for where a call names none. It is empty in the gateway
process, whose own active account answers such calls; the stdio command sets it to its own
``CHATSEEK_ACCOUNT``, as the CLI does, since the stack may have been started for another.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc

from chatseek_core.aio import to_thread
from chatseek_core.client import aio_channel
from chatseek_gateway.stubs import AsyncGatewayStubs

__all__ = ["GatewayConnection"]


class GatewayConnection:
    """The gateway's stubs (``AsyncGatewayStubs``) over an asyncio channel opened lazily.

    Args:
        addr: the gateway's ``host:port``.
        ensure: blocking hook run once before the first call (e.g. start the local stack);
            it raises a ``ChatseekError`` when the gateway cannot be reached.
        account: the account a call acts for when it names none ("": the gateway's active one).
    """

    def __init__(
        self, addr: str, *, ensure: Callable[[], None] | None = None, account: str = ""
    ) -> None:
        self.addr = addr
        self.account = account
        self._ensure = ensure
        self._channel: grpc.aio.Channel | None = None
        self._stubs: AsyncGatewayStubs | None = None
        self._lock: asyncio.Lock | None = None

    async def stubs(self) -> AsyncGatewayStubs:
        """The gateway's stubs, opening the channel (after ``ensure``) on first use.

        Raises:
            ChatseekError: whatever ``ensure`` raised.
        """
        if self._stubs is not None:
            return self._stubs
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._stubs is None:
                if self._ensure is not None:
                    await to_thread(self._ensure)
                self._channel = aio_channel(self.addr)
                self._stubs = AsyncGatewayStubs.over(self._channel)
        return self._stubs

    async def close(self) -> None:
        """Close the channel (a later call opens a new one)."""
        channel, self._channel, self._stubs = self._channel, None, None
        if channel is not None:
            await channel.close()
