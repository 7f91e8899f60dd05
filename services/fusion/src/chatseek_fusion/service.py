"""The fusion servicer: proto in, typed core call, proto out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc

from chatseek.fusion.v1 import fusion_service_pb2 as pb
from chatseek.fusion.v1 import fusion_service_pb2_grpc
from chatseek_core.proto_json import document
from chatseek_fusion import hybrid
from chatseek_fusion.scope import resolve_scope

if TYPE_CHECKING:
    from chatseek_fusion.server import Deps

__all__ = ["FusionServicer"]

Ctx = grpc.aio.ServicerContext[Any, Any]


class FusionServicer(fusion_service_pb2_grpc.FusionServiceServicer):
    """Thin adapter over the fusion core functions."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    async def Search(self, request: pb.SearchRequest, context: Ctx) -> pb.SearchResponse:
        deps = self._deps
        flt, coverage = await resolve_scope(
            deps.ingest,
            chats=list(request.chats),
            source=request.source,
            account=request.account,
            default_account=deps.settings.account,
            since=request.range.since,
            until=request.range.until,
            kinds=list(request.kinds) or list(hybrid.DEFAULT_KINDS),
        )
        params = hybrid.SearchParams(
            query=request.query,
            flt=flt,
            mode=request.mode or "hybrid",
            k=request.k or 10,
            rerank=request.rerank if request.HasField("rerank") else None,
            full=request.full,
        )
        conn = deps.pool.get()
        result = await hybrid.search(conn, deps.signals, params, deps.config)
        result["coverage"] = {"chats": coverage}
        return pb.SearchResponse(result=document(result))
