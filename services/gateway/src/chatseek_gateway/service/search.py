"""The gateway's ``SearchService``: hybrid search, strict message search and the readers.

``Search`` resolves the dates, forwards to fusion and adds the index age; fusion's typed result
passes through, read and extended field by field (no JSON in between). The index warnings (a
re-cut running, word indexes behind) are asked of unitize and lexical, both at once and brief
(no table counts), while fusion searches, so they add no round trip to a search.
``SearchMessages``, ``ParseQuery`` and ``MessageStats`` go to lexical; ``SearchConversations``,
``Thread``, ``Context`` and ``Evidence`` to fusion.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import TypeVar

import grpc

from chatseek.common.v1 import common_pb2
from chatseek.fusion.v1 import fusion_service_pb2 as fusion_pb
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek.gateway.v1 import search_service_pb2_grpc
from chatseek.lexical.v1 import lexical_service_pb2 as lexical_pb
from chatseek.unitize.v1 import unitize_service_pb2 as unitize_pb
from chatseek_core.client import call
from chatseek_core.errors import ChatseekError
from chatseek_gateway.dates import parse_bound
from chatseek_gateway.deps import Deps
from chatseek_gateway.service.common import Ctx

__all__ = ["SearchServicer"]

HYBRID_TIMEOUT_S = 60.0
STRICT_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 30.0
STATUS_TIMEOUT_S = 2.0
SECONDS_PER_MINUTE = 60

Req = TypeVar("Req")
Resp = TypeVar("Resp")


def _strict(request: pb.SearchMessagesRequest) -> lexical_pb.SearchMessagesRequest:
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


async def _status(
    rpc: grpc.aio.UnaryUnaryMultiCallable[Req, Resp], request: Req
) -> Resp | ChatseekError:
    """A peer's ``GetStatus`` reply, or the error that says why it has none."""
    try:
        return await call(rpc, request, timeout=STATUS_TIMEOUT_S)
    except ChatseekError as exc:
        return exc


class SearchServicer(search_service_pb2_grpc.SearchServiceServicer):
    """Searches and readers, forwarded to fusion and lexical."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    # --- hybrid ---

    async def Search(
        self, request: pb.SearchRequest, context: Ctx[pb.SearchRequest, pb.SearchResponse]
    ) -> pb.SearchResponse:
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
        index_warnings = asyncio.create_task(self._index_warnings())
        try:
            reply = await call(
                self._deps.peers.fusion.Search,
                forward,
                timeout=HYBRID_TIMEOUT_S,
                idempotent=True,
                peer="fusion",
            )
        except BaseException:
            index_warnings.cancel()
            raise
        result = reply.result
        result.warnings.extend(await index_warnings)
        age = _index_age_min(result.coverage.chats)
        if age is not None:
            result.index_age_min = age
        result.took_ms = round((time.perf_counter() - started) * 1000, 1)
        return pb.SearchResponse(result=result)

    async def _index_warnings(self) -> list[common_pb2.Warning]:
        """A re-cut in progress or word indexes behind the store, said beside the hits.

        Both services are asked at once, for a brief status (no table counts), so that the
        warnings are in before fusion answers; one that cannot answer is a warning too.
        """
        peers = self._deps.peers
        asked_unitize = _status(peers.unitize.GetStatus, unitize_pb.GetStatusRequest(brief=True))
        asked_lexical = _status(peers.lexical.GetStatus, lexical_pb.GetStatusRequest(brief=True))
        unitize, lexical = await asyncio.gather(asked_unitize, asked_lexical)
        warnings = [
            common_pb2.Warning(code="STATUS_UNAVAILABLE", message=reply.message)
            for reply in (unitize, lexical)
            if isinstance(reply, ChatseekError)
        ]
        if not isinstance(unitize, ChatseekError) and unitize.status.unitize.recut_pending:
            warnings.append(
                common_pb2.Warning(
                    code="RECUT_IN_PROGRESS",
                    message=f"{unitize.status.unitize.recut_pending} chats are being re-cut with"
                    " a new recipe; their hits are still valid, cut the old way",
                )
            )
        behind = 0 if isinstance(lexical, ChatseekError) else sum(lexical.status.feed_lag.values())
        if behind:
            warnings.append(
                common_pb2.Warning(
                    code="INDEX_STALE",
                    message=f"the word index is {behind} changes behind the store",
                )
            )
        return warnings

    async def SearchConversations(
        self,
        request: pb.SearchConversationsRequest,
        context: Ctx[pb.SearchConversationsRequest, pb.SearchConversationsResponse],
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
            timeout=HYBRID_TIMEOUT_S,
            idempotent=True,
            peer="fusion",
        )
        return pb.SearchConversationsResponse(result=reply.result)

    # --- strict ---

    async def SearchMessages(
        self,
        request: pb.SearchMessagesRequest,
        context: Ctx[pb.SearchMessagesRequest, pb.SearchMessagesResponse],
    ) -> pb.SearchMessagesResponse:
        reply = await call(
            self._deps.peers.lexical.SearchMessages,
            _strict(request),
            timeout=STRICT_TIMEOUT_S,
            idempotent=True,
            peer="lexical",
        )
        return pb.SearchMessagesResponse(result=reply.result)

    async def ParseQuery(
        self,
        request: pb.ParseQueryRequest,
        context: Ctx[pb.ParseQueryRequest, pb.ParseQueryResponse],
    ) -> pb.ParseQueryResponse:
        reply = await call(
            self._deps.peers.lexical.ParseQuery,
            lexical_pb.ParseQueryRequest(query=request.query, tree_json=request.tree_json),
            timeout=STRICT_TIMEOUT_S,
            idempotent=True,
            peer="lexical",
        )
        return pb.ParseQueryResponse(tree=reply.tree)

    async def MessageStats(
        self,
        request: pb.MessageStatsRequest,
        context: Ctx[pb.MessageStatsRequest, pb.MessageStatsResponse],
    ) -> pb.MessageStatsResponse:
        reply = await call(
            self._deps.peers.lexical.MessageStats,
            lexical_pb.MessageStatsRequest(search=_strict(request.search), by=request.by),
            timeout=STRICT_TIMEOUT_S,
            idempotent=True,
            peer="lexical",
        )
        return pb.MessageStatsResponse(result=reply.result)

    # --- readers ---

    async def Thread(
        self, request: pb.ThreadRequest, context: Ctx[pb.ThreadRequest, pb.ThreadResponse]
    ) -> pb.ThreadResponse:
        reply = await call(
            self._deps.peers.fusion.Thread,
            fusion_pb.ThreadRequest(
                account=request.account, chat=request.chat, msg_id=request.msg_id
            ),
            timeout=READ_TIMEOUT_S,
            idempotent=True,
            peer="fusion",
        )
        return pb.ThreadResponse(result=reply.result)

    async def Context(
        self, request: pb.ContextRequest, context: Ctx[pb.ContextRequest, pb.ContextResponse]
    ) -> pb.ContextResponse:
        forward = fusion_pb.ContextRequest(
            account=request.account, chat=request.chat, msg_id=request.msg_id
        )
        if request.HasField("before"):
            forward.before = request.before
        if request.HasField("after"):
            forward.after = request.after
        reply = await call(
            self._deps.peers.fusion.Context,
            forward,
            timeout=READ_TIMEOUT_S,
            idempotent=True,
            peer="fusion",
        )
        return pb.ContextResponse(result=reply.result)

    async def Evidence(
        self, request: pb.EvidenceRequest, context: Ctx[pb.EvidenceRequest, pb.EvidenceResponse]
    ) -> pb.EvidenceResponse:
        reply = await call(
            self._deps.peers.fusion.Evidence,
            fusion_pb.EvidenceRequest(locators=list(request.locators), max_chars=request.max_chars),
            timeout=READ_TIMEOUT_S,
            idempotent=True,
            peer="fusion",
        )
        return pb.EvidenceResponse(result=reply.result)


def _index_age_min(chats: Iterable[common_pb2.SearchedChat]) -> float | None:
    """Minutes since the newest fetch of any searched chat; None when none was ever synced."""
    fetched = [c.last_fetched_at for c in chats if c.last_fetched_at]
    if not fetched:
        return None
    return round((time.time() - max(fetched)) / SECONDS_PER_MINUTE, 1)
