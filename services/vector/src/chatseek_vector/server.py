"""Builds the vector gRPC server: vector.db, the embed stub and the background embedding loop."""

from __future__ import annotations

import grpc

from chatseek.embed.v1 import embed_service_pb2_grpc
from chatseek.vector.v1 import vector_service_pb2_grpc
from chatseek_core import db
from chatseek_core.aio import to_thread
from chatseek_core.client import aio_channel
from chatseek_core.runner import Running
from chatseek_core.server import build_server
from chatseek_core.settings import Settings
from chatseek_vector.deps import Deps
from chatseek_vector.schema import MIGRATIONS, OWNER
from chatseek_vector.service import VectorServicer
from chatseek_vector.worker import Worker

__all__ = ["create_server", "open_deps", "start"]


def open_deps(settings: Settings) -> Deps:
    """Open and migrate ``vector.db`` (with sqlite-vec), attach unitize.db, reach embed."""
    attach = {"unitize": settings.db_path("unitize")}
    pool = db.ThreadConnections(settings.db_path(OWNER), vec=True, attach=attach)
    db.migrate(pool.get(), OWNER, MIGRATIONS)
    reads = db.ThreadConnections(
        settings.db_path(OWNER),
        vec=True,
        readonly=True,
        attach=attach,
        cache_kib=db.QUERY_CACHE_SIZE_KIB,
    )
    channel = aio_channel(settings.addr("embed"))
    embed = embed_service_pb2_grpc.EmbedServiceStub(channel)
    worker = Worker(pool, embed, settings.poll_interval_s)
    return Deps(settings=settings, pool=pool, reads=reads, worker=worker, channel=channel)


def create_server(settings: Settings, deps: Deps) -> Running:
    """Bind the server on ``settings.listen``; the caller starts it."""
    servicer = VectorServicer(deps)

    def register(server: grpc.aio.Server) -> list[str]:
        vector_service_pb2_grpc.add_VectorServiceServicer_to_server(servicer, server)
        return ["chatseek.vector.v1.VectorService"]

    handle = build_server(service=OWNER, listen=settings.listen, register=register)

    async def close() -> None:
        await to_thread(deps.reads.close)
        await to_thread(deps.pool.close)  # checkpoints the WAL: blocking
        await deps.channel.close()

    return Running(handle=handle, background=[deps.worker.run], on_stop=close)


async def start(settings: Settings) -> Running:
    """Open the database and bind the server (used by ``python -m chatseek_vector``)."""
    return create_server(settings, open_deps(settings))
