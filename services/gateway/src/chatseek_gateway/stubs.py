"""Typed stubs of the gateway's services over one channel, for its two clients.

The CLI holds ``GatewayStubs`` over a blocking channel, the MCP server ``AsyncGatewayStubs``
over an asyncio one; both name each RPC by its stub attribute, never by a string. Imported only
when a command calls the gateway, so ``chatseek --help`` loads no gRPC.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from chatseek.gateway.v1 import (
    archive_service_pb2_grpc,
    conversations_service_pb2_grpc,
    ops_service_pb2_grpc,
    search_service_pb2_grpc,
)

__all__ = ["AsyncGatewayStubs", "GatewayStubs"]


@dataclass(frozen=True)
class GatewayStubs:
    """Blocking stubs of every gateway service over ``channel`` (the CLI's)."""

    channel: grpc.Channel
    search: search_service_pb2_grpc.SearchServiceStub
    conversations: conversations_service_pb2_grpc.ConversationsServiceStub
    archive: archive_service_pb2_grpc.ArchiveServiceStub
    ops: ops_service_pb2_grpc.OpsServiceStub

    @classmethod
    def over(cls, channel: grpc.Channel) -> GatewayStubs:
        """The stubs of every gateway service over ``channel``."""
        return cls(
            channel=channel,
            search=search_service_pb2_grpc.SearchServiceStub(channel),
            conversations=conversations_service_pb2_grpc.ConversationsServiceStub(channel),
            archive=archive_service_pb2_grpc.ArchiveServiceStub(channel),
            ops=ops_service_pb2_grpc.OpsServiceStub(channel),
        )


@dataclass(frozen=True)
class AsyncGatewayStubs:
    """Asyncio stubs of every gateway service (the MCP server's)."""

    search: search_service_pb2_grpc.SearchServiceAsyncStub
    conversations: conversations_service_pb2_grpc.ConversationsServiceAsyncStub
    archive: archive_service_pb2_grpc.ArchiveServiceAsyncStub
    ops: ops_service_pb2_grpc.OpsServiceAsyncStub

    @classmethod
    def over(cls, channel: grpc.aio.Channel) -> AsyncGatewayStubs:
        """The stubs of every gateway service over ``channel``."""
        return cls(
            search=search_service_pb2_grpc.SearchServiceStub(channel),
            conversations=conversations_service_pb2_grpc.ConversationsServiceStub(channel),
            archive=archive_service_pb2_grpc.ArchiveServiceStub(channel),
            ops=ops_service_pb2_grpc.OpsServiceStub(channel),
        )
