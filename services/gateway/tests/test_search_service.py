"""The gateway's Search beside its peers: the index warnings are asked while fusion searches,
of unitize and lexical at once, each for a brief status."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from chatseek.common.v1 import common_pb2
from chatseek.fusion.v1 import fusion_service_pb2 as fusion_pb
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek.lexical.v1 import lexical_service_pb2 as lexical_pb
from chatseek.unitize.v1 import unitize_service_pb2 as unitize_pb
from chatseek_core.errors import ChatseekError, IndexNotReady
from chatseek_gateway.service.search import SearchServicer

WAIT_S = 10.0


class _Peers:
    """Fusion, unitize and lexical as the servicer calls them. Fusion answers only once lexical
    has been asked for its status, and unitize only once lexical has been asked too, so a
    gateway that asks afterwards, or asks one peer after the other, never gets an answer."""

    def __init__(
        self,
        *,
        lag: int = 0,
        recut_pending: int = 0,
        fusion_error: ChatseekError | None = None,
        lexical_error: ChatseekError | None = None,
    ) -> None:
        self.lag = lag
        self.recut_pending = recut_pending
        self.fusion_error = fusion_error
        self.lexical_error = lexical_error
        self.status_asked = asyncio.Event()
        self.briefs: list[bool] = []
        self.fusion = SimpleNamespace(Search=self._search)
        self.unitize = SimpleNamespace(GetStatus=self._unitize_status)
        self.lexical = SimpleNamespace(GetStatus=self._lexical_status)

    async def _search(self, request: Any, timeout: float) -> fusion_pb.SearchResponse:
        await asyncio.wait_for(self.status_asked.wait(), WAIT_S)
        if self.fusion_error is not None:
            raise self.fusion_error
        return fusion_pb.SearchResponse(result=common_pb2.SearchResult())

    async def _unitize_status(
        self, request: unitize_pb.GetStatusRequest, timeout: float
    ) -> unitize_pb.GetStatusResponse:
        self.briefs.append(request.brief)
        await asyncio.wait_for(self.status_asked.wait(), WAIT_S)
        status = common_pb2.ServiceStatus(service="unitize")
        status.unitize.recut_pending = self.recut_pending
        return unitize_pb.GetStatusResponse(status=status)

    async def _lexical_status(
        self, request: lexical_pb.GetStatusRequest, timeout: float
    ) -> lexical_pb.GetStatusResponse:
        self.briefs.append(request.brief)
        self.status_asked.set()
        if self.lexical_error is not None:
            raise self.lexical_error
        status = common_pb2.ServiceStatus(service="lexical", feed_lag={"ingest": self.lag})
        return lexical_pb.GetStatusResponse(status=status)


def _servicer(peers: _Peers) -> SearchServicer:
    return SearchServicer(SimpleNamespace(peers=peers))  # type: ignore[arg-type]


async def test_the_index_warnings_are_asked_while_fusion_searches() -> None:
    peers = _Peers(lag=7)
    reply = await _servicer(peers).Search(pb.SearchRequest(query="flat", k=5), None)  # type: ignore[arg-type]
    assert [w.code for w in reply.result.warnings] == ["INDEX_STALE"]
    assert "7 changes behind" in reply.result.warnings[0].message
    assert peers.briefs == [True, True]


async def test_a_peer_without_a_status_is_a_warning_beside_the_others() -> None:
    peers = _Peers(recut_pending=2, lexical_error=ChatseekError("lexical is not serving"))
    reply = await _servicer(peers).Search(pb.SearchRequest(query="flat", k=5), None)  # type: ignore[arg-type]
    warnings = {w.code: w.message for w in reply.result.warnings}
    assert warnings.keys() == {"STATUS_UNAVAILABLE", "RECUT_IN_PROGRESS"}
    assert warnings["STATUS_UNAVAILABLE"] == "lexical is not serving"
    assert warnings["RECUT_IN_PROGRESS"].startswith("2 chats are being re-cut")


async def test_a_failed_fusion_search_fails_the_search_with_its_own_error() -> None:
    peers = _Peers(fusion_error=IndexNotReady("the word index is being built"))
    with pytest.raises(IndexNotReady):
        await _servicer(peers).Search(pb.SearchRequest(query="flat", k=5), None)  # type: ignore[arg-type]
