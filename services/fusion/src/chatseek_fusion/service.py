"""The fusion servicer: proto in, typed core call, proto out.

The core functions return JSON-shaped results; each becomes its typed ``common.v1`` message
here (``wire_json.from_json``, which refuses a key its message lacks), never a ``Struct``.
"""

from __future__ import annotations

import grpc

from chatseek.common.v1 import common_pb2
from chatseek.fusion.v1 import fusion_service_pb2 as pb
from chatseek.fusion.v1 import fusion_service_pb2_grpc
from chatseek_core.aio import to_thread
from chatseek_core.limits import DEFAULT_AROUND
from chatseek_core.wire_json import from_json, mode_word
from chatseek_fusion import conversations, hybrid, readers
from chatseek_fusion.deps import Deps
from chatseek_fusion.scope import resolve_one, resolve_scope

__all__ = ["FusionServicer"]

Ctx = grpc.aio.ServicerContext


class FusionServicer(fusion_service_pb2_grpc.FusionServiceServicer):
    """Thin adapter over the fusion core functions."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    async def Search(
        self, request: pb.SearchRequest, context: Ctx[pb.SearchRequest, pb.SearchResponse]
    ) -> pb.SearchResponse:
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
            mode=mode_word(request.mode),
            k=request.k or 10,
            rerank=request.rerank if request.HasField("rerank") else None,
            full=request.full,
        )
        result = await hybrid.search(deps.pool.get, deps.signals, params, deps.config)
        result["coverage"] = {"chats": coverage}
        return pb.SearchResponse(result=from_json(result, common_pb2.SearchResult()))

    async def SearchConversations(
        self,
        request: pb.SearchConversationsRequest,
        context: Ctx[pb.SearchConversationsRequest, pb.SearchConversationsResponse],
    ) -> pb.SearchConversationsResponse:
        deps = self._deps
        flt, coverage = await resolve_scope(
            deps.ingest,
            chats=list(request.chats),
            source=request.source,
            account=request.account,
            default_account=deps.settings.account,
            since=0,
            until=0,
            kinds=["conversation"],
        )
        result = await conversations.search_conversations(
            deps.pool.get,
            deps.signals,
            request.question,
            flt,
            request.k or 10,
            request.since,
            deps.config,
        )
        result["coverage"] = {"chats": coverage}
        return pb.SearchConversationsResponse(
            result=from_json(result, common_pb2.ConversationsResult())
        )

    async def Thread(
        self, request: pb.ThreadRequest, context: Ctx[pb.ThreadRequest, pb.ThreadResponse]
    ) -> pb.ThreadResponse:
        account, chat_id = await resolve_one(
            self._deps.ingest, request.chat, request.account or self._deps.settings.account
        )
        doc = await to_thread(
            lambda: readers.thread(self._deps.pool.get(), account, chat_id, request.msg_id)
        )
        return pb.ThreadResponse(result=from_json(doc, common_pb2.ThreadResult()))

    async def Context(
        self, request: pb.ContextRequest, context: Ctx[pb.ContextRequest, pb.ContextResponse]
    ) -> pb.ContextResponse:
        account, chat_id = await resolve_one(
            self._deps.ingest, request.chat, request.account or self._deps.settings.account
        )
        before = request.before if request.HasField("before") else DEFAULT_AROUND
        after = request.after if request.HasField("after") else DEFAULT_AROUND
        doc = await to_thread(
            lambda: readers.context(
                self._deps.pool.get(), account, chat_id, request.msg_id, before, after
            )
        )
        return pb.ContextResponse(result=from_json(doc, common_pb2.ContextResult()))

    async def Evidence(
        self, request: pb.EvidenceRequest, context: Ctx[pb.EvidenceRequest, pb.EvidenceResponse]
    ) -> pb.EvidenceResponse:
        doc = await to_thread(
            lambda: readers.evidence(
                self._deps.pool.get(), list(request.locators), request.max_chars
            )
        )
        return pb.EvidenceResponse(result=from_json(doc, common_pb2.EvidenceResult()))
