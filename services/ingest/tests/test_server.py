"""The ingest service starts alone on port 0 over a temp data dir and reports SERVING."""

from __future__ import annotations

from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from chatseek_ingest.server import create_server, open_deps
from chatseek_testing.services import serving, temp_settings


async def test_the_service_serves_health_after_start_and_creates_its_database(
    tmp_path: Path,
) -> None:
    settings = temp_settings(tmp_path, "ingest")
    running = create_server(settings, open_deps(settings))
    async with serving(running) as addr:
        async with grpc.aio.insecure_channel(addr) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            named = await stub.Check(
                health_pb2.HealthCheckRequest(service="chatseek.ingest.v1.IngestService"), timeout=5
            )
            assert named.status == health_pb2.HealthCheckResponse.SERVING
    assert (tmp_path / "data" / "ingest.db").exists()
