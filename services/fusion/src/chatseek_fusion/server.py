"""Builds the fusion gRPC server: read-only connections to every index, stubs to embed/vector."""

from __future__ import annotations

import grpc

from chatseek.fusion.v1 import fusion_service_pb2_grpc
from chatseek.ingest.v1 import ingest_service_pb2_grpc
from chatseek_core import config as config_file
from chatseek_core import db
from chatseek_core.client import aio_channel
from chatseek_core.runner import Running
from chatseek_core.server import build_server
from chatseek_core.settings import Settings
from chatseek_fusion.deps import Deps
from chatseek_fusion.service import FusionServicer
from chatseek_fusion.signals import GrpcSignals

__all__ = ["create_server", "open_deps", "start"]

OWNER = "fusion"
READ_FILES = ("ingest", "unitize", "lexical")


def open_deps(settings: Settings, config: config_file.SearchConfig | None = None) -> Deps:
    """Read-only views of every store, and stubs to the services fusion asks."""
    pool = db.ThreadConnections(
        ":memory:", attach={name: settings.db_path(name) for name in READ_FILES}
    )
    ingest = ingest_service_pb2_grpc.IngestServiceStub(aio_channel(settings.addr("ingest")))
    return Deps(
        settings=settings,
        pool=pool,
        signals=GrpcSignals(settings),
        ingest=ingest,
        config=config or config_file.load(settings.config_path).search,
    )


def create_server(settings: Settings, deps: Deps) -> Running:
    """Bind the server on ``settings.listen``; the caller starts it."""
    servicer = FusionServicer(deps)

    def register(server: grpc.aio.Server) -> list[str]:
        fusion_service_pb2_grpc.add_FusionServiceServicer_to_server(servicer, server)
        return ["chatseek.fusion.v1.FusionService"]

    handle = build_server(service=OWNER, listen=settings.listen, register=register)

    async def close() -> None:
        deps.pool.close()
        await deps.signals.close()

    return Running(handle=handle, on_stop=close)


async def start(settings: Settings) -> Running:
    """Bind the server (used by ``python -m chatseek_fusion``)."""
    return create_server(settings, open_deps(settings))
