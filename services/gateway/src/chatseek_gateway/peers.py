"""The gateway's stubs to every downstream service, built once per process."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpc_health.v1 import health_pb2_grpc

from chatseek.embed.v1 import embed_service_pb2_grpc
from chatseek.fusion.v1 import fusion_service_pb2_grpc
from chatseek.ingest.v1 import ingest_service_pb2_grpc
from chatseek.lexical.v1 import lexical_service_pb2_grpc
from chatseek.unitize.v1 import unitize_service_pb2_grpc
from chatseek.vector.v1 import vector_service_pb2_grpc
from chatseek_core.client import aio_channel
from chatseek_core.settings import Settings

__all__ = ["Peers", "connect_peers"]


@dataclass
class Peers:
    """Asyncio stubs of the downstream services, and their health stubs by service name."""

    ingest: Any
    unitize: Any
    lexical: Any
    embed: Any
    vector: Any
    fusion: Any
    health: dict[str, Any]
    channels: list[Any]

    async def close(self) -> None:
        """Close every channel."""
        for channel in self.channels:
            await channel.close()


def connect_peers(settings: Settings) -> Peers:
    """Create channels to every peer (lazily connected by gRPC)."""
    factories = {
        "ingest": ingest_service_pb2_grpc.IngestServiceStub,
        "unitize": unitize_service_pb2_grpc.UnitizeServiceStub,
        "lexical": lexical_service_pb2_grpc.LexicalServiceStub,
        "embed": embed_service_pb2_grpc.EmbedServiceStub,
        "vector": vector_service_pb2_grpc.VectorServiceStub,
        "fusion": fusion_service_pb2_grpc.FusionServiceStub,
    }
    stubs: dict[str, Any] = {}
    health: dict[str, Any] = {}
    channels = []
    for name, factory in factories.items():
        channel = aio_channel(settings.addr(name))
        channels.append(channel)
        stubs[name] = factory(channel)
        health[name] = health_pb2_grpc.HealthStub(channel)
    return Peers(health=health, channels=channels, **stubs)
