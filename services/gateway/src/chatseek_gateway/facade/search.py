"""The gateway's hybrid search: resolves dates, forwards to fusion, adds the index age.

Fusion's typed result passes through, read and extended field by field (no JSON in between).
The index warnings (a re-cut running, word indexes behind) are asked of unitize and lexical
while fusion searches, so they add no round trip to a search.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from google.protobuf import json_format

from chatseek.common.v1 import common_pb2
from chatseek.fusion.v1 import fusion_service_pb2 as fusion_pb
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek.lexical.v1 import lexical_service_pb2 as lexical_pb
from chatseek.unitize.v1 import unitize_service_pb2 as unitize_pb
from chatseek_core.client import call
from chatseek_core.errors import ChatseekError
from chatseek_core.proto_json import to_python
from chatseek_gateway.dates import parse_bound
from chatseek_gateway.facade.base import Ctx, FacadeBase

__all__ = ["SearchFacade"]

SEARCH_TIMEOUT_S = 60.0
STATUS_TIMEOUT_S = 2.0
SECONDS_PER_MINUTE = 60


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
        index_warnings = asyncio.create_task(self._index_warnings())
        try:
            reply = await call(
                self._deps.peers.fusion.Search,
                forward,
                timeout=SEARCH_TIMEOUT_S,
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
        """A re-cut in progress or word indexes behind the store, said beside the hits."""
        warnings: list[common_pb2.Warning] = []
        peers = self._deps.peers
        try:
            unitize = await call(
                peers.unitize.GetStatus, unitize_pb.GetStatusRequest(), timeout=STATUS_TIMEOUT_S
            )
            details = to_python(json_format.MessageToDict(unitize.status.details))
            if details.get("recut_pending"):
                warnings.append(
                    common_pb2.Warning(
                        code="RECUT_IN_PROGRESS",
                        message=f"{details['recut_pending']} chats are being re-cut with a new"
                        " recipe; their hits are still valid, cut the old way",
                    )
                )
            lexical = await call(
                peers.lexical.GetStatus, lexical_pb.GetStatusRequest(), timeout=STATUS_TIMEOUT_S
            )
            behind = sum(lexical.status.feed_lag.values())
            if behind:
                warnings.append(
                    common_pb2.Warning(
                        code="INDEX_STALE",
                        message=f"the word index is {behind} changes behind the store",
                    )
                )
        except ChatseekError as exc:
            warnings.append(common_pb2.Warning(code="STATUS_UNAVAILABLE", message=exc.message))
        return warnings

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


def _index_age_min(chats: Iterable[common_pb2.SearchedChat]) -> float | None:
    """Minutes since the newest fetch of any searched chat; None when none was ever synced."""
    fetched = [c.last_fetched_at for c in chats if c.last_fetched_at]
    if not fetched:
        return None
    return round((time.time() - max(fetched)) / SECONDS_PER_MINUTE, 1)
