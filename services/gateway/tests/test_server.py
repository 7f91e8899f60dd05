"""The gateway starts alone on port 0 over a temp data dir and reports each service SERVING."""

from __future__ import annotations

from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from chatseek.gateway.v1 import (
    archive_service_pb2,
    conversations_service_pb2,
    ops_service_pb2,
    search_service_pb2,
)
from chatseek_gateway.deps import Deps
from chatseek_gateway.peers import connect_peers
from chatseek_gateway.server import SERVICE_NAMES, create_server
from chatseek_gateway.stubs import GatewayStubs
from chatseek_testing.services import serving, temp_settings

# The RPCs of the one GatewayService these four services replaced.
GATEWAY_RPCS = 30


async def test_the_service_serves_health_after_start(tmp_path: Path) -> None:
    settings = temp_settings(tmp_path, "gateway")
    running = create_server(settings, Deps(settings=settings, peers=connect_peers(settings)))
    async with serving(running) as addr:
        async with grpc.aio.insecure_channel(addr) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            for name in SERVICE_NAMES:
                named = await stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
                assert named.status == health_pb2.HealthCheckResponse.SERVING, name


def test_the_server_names_every_gateway_service_and_the_stubs_reach_every_rpc() -> None:
    modules = (
        search_service_pb2,
        conversations_service_pb2,
        archive_service_pb2,
        ops_service_pb2,
    )
    services = [s for m in modules for s in m.DESCRIPTOR.services_by_name.values()]
    assert [s.full_name for s in services] == list(SERVICE_NAMES)
    stubs = GatewayStubs.over(grpc.insecure_channel("127.0.0.1:1"))
    try:
        for service, stub in zip(
            services, (stubs.search, stubs.conversations, stubs.archive, stubs.ops), strict=True
        ):
            assert all(hasattr(stub, method.name) for method in service.methods), service.name
        rpcs = [method.name for service in services for method in service.methods]
        assert len(rpcs) == len(set(rpcs)) == GATEWAY_RPCS
    finally:
        stubs.channel.close()
