"""The gateway's strict message search, query parsing and counting, forwarded to lexical."""

from __future__ import annotations

from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek.lexical.v1 import lexical_service_pb2 as lexical_pb
from chatseek_core.client import call
from chatseek_gateway.facade.base import Ctx, FacadeBase

__all__ = ["MessagesFacade"]

SEARCH_TIMEOUT_S = 30.0


def _forward(request: pb.SearchMessagesRequest) -> lexical_pb.SearchMessagesRequest:
    return lexical_pb.SearchMessagesRequest(
        query=request.query,
        tree_json=request.tree_json,
        source=request.source,
        account=request.account,
        chats=list(request.chats),
        timezone=request.timezone,
        limit=request.limit,
        page_token=request.page_token,
        newest=request.newest,
        context=request.context,
    )


class MessagesFacade(FacadeBase):
    """``SearchMessages``, ``ParseQuery`` and ``MessageStats``."""

    async def SearchMessages(
        self, request: pb.SearchMessagesRequest, context: Ctx
    ) -> pb.SearchMessagesResponse:
        reply = await call(
            self._deps.peers.lexical.SearchMessages,
            _forward(request),
            timeout=SEARCH_TIMEOUT_S,
            idempotent=True,
            peer="lexical",
        )
        return pb.SearchMessagesResponse(result=reply.result)

    async def ParseQuery(
        self, request: pb.ParseQueryRequest, context: Ctx
    ) -> pb.ParseQueryResponse:
        reply = await call(
            self._deps.peers.lexical.ParseQuery,
            lexical_pb.ParseQueryRequest(query=request.query, tree_json=request.tree_json),
            timeout=SEARCH_TIMEOUT_S,
            idempotent=True,
            peer="lexical",
        )
        return pb.ParseQueryResponse(tree=reply.tree)

    async def MessageStats(
        self, request: pb.MessageStatsRequest, context: Ctx
    ) -> pb.MessageStatsResponse:
        reply = await call(
            self._deps.peers.lexical.MessageStats,
            lexical_pb.MessageStatsRequest(search=_forward(request.search), by=request.by),
            timeout=SEARCH_TIMEOUT_S,
            idempotent=True,
            peer="lexical",
        )
        return pb.MessageStatsResponse(result=reply.result)
