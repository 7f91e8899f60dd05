"""The vector servicer: proto in, typed core call, proto out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

import grpc
import numpy as np

from chatseek.common.v1 import common_pb2
from chatseek.vector.v1 import vector_service_pb2 as pb
from chatseek.vector.v1 import vector_service_pb2_grpc
from chatseek_core import db, feed
from chatseek_core.aio import progress_stream, to_thread
from chatseek_core.errors import InvalidArgument
from chatseek_core.operations import operation_progress
from chatseek_core.status import service_status
from chatseek_core.wire_json import from_json
from chatseek_vector import index, knn, spaces
from chatseek_vector.deps import Deps
from chatseek_vector.schema import OWNER

if TYPE_CHECKING:
    from chatseek_vector.worker import EmbedPass

__all__ = ["VectorServicer"]

Ctx = grpc.aio.ServicerContext
DEFAULT_K = 40


class VectorServicer(vector_service_pb2_grpc.VectorServiceServicer):
    """Thin adapter over the vector core functions."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    async def Notify(
        self, request: pb.NotifyRequest, context: Ctx[pb.NotifyRequest, pb.NotifyResponse]
    ) -> pb.NotifyResponse:
        self._deps.worker.nudge()
        return pb.NotifyResponse()

    async def IndexUnits(
        self,
        request: pb.IndexUnitsRequest,
        context: Ctx[pb.IndexUnitsRequest, pb.IndexUnitsResponse],
    ) -> AsyncIterator[pb.IndexUnitsResponse]:
        def work(on_progress: Callable[[object], None]) -> Awaitable[EmbedPass]:
            async def progress(done: int, total: int) -> None:
                on_progress((done, total))

            return self._deps.worker.run_pass(
                chat_ids=list(request.chat_ids) or None,
                reembed=request.reembed,
                confirmed=request.confirmed,
                on_progress=progress,
            )

        async for kind, value in progress_stream(work):
            if kind == "progress":
                done, total = cast(tuple[int, int], value)
                yield pb.IndexUnitsResponse(event=operation_progress("embed", done, total, "units"))
            else:
                report = cast("EmbedPass", value)
                typed = common_pb2.EmbedReport(**report.to_dict())
                yield pb.IndexUnitsResponse(event=common_pb2.OperationEvent(embed=typed))

    async def Knn(
        self, request: pb.KnnRequest, context: Ctx[pb.KnnRequest, pb.KnnResponse]
    ) -> pb.KnnResponse:
        if request.k < 0:
            raise InvalidArgument("k must be positive", metadata={"field": "k"})
        worker = self._deps.worker
        identity, _ = await worker.identity()
        if request.vector:
            vector = np.frombuffer(request.vector, dtype="<f4")
        elif request.query.strip():
            vector = await worker.embed_query(identity, request.query)
        else:
            raise InvalidArgument("give a query or a vector", metadata={"field": "query"})
        flt = knn.KnnFilter(
            accounts=tuple(request.accounts),
            chat_ids=tuple(request.chat_ids),
            since=request.range.since,
            until=request.range.until,
            kinds=tuple(request.kinds),
            current_chunks_only=request.current_chunks_only,
        )

        def run() -> pb.KnnResponse:
            conn = self._deps.reads.get()
            space = spaces.require_current(conn, identity)
            if vector.shape[0] != space.identity.dim:
                raise InvalidArgument(
                    f"the query vector has {vector.shape[0]} dimensions,"
                    f" the space {space.identity.dim}",
                    metadata={"field": "vector"},
                )
            found = knn.knn(conn, space, vector, flt, request.k or DEFAULT_K)
            pending = index.pending_count(conn, list(request.chat_ids) or None)
            warnings = []
            if pending:
                warnings.append(
                    common_pb2.Warning(
                        code="VECTORS_PENDING",
                        message=f"{pending} units are not embedded yet;"
                        " `chatseek embed` fills them",
                    )
                )
            return pb.KnnResponse(
                neighbours=[pb.Neighbour(unit_id=u, cosine=c, chat_id=ch) for u, c, ch in found],
                pending=pending,
                warnings=warnings,
            )

        return await to_thread(run)

    async def EmbedStatus(
        self,
        request: pb.EmbedStatusRequest,
        context: Ctx[pb.EmbedStatusRequest, pb.EmbedStatusResponse],
    ) -> pb.EmbedStatusResponse:
        def read() -> dict[str, Any]:
            conn = self._deps.reads.get()
            doc = index.status(conn, spaces.current_space(conn))
            pending = int(str(doc["total_pending"]))
            chars = index.pending_chars(conn, pending)
            unqueued = 0
            if self._deps.reads.attached("unitize"):
                unqueued = index.unqueued_count(conn)
                chars += index.unqueued_chars(conn, unqueued)
            doc.update(self._deps.worker.report(pending, chars, unqueued))
            return doc

        doc = await to_thread(read)
        return pb.EmbedStatusResponse(result=from_json(doc, common_pb2.EmbedStatusResult()))

    async def GetStatus(
        self, request: pb.GetStatusRequest, context: Ctx[pb.GetStatusRequest, pb.GetStatusResponse]
    ) -> pb.GetStatusResponse:
        def read() -> pb.GetStatusResponse:
            conn = self._deps.reads.get()
            space = spaces.current_space(conn)
            lag = 0
            if self._deps.reads.attached("unitize"):
                lag = feed.head(conn, "unitize") - feed.cursor(conn, index.FEED)
            return pb.GetStatusResponse(
                status=service_status(
                    OWNER,
                    schema_version=db.schema_version(conn, OWNER),
                    feed_lag={"unitize": lag},
                    details={
                        "model": space.identity.model if space else None,
                        "dim": space.identity.dim if space else None,
                        "pending": index.pending_count(conn),
                        "last_error": self._deps.worker.last_error,
                    },
                )
            )

        return await to_thread(read)
