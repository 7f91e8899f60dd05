"""Builds the gateway gRPC server (the CLI's front door): four services on one port."""

from __future__ import annotations

import grpc

from chatseek.gateway.v1 import (
    archive_service_pb2_grpc,
    conversations_service_pb2_grpc,
    ops_service_pb2_grpc,
    search_service_pb2_grpc,
)
from chatseek_core.runner import Running
from chatseek_core.server import build_server
from chatseek_core.settings import Settings
from chatseek_gateway.deps import Deps
from chatseek_gateway.mcp.http import http_jobs
from chatseek_gateway.peers import connect_peers
from chatseek_gateway.service import (
    ArchiveServicer,
    ConversationsServicer,
    OpsServicer,
    SearchServicer,
)

__all__ = ["SERVICE_NAMES", "create_server", "start"]

OWNER = "gateway"
# The gateway's services, all on one server and port (health and reflection name each).
SERVICE_NAMES = (
    "chatseek.gateway.v1.SearchService",
    "chatseek.gateway.v1.ConversationsService",
    "chatseek.gateway.v1.ArchiveService",
    "chatseek.gateway.v1.OpsService",
)


def create_server(settings: Settings, deps: Deps) -> Running:
    """Bind the server on ``settings.listen``; the caller starts it."""

    def register(server: grpc.aio.Server) -> list[str]:
        search_service_pb2_grpc.add_SearchServiceServicer_to_server(SearchServicer(deps), server)
        conversations_service_pb2_grpc.add_ConversationsServiceServicer_to_server(
            ConversationsServicer(deps), server
        )
        archive_service_pb2_grpc.add_ArchiveServiceServicer_to_server(ArchiveServicer(deps), server)
        ops_service_pb2_grpc.add_OpsServiceServicer_to_server(OpsServicer(deps), server)
        return list(SERVICE_NAMES)

    handle = build_server(service=OWNER, listen=settings.listen, register=register)
    return Running(handle=handle, on_stop=deps.peers.close)


async def start(settings: Settings) -> Running:
    """Connect to the peers, bind the server and, when configured, the MCP HTTP endpoint."""
    running = create_server(settings, Deps(settings=settings, peers=connect_peers(settings)))
    running.background.extend(http_jobs(settings, running.handle.port))
    return running
