"""Builds the fusion gRPC server: read-only connections to every index, stubs to embed/vector."""

from __future__ import annotations

from dataclasses import dataclass

from chatseek.fusion.v1 import fusion_service_pb2_grpc
from chatseek_core import db
from chatseek_core.runner import Running
from chatseek_core.server import build_server
from chatseek_core.settings import Settings

from chatseek_fusion.service import FusionServicer

__all__ = ["Deps", "create_server", "open_deps", "start"]

OWNER = "fusion"
READ_FILES = ("ingest", "unitize", "lexical")


@dataclass
class Deps:
    """What the fusion servicer needs: read-only views of the stores."""

    settings: Settings
    pool: db.ThreadConnections


def open_deps(settings: Settings) -> Deps:
    """A scratch in-memory main database with every store attached read-only."""
    pool = db.ThreadConnections(
        ":memory:", attach={name: settings.db_path(name) for name in READ_FILES}
    )
    return Deps(settings=settings, pool=pool)


def create_server(settings: Settings, deps: Deps) -> Running:
    """Bind the server on ``settings.listen``; the caller starts it."""
    servicer = FusionServicer(deps)

    def register(server: object) -> list[str]:
        fusion_service_pb2_grpc.add_FusionServiceServicer_to_server(servicer, server)
        return ["chatseek.fusion.v1.FusionService"]

    handle = build_server(service=OWNER, listen=settings.listen, register=register)

    async def close() -> None:
        deps.pool.close()

    return Running(handle=handle, on_stop=close)


async def start(settings: Settings) -> Running:
    """Bind the server (used by ``python -m chatseek_fusion``)."""
    return create_server(settings, open_deps(settings))
