"""Builds the vector gRPC server over an opened, migrated ``vector.db``."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from chatseek.vector.v1 import vector_service_pb2_grpc
from chatseek_core import db
from chatseek_core.runner import Running
from chatseek_core.server import build_server
from chatseek_core.settings import Settings
from chatseek_vector.schema import MIGRATIONS, OWNER
from chatseek_vector.service import VectorServicer

__all__ = ["Deps", "create_server", "open_deps", "start"]


@dataclass
class Deps:
    """What the vector servicer needs."""

    settings: Settings
    pool: db.ThreadConnections


def open_deps(settings: Settings) -> Deps:
    """Open and migrate ``vector.db``; attach the producers' files read-only."""
    pool = db.ThreadConnections(
        settings.db_path(OWNER),
        vec=True,
        attach={"ingest": settings.db_path("ingest"), "unitize": settings.db_path("unitize")},
    )
    db.migrate(pool.get(), OWNER, MIGRATIONS)
    return Deps(settings=settings, pool=pool)


def create_server(settings: Settings, deps: Deps) -> Running:
    """Bind the server on ``settings.listen``; the caller starts it."""
    servicer = VectorServicer(deps)

    def register(server: grpc.aio.Server) -> list[str]:
        vector_service_pb2_grpc.add_VectorServiceServicer_to_server(servicer, server)
        return ["chatseek.vector.v1.VectorService"]

    handle = build_server(service=OWNER, listen=settings.listen, register=register)

    async def close() -> None:
        deps.pool.close()

    return Running(handle=handle, on_stop=close)


async def start(settings: Settings) -> Running:
    """Open the database and bind the server (used by ``python -m chatseek_vector``)."""
    return create_server(settings, open_deps(settings))
