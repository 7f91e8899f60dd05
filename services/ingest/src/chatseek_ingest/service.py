"""The ingest servicer: proto in, typed core call, proto out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc
from chatseek.ingest.v1 import ingest_service_pb2 as pb
from chatseek.ingest.v1 import ingest_service_pb2_grpc
from chatseek_core import db, feed
from chatseek_core.aio import to_thread
from chatseek_core.status import service_status

from chatseek_ingest.schema import OWNER

if TYPE_CHECKING:
    from chatseek_ingest.server import Deps

__all__ = ["IngestServicer"]

Ctx = grpc.aio.ServicerContext[Any, Any]


class IngestServicer(ingest_service_pb2_grpc.IngestServiceServicer):
    """Thin adapter over the ingest core functions."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    async def GetStatus(self, request: pb.GetStatusRequest, context: Ctx) -> pb.GetStatusResponse:
        def read() -> pb.GetStatusResponse:
            conn = self._deps.pool.get()
            counts = conn.execute(
                "SELECT (SELECT COUNT(*) FROM chats), (SELECT COUNT(*) FROM messages)"
            ).fetchone()
            return pb.GetStatusResponse(
                status=service_status(
                    OWNER,
                    schema_version=db.schema_version(conn, OWNER),
                    details={
                        "chats": counts[0],
                        "messages": counts[1],
                        "feed_head": feed.head(conn),
                    },
                )
            )

        return await to_thread(read)
