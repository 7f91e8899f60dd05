"""An operation the gateway cannot repeat waits for a peer that has just come back, instead of
failing while the gateway's channel to it is still in its reconnect backoff."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from chatseek.gateway.v1 import archive_service_pb2_grpc
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek_core.client import decode_error
from chatseek_gateway.deps import Deps
from chatseek_gateway.peers import connect_peers
from chatseek_gateway.server import create_server as gateway_server
from chatseek_ingest.server import create_server as ingest_server
from chatseek_ingest.server import open_deps as ingest_deps
from chatseek_testing.services import serving, temp_settings
from tests.stack_helpers import free_ports


async def _extract(stub: archive_service_pb2_grpc.ArchiveServiceStub) -> list[pb.ExtractResponse]:
    return [event async for event in stub.Extract(pb.ExtractRequest(budget_s=5), timeout=20)]


async def test_an_extract_started_as_ingest_comes_back_waits_for_it(tmp_path: Path) -> None:
    [port] = free_ports(1)
    ingest_addr = f"127.0.0.1:{port}"
    settings = temp_settings(tmp_path, "gateway", env={"CHATSEEK_INGEST_ADDR": ingest_addr})
    running = gateway_server(settings, Deps(settings=settings, peers=connect_peers(settings)))
    async with serving(running) as addr, grpc.aio.insecure_channel(addr) as channel:
        stub = archive_service_pb2_grpc.ArchiveServiceStub(channel)
        # Ingest is down: after its wait the gateway says so. Its channel to ingest has failed
        # to connect for 2 s by then, so it backs off for its longest step (500 ms).
        with pytest.raises(grpc.aio.AioRpcError) as down:
            await _extract(stub)
        assert down.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "ingest is unreachable" in decode_error(down.value).message

        ingest_settings = temp_settings(tmp_path, "ingest", env={"CHATSEEK_LISTEN": ingest_addr})
        ingest = ingest_server(ingest_settings, ingest_deps(ingest_settings))
        async with serving(ingest):
            events = await _extract(stub)  # at once: the channel is still backing off
    assert events[-1].event.WhichOneof("event") == "extract"
