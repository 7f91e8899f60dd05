"""The gateway's hybrid search: resolves dates, forwards to fusion, adds the index age."""

from __future__ import annotations

import time

from chatseek.common.v1 import common_pb2
from chatseek.fusion.v1 import fusion_service_pb2 as fusion_pb
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek_core.client import call
from chatseek_core.proto_json import document, from_document
from chatseek_gateway.dates import parse_bound
from chatseek_gateway.facade.base import Ctx, FacadeBase

__all__ = ["SearchFacade"]

SEARCH_TIMEOUT_S = 60.0


class SearchFacade(FacadeBase):
    """``Search`` and ``SearchConversations``."""

    async def Search(self, request: pb.SearchRequest, context: Ctx) -> pb.SearchResponse:
        started = time.perf_counter()
        forward = fusion_pb.SearchRequest(
            query=request.query,
            chats=list(request.chats),
            source=request.source,
            account=request.account,
            range=common_pb2.TimeRange(
                since=parse_bound(request.since, upper=False),
                until=parse_bound(request.until, upper=True),
            ),
            kinds=list(request.kinds),
            mode=request.mode,
            k=request.k,
            full=request.full,
        )
        if request.HasField("rerank"):
            forward.rerank = request.rerank
        reply = await call(
            self._deps.peers.fusion.Search,
            forward,
            timeout=SEARCH_TIMEOUT_S,
            idempotent=True,
            peer="fusion",
        )
        result = from_document(reply.result)
        result["took_ms"] = round((time.perf_counter() - started) * 1000, 1)
        return pb.SearchResponse(result=document(result))

    async def SearchConversations(
        self, request: pb.SearchConversationsRequest, context: Ctx
    ) -> pb.SearchConversationsResponse:
        reply = await call(
            self._deps.peers.fusion.SearchConversations,
            fusion_pb.SearchConversationsRequest(
                question=request.question,
                chats=list(request.chats),
                source=request.source,
                account=request.account,
                since=parse_bound(request.since, upper=False),
                k=request.k,
            ),
            timeout=SEARCH_TIMEOUT_S,
            idempotent=True,
            peer="fusion",
        )
        return pb.SearchConversationsResponse(result=reply.result)
