"""Builds the unitize gRPC server over an opened, migrated ``unitize.db``."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from chatseek.unitize.v1 import unitize_service_pb2_grpc
from chatseek_core import db
from chatseek_core.runner import Running
from chatseek_core.server import build_server
from chatseek_core.settings import Settings
from chatseek_unitize.schema import MIGRATIONS, OWNER
from chatseek_unitize.service import UnitizeServicer

__all__ = ["Deps", "create_server", "open_deps", "start"]


@dataclass
class Deps:
    """What the unitize servicer needs."""

    settings: Settings
    pool: db.ThreadConnections


def open_deps(settings: Settings) -> Deps:
    """Open and migrate ``unitize.db``; attach the producers' files read-only."""
    pool = db.ThreadConnections(
        settings.db_path(OWNER),
        attach={"ingest": settings.db_path("ingest")},
    )
    db.migrate(pool.get(), OWNER, MIGRATIONS)
    return Deps(settings=settings, pool=pool)


def create_server(settings: Settings, deps: Deps) -> Running:
    """Bind the server on ``settings.listen``; the caller starts it."""
    servicer = UnitizeServicer(deps)

    def register(server: grpc.aio.Server) -> list[str]:
        unitize_service_pb2_grpc.add_UnitizeServiceServicer_to_server(servicer, server)
        return ["chatseek.unitize.v1.UnitizeService"]

    handle = build_server(service=OWNER, listen=settings.listen, register=register)

    async def close() -> None:
        deps.pool.close()

    return Running(handle=handle, on_stop=close)


async def start(settings: Settings) -> Running:
    """Open the database and bind the server (used by ``python -m chatseek_unitize``)."""
    return create_server(settings, open_deps(settings))
