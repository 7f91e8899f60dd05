"""Builds the unitize gRPC server over an opened, migrated ``unitize.db``.

Besides the RPCs it runs one background job: the feed loop that applies the ingest feed to the
units, then re-cuts chats left on an older recipe one at a time, and nudges the consumers of
its own feed (lexical, vector) after every pass that changed something.
"""

from __future__ import annotations

import grpc

from chatseek.lexical.v1 import lexical_service_pb2, lexical_service_pb2_grpc
from chatseek.unitize.v1 import unitize_service_pb2_grpc
from chatseek.vector.v1 import vector_service_pb2, vector_service_pb2_grpc
from chatseek_core import db
from chatseek_core.aio import to_thread
from chatseek_core.consumer import FeedLoop, Nudger
from chatseek_core.runner import Running
from chatseek_core.server import build_server
from chatseek_core.settings import Settings
from chatseek_unitize.builds import discard_unfinished
from chatseek_unitize.deps import Deps
from chatseek_unitize.schema import MIGRATIONS, OWNER
from chatseek_unitize.service import UnitizeServicer
from chatseek_unitize.units import DEFAULT_BATCH, apply_ingest_feed, recut_next_pending

__all__ = ["create_server", "open_deps", "start", "units_step"]


def open_deps(settings: Settings) -> Deps:
    """Open and migrate ``unitize.db``, drop builds a crash left unfinished, prepare nudges."""
    pool = db.ThreadConnections(
        settings.db_path(OWNER),
        attach={"ingest": settings.db_path("ingest")},
    )
    conn = pool.get()
    db.migrate(conn, OWNER, MIGRATIONS)
    discard_unfinished(conn)
    nudger = Nudger(
        [
            (
                settings.addr("lexical"),
                lexical_service_pb2_grpc.LexicalServiceStub,
                lexical_service_pb2.NotifyRequest,
            ),
            (
                settings.addr("vector"),
                vector_service_pb2_grpc.VectorServiceStub,
                vector_service_pb2.NotifyRequest,
            ),
        ]
    )
    return Deps(settings=settings, pool=pool, nudger=nudger)


def units_step(deps: Deps) -> int:
    """One pass of the feed loop: a batch of ingest events, else one chat's recipe re-cut.

    Returns:
        Events consumed plus chats re-cut (0: nothing to do, or ingest.db does not exist yet).
    """
    with deps.stepping:
        if not deps.pool.attached("ingest"):
            return 0
        conn = deps.pool.get()
        done = apply_ingest_feed(conn, batch=DEFAULT_BATCH)
        if done:
            return done
        return recut_next_pending(conn)


def create_server(settings: Settings, deps: Deps) -> Running:
    """Bind the server on ``settings.listen`` and prepare the feed loop; the caller starts it."""
    deps.loop = FeedLoop(
        "units",
        lambda: units_step(deps),
        poll_interval_s=settings.poll_interval_s,
        after_work=deps.nudger.nudge,
    )
    servicer = UnitizeServicer(deps)

    def register(server: grpc.aio.Server) -> list[str]:
        unitize_service_pb2_grpc.add_UnitizeServiceServicer_to_server(servicer, server)
        return ["chatseek.unitize.v1.UnitizeService"]

    handle = build_server(service=OWNER, listen=settings.listen, register=register)

    def close_when_idle() -> None:
        # A cancelled loop leaves its step running in a worker thread; closing the connection
        # under it would crash the interpreter, so wait for that step to end.
        with deps.stepping:
            deps.pool.close()

    async def close() -> None:
        await to_thread(close_when_idle)

    return Running(handle=handle, background=[deps.loop.run], on_stop=close)


async def start(settings: Settings) -> Running:
    """Open the database and bind the server (used by ``python -m chatseek_unitize``)."""
    return create_server(settings, open_deps(settings))
