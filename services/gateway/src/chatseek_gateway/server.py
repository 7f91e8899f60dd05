"""Builds the gateway gRPC server (the CLI's front door)."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from chatseek.gateway.v1 import gateway_service_pb2_grpc
from chatseek_core.runner import Running
from chatseek_core.server import build_server
from chatseek_core.settings import Settings
from chatseek_gateway.mcp.http import http_jobs
from chatseek_gateway.peers import Peers, connect_peers
from chatseek_gateway.service import GatewayServicer

__all__ = ["Deps", "create_server", "start"]

OWNER = "gateway"


@dataclass
class Deps:
    """What the gateway servicer needs."""

    settings: Settings
    peers: Peers


def create_server(settings: Settings, deps: Deps) -> Running:
    """Bind the server on ``settings.listen``; the caller starts it."""
    servicer = GatewayServicer(deps)

    def register(server: grpc.aio.Server) -> list[str]:
        gateway_service_pb2_grpc.add_GatewayServiceServicer_to_server(servicer, server)
        return ["chatseek.gateway.v1.GatewayService"]

    handle = build_server(service=OWNER, listen=settings.listen, register=register)
    return Running(handle=handle, on_stop=deps.peers.close)


async def start(settings: Settings) -> Running:
    """Connect to the peers, bind the server and, when configured, the MCP HTTP endpoint."""
    running = create_server(settings, Deps(settings=settings, peers=connect_peers(settings)))
    running.background.extend(http_jobs(settings, running.handle.port))
    return running
