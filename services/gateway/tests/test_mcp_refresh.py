"""The search tool's automatic refresh, against a fake gateway served in process over gRPC.

The fake answers Search with a chosen coverage and Sync as told (a report, an error, or not at
all, like a gateway whose Sync is not implemented yet); errors travel through the real server
interceptor, so they arrive exactly as the real gateway's would.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from mcp import Client

from chatseek.common.v1 import common_pb2
from chatseek.gateway.v1 import archive_service_pb2_grpc, search_service_pb2_grpc
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek_core.errors import ChatseekError, FloodWait, SyncRunning
from chatseek_core.operations import operation_progress
from chatseek_core.runner import Running
from chatseek_core.server import build_server as build_grpc_server
from chatseek_core.wire_json import from_json, to_json
from chatseek_gateway.mcp.gateway import GatewayConnection
from chatseek_gateway.mcp.server import build_server
from chatseek_testing.services import serving

STALE_CHAT = -1001000000001
FRESH_CHAT = -1001000000002
IMPORTED_CHAT = -1001000000003
HOURS_AGO_3 = 3 * 3600
MINUTE_AGO = 60
DEFAULT_BUDGET_S = 20.0  # chatseek_core.config.SearchConfig.auto_sync_budget_s


def _coverage(*ages: tuple[int, int | None]) -> list[dict[str, Any]]:
    now = int(time.time())
    return [
        {
            "id": chat_id,
            "title": str(chat_id),
            "last_fetched_at": None if age is None else now - age,
        }
        for chat_id, age in ages
    ]


class _SearchOnlyGateway(
    search_service_pb2_grpc.SearchServiceServicer, archive_service_pb2_grpc.ArchiveServiceServicer
):
    """Answers Search with a fixed coverage; Sync is the generated unimplemented one."""

    def __init__(self, coverage: list[dict[str, Any]]) -> None:
        self.coverage = coverage
        self.searches = 0
        self.syncs: list[pb.SyncRequest] = []

    async def Search(
        self, request: pb.SearchRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.SearchResponse:
        self.searches += 1
        hits = [{"rank": 1, "score": 1.0, "link": "https://t.me/c/1000000001/7"}]
        body = {"hits": hits, "warnings": [], "coverage": {"chats": self.coverage}}
        return pb.SearchResponse(result=from_json(body, common_pb2.SearchResult()))


class _FakeGateway(_SearchOnlyGateway):
    """Also syncs: streams a progress event, then the given report, or raises the given error."""

    def __init__(self, coverage: list[dict[str, Any]], outcome: dict[str, Any] | Exception) -> None:
        super().__init__(coverage)
        self.outcome = outcome

    async def Sync(
        self, request: pb.SyncRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.SyncResponse]:
        self.syncs.append(request)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        yield pb.SyncResponse(event=operation_progress("sync", 1, 2))
        report = from_json(self.outcome, common_pb2.SyncReport())
        yield pb.SyncResponse(event=common_pb2.OperationEvent(sync=report))


def _fake(coverage: list[dict[str, Any]], outcome: dict[str, Any] | Exception) -> _FakeGateway:
    # The fakes implement only Search (and Sync); every other RPC keeps the generated
    # UNIMPLEMENTED answer, which the typed stubs declare abstract.
    return _FakeGateway(coverage, outcome)  # type: ignore[abstract]


@contextlib.asynccontextmanager
async def searching(servicer: _SearchOnlyGateway, config_path: Path) -> AsyncIterator[Client]:
    """An in-memory MCP session whose server reaches ``servicer`` over real gRPC."""

    def register(server: grpc.aio.Server) -> list[str]:
        search_service_pb2_grpc.add_SearchServiceServicer_to_server(servicer, server)
        archive_service_pb2_grpc.add_ArchiveServiceServicer_to_server(servicer, server)
        return ["chatseek.gateway.v1.SearchService", "chatseek.gateway.v1.ArchiveService"]

    handle = build_grpc_server(service="gateway", listen="127.0.0.1:0", register=register)
    async with serving(Running(handle=handle)) as addr:
        gateway = GatewayConnection(addr)
        try:
            async with Client(build_server(gateway, config_path)) as client:
                yield client
        finally:
            await gateway.close()


async def _search(client: Client) -> dict[str, Any]:
    result = await client.call_tool("search", {"query": "rent"})
    assert not result.is_error
    assert result.structured_content is not None
    doc: dict[str, Any] = result.structured_content
    assert "error" not in doc
    assert doc["hits"]
    return doc


async def test_a_stale_index_is_refreshed_first_and_only_chats_synced_before_take_part(
    tmp_path: Path,
) -> None:
    report = {"new": 3, "chats_done": 1, "chats_remaining": 0, "stopped_by": None}
    fake = _fake(
        _coverage((STALE_CHAT, HOURS_AGO_3), (FRESH_CHAT, MINUTE_AGO), (IMPORTED_CHAT, None)),
        report,
    )
    async with searching(fake, tmp_path / "config.toml") as client:
        doc = await _search(client)
    [sync] = fake.syncs
    assert list(sync.chats) == [str(STALE_CHAT)]
    assert sync.budget_s == DEFAULT_BUDGET_S
    assert fake.searches == 2
    # The sync report as the CLI prints it: every SyncReport field, the fake's values set.
    assert doc["synced"] == to_json(from_json(report, common_pb2.SyncReport()))
    assert doc["warnings"] == []
    assert doc["index_age_min"] > 0


async def test_the_refresh_follows_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[search]\nauto_sync_after_min = 600\nauto_sync_budget_s = 5\n")
    fake = _fake(_coverage((STALE_CHAT, HOURS_AGO_3)), {"new": 0})
    async with searching(fake, config) as client:
        doc = await _search(client)
    assert fake.syncs == []
    assert doc["synced"] is None

    config.write_text("[search]\nauto_sync_after_min = 60\nauto_sync_budget_s = 5\n")
    async with searching(fake, config) as client:
        await _search(client)
    assert [s.budget_s for s in fake.syncs] == [5.0]


@pytest.mark.parametrize(
    "coverage",
    [
        _coverage((FRESH_CHAT, MINUTE_AGO), (IMPORTED_CHAT, None)),
        _coverage((IMPORTED_CHAT, None)),
        [],
    ],
    ids=["fresh", "never-synced", "empty"],
)
async def test_a_fresh_or_never_synced_index_is_searched_without_a_sync(
    tmp_path: Path, coverage: list[dict[str, Any]]
) -> None:
    fake = _fake(coverage, {"new": 0})
    async with searching(fake, tmp_path / "config.toml") as client:
        doc = await _search(client)
    assert fake.syncs == []
    assert fake.searches == 1
    assert doc["synced"] is None
    assert doc["warnings"] == []


@pytest.mark.parametrize(
    ("outcome", "code"),
    [
        (SyncRunning("a sync is running"), "SYNC_RUNNING"),
        (FloodWait("flood wait", retry_after_s=300.0), "FLOOD_WAIT"),
        ({"new": 1, "stopped_by": "flood_wait", "flood_wait_s": 300.0}, "FLOOD_WAIT"),
        ({"new": 1, "chats_remaining": 2, "stopped_by": "budget"}, "AUTO_SYNC_INCOMPLETE"),
        (ChatseekError("telegram is not reachable"), "AUTO_SYNC_SKIPPED"),
    ],
    ids=["sync-running", "flood-wait-error", "flood-wait-stop", "budget-stop", "failure"],
)
async def test_what_stops_the_refresh_is_a_warning_beside_the_hits(
    tmp_path: Path, outcome: dict[str, Any] | Exception, code: str
) -> None:
    fake = _fake(_coverage((STALE_CHAT, HOURS_AGO_3)), outcome)
    async with searching(fake, tmp_path / "config.toml") as client:
        doc = await _search(client)
    assert code in [w["code"] for w in doc["warnings"]]
    assert all(w["message"] for w in doc["warnings"])


async def test_a_gateway_without_sync_skips_the_refresh_with_a_warning(tmp_path: Path) -> None:
    fake = _SearchOnlyGateway(_coverage((STALE_CHAT, HOURS_AGO_3)))  # type: ignore[abstract]
    async with searching(fake, tmp_path / "config.toml") as client:
        doc = await _search(client)
    assert [w["code"] for w in doc["warnings"]] == ["AUTO_SYNC_SKIPPED"]
    assert doc["synced"] is None
    assert fake.searches == 1
