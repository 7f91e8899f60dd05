"""The gateway's stubs to every downstream service, built once per process."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2_grpc

from chatseek.embed.v1 import embed_service_pb2_grpc
from chatseek.fusion.v1 import fusion_service_pb2_grpc
from chatseek.ingest.v1 import ingest_service_pb2_grpc
from chatseek.lexical.v1 import lexical_service_pb2_grpc
from chatseek.unitize.v1 import unitize_service_pb2_grpc
from chatseek.vector.v1 import vector_service_pb2_grpc
from chatseek_core.client import aio_channel
from chatseek_core.settings import Settings

__all__ = ["PEERS", "Peers", "connect_peers"]

PEERS = ("ingest", "unitize", "lexical", "embed", "vector", "fusion")


@dataclass
class Peers:
    """Asyncio stubs of the downstream services, and their health stubs by service name."""

    ingest: ingest_service_pb2_grpc.IngestServiceAsyncStub
    unitize: unitize_service_pb2_grpc.UnitizeServiceAsyncStub
    lexical: lexical_service_pb2_grpc.LexicalServiceAsyncStub
    embed: embed_service_pb2_grpc.EmbedServiceAsyncStub
    vector: vector_service_pb2_grpc.VectorServiceAsyncStub
    fusion: fusion_service_pb2_grpc.FusionServiceAsyncStub
    health: dict[str, health_pb2_grpc.HealthStub]
    channels: list[grpc.aio.Channel]

    async def close(self) -> None:
        """Close every channel."""
        for channel in self.channels:
            await channel.close()


def connect_peers(settings: Settings) -> Peers:
    """Create channels to every peer (lazily connected by gRPC)."""
    channels = {name: aio_channel(settings.addr(name)) for name in PEERS}
    return Peers(
        ingest=ingest_service_pb2_grpc.IngestServiceStub(channels["ingest"]),
        unitize=unitize_service_pb2_grpc.UnitizeServiceStub(channels["unitize"]),
        lexical=lexical_service_pb2_grpc.LexicalServiceStub(channels["lexical"]),
        embed=embed_service_pb2_grpc.EmbedServiceStub(channels["embed"]),
        vector=vector_service_pb2_grpc.VectorServiceStub(channels["vector"]),
        fusion=fusion_service_pb2_grpc.FusionServiceStub(channels["fusion"]),
        health={name: health_pb2_grpc.HealthStub(ch) for name, ch in channels.items()},
        channels=list(channels.values()),
    )
