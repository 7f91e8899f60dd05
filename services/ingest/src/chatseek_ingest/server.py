"""Builds the ingest gRPC server over an opened, migrated ``ingest.db``.

The Telegram client is built by ``Deps.telegram_factory`` (the real Telethon client by
default; tests inject ``FakeTelegram`` there, at the Telethon boundary, and nowhere else).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
from chatseek_ingest.auth import PendingLogins
from chatseek_ingest.schema import MIGRATIONS, OWNER
from chatseek_ingest.service import IngestServicer
from chatseek_ingest.telegram import open_client
from chatseek_ingest.telegram.runtime import TelegramFactory
from chatseek_ingest.upload import discard_stale_work

__all__ = ["Deps", "create_server", "open_deps", "start"]


@dataclass
class Deps:
    """What the ingest servicer needs.

    Attributes:
        telegram_factory: builds an unconnected Telegram client from (session string, api id,
            api hash); the session is read from the account's session file by the service.
        logins: logins waiting for their code (in memory only).
    """

    settings: Settings
    pool: db.ThreadConnections
    nudger: Nudger
    telegram_factory: TelegramFactory = open_client
    logins: PendingLogins = field(default_factory=PendingLogins)


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
