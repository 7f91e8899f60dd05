"""The vector servicer: proto in, typed core call, proto out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc
from chatseek.vector.v1 import vector_service_pb2 as pb
from chatseek.vector.v1 import vector_service_pb2_grpc
from chatseek_core import db
from chatseek_core.aio import to_thread
from chatseek_core.status import service_status

from chatseek_vector.schema import OWNER

if TYPE_CHECKING:
    from chatseek_vector.server import Deps

__all__ = ["VectorServicer"]

Ctx = grpc.aio.ServicerContext[Any, Any]


class VectorServicer(vector_service_pb2_grpc.VectorServiceServicer):
    """Thin adapter over the vector core functions."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    async def GetStatus(self, request: pb.GetStatusRequest, context: Ctx) -> pb.GetStatusResponse:
        def read() -> pb.GetStatusResponse:
            conn = self._deps.pool.get()
            return pb.GetStatusResponse(
                status=service_status(OWNER, schema_version=db.schema_version(conn, OWNER))
            )

        return await to_thread(read)
