"""Builds the ingest gRPC server over an opened, migrated ``ingest.db``."""

from __future__ import annotations

import grpc

from chatseek.ingest.v1 import ingest_service_pb2_grpc
from chatseek.lexical.v1 import lexical_service_pb2, lexical_service_pb2_grpc
from chatseek.unitize.v1 import unitize_service_pb2, unitize_service_pb2_grpc
from chatseek_core import db
from chatseek_core.aio import to_thread
from chatseek_core.consumer import Nudger
from chatseek_core.runner import Running
from chatseek_core.server import build_server
from chatseek_core.settings import Settings
from chatseek_ingest.deps import Deps
from chatseek_ingest.runtime import TelegramFactory
from chatseek_ingest.schema import MIGRATIONS, OWNER
from chatseek_ingest.service import IngestServicer
from chatseek_ingest.telegram import open_client
from chatseek_ingest.upload import discard_stale_work

__all__ = ["create_server", "open_deps", "start"]


def open_deps(settings: Settings, *, telegram_factory: TelegramFactory | None = None) -> Deps:
    """Open and migrate ``ingest.db``, drop work folders a crash left, prepare nudges.

    Args:
        telegram_factory: replaces the real Telethon client (tests pass a fake here).
    """
    pool = db.ThreadConnections(settings.db_path(OWNER))
    db.migrate(pool.get(), OWNER, MIGRATIONS)
    discard_stale_work(settings.data_dir)
    nudger = Nudger(
        [
            (
                settings.addr("unitize"),
                unitize_service_pb2_grpc.UnitizeServiceStub,
                unitize_service_pb2.NotifyRequest,
            ),
            (
                settings.addr("lexical"),
                lexical_service_pb2_grpc.LexicalServiceStub,
                lexical_service_pb2.NotifyRequest,
            ),
        ]
    )
    return Deps(
        settings=settings,
        pool=pool,
        nudger=nudger,
        telegram_factory=telegram_factory or open_client,
    )


def create_server(settings: Settings, deps: Deps) -> Running:
    """Bind the server on ``settings.listen``; the caller starts it."""
    servicer = IngestServicer(deps)

    def register(server: grpc.aio.Server) -> list[str]:
        ingest_service_pb2_grpc.add_IngestServiceServicer_to_server(servicer, server)
        return ["chatseek.ingest.v1.IngestService"]

    handle = build_server(service=OWNER, listen=settings.listen, register=register)

    async def close() -> None:
        await to_thread(deps.pool.close)  # checkpoints the WAL: blocking

    return Running(handle=handle, on_stop=close)


async def start(settings: Settings) -> Running:
    """Open the database and bind the server (used by ``python -m chatseek_ingest``)."""
    return create_server(settings, open_deps(settings))
