"""Builds the lexical gRPC server: the word indexes, their feed consumer and the searches."""

from __future__ import annotations

import grpc

from chatseek.lexical.v1 import lexical_service_pb2_grpc
from chatseek_core import db
from chatseek_core.aio import to_thread
from chatseek_core.consumer import FeedLoop
from chatseek_core.runner import Running
from chatseek_core.server import build_server
from chatseek_core.settings import Settings
from chatseek_lexical.deps import PRODUCERS, Deps
from chatseek_lexical.indexer import apply_feeds
from chatseek_lexical.query.split import Splitter
from chatseek_lexical.schema import MIGRATIONS, OWNER
from chatseek_lexical.service import LexicalServicer

__all__ = ["create_server", "open_deps", "start"]


def open_deps(settings: Settings) -> Deps:
    """Open and migrate ``lexical.db``; attach the producers' files read-only."""
    attach = {name: settings.db_path(name) for name in PRODUCERS}
    pool = db.ThreadConnections(settings.db_path(OWNER), attach=attach)
    db.migrate(pool.get(), OWNER, MIGRATIONS)
    reads = db.ThreadConnections(
        settings.db_path(OWNER),
        readonly=True,
        attach=attach,
        cache_kib=db.QUERY_CACHE_SIZE_KIB,
    )

    def step() -> int:
        if not all(pool.attached(name) for name in PRODUCERS):
            return 0
        return apply_feeds(pool.get())

    loop = FeedLoop("lexical", step, poll_interval_s=settings.poll_interval_s)
    splitter = Splitter(settings.db_path(OWNER))
    return Deps(settings=settings, pool=pool, reads=reads, loop=loop, splitter=splitter)


def create_server(settings: Settings, deps: Deps) -> Running:
    """Bind the server on ``settings.listen``; the caller starts it."""
    servicer = LexicalServicer(deps)

    def register(server: grpc.aio.Server) -> list[str]:
        lexical_service_pb2_grpc.add_LexicalServiceServicer_to_server(servicer, server)
        return ["chatseek.lexical.v1.LexicalService"]

    handle = build_server(service=OWNER, listen=settings.listen, register=register)

    async def close() -> None:
        await to_thread(deps.splitter.close)
        await to_thread(deps.reads.close)
        await to_thread(deps.pool.close)  # checkpoints the WAL: blocking

    return Running(handle=handle, background=[deps.loop.run], on_stop=close)


async def start(settings: Settings) -> Running:
    """Open the database and bind the server (used by ``python -m chatseek_lexical``)."""
    return create_server(settings, open_deps(settings))
