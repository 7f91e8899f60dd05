"""The lexical service alone on port 0 over a temp data dir: health, and strict search answered
as of its arrival while the indexer is behind."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import sqlean
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers_store import ACCOUNT, Stores, make_stores

from chatseek.lexical.v1 import lexical_service_pb2 as pb
from chatseek.lexical.v1 import lexical_service_pb2_grpc
from chatseek_core import db
from chatseek_core.client import decode_error
from chatseek_core.settings import Settings
from chatseek_core.wire_json import to_json
from chatseek_lexical.server import create_server, open_deps
from chatseek_testing.services import serving, temp_settings


async def test_the_service_serves_health_after_start_and_creates_its_database(
    tmp_path: Path,
) -> None:
    settings = temp_settings(tmp_path, "lexical")
    running = create_server(settings, open_deps(settings))
    async with serving(running) as addr:
        async with grpc.aio.insecure_channel(addr) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            named = await stub.Check(
                health_pb2.HealthCheckRequest(service="chatseek.lexical.v1.LexicalService"),
                timeout=5,
            )
            assert named.status == health_pb2.HealthCheckResponse.SERVING
    assert (tmp_path / "data" / "lexical.db").exists()


def test_queries_read_through_their_own_read_only_pool_and_the_indexer_keeps_its_cache(
    tmp_path: Path,
) -> None:
    settings = temp_settings(tmp_path, "lexical")
    deps = open_deps(settings)
    try:
        query = deps.reads.get()
        assert -query.execute("PRAGMA cache_size").fetchone()[0] == db.QUERY_CACHE_SIZE_KIB
        assert -deps.pool.get().execute("PRAGMA cache_size").fetchone()[0] == db.CACHE_SIZE_KIB
        with pytest.raises(sqlean.OperationalError, match="readonly"):
            query.execute("DELETE FROM msg_fts")
    finally:
        deps.splitter.close()
        deps.reads.close()
        deps.pool.close()


@pytest.fixture
def quiet(tmp_path: Path) -> Iterator[tuple[Settings, Stores]]:
    """Settings whose indexer, once idle, only wakes when nudged (a poll an hour apart), and
    the producers' files in their data directory."""
    settings = temp_settings(tmp_path, "lexical", env={"CHATSEEK_POLL_INTERVAL_S": "3600"})
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    stores = make_stores(settings.data_dir)
    yield settings, stores
    stores.close()


async def _search(addr: str, query: str, timeout: float) -> dict[str, Any]:
    async with grpc.aio.insecure_channel(addr) as channel:
        stub = lexical_service_pb2_grpc.LexicalServiceStub(channel)
        reply = await stub.SearchMessages(
            pb.SearchMessagesRequest(query=query, account=ACCOUNT, timezone="UTC"),
            timeout=timeout,
        )
    return to_json(reply.result)


async def test_strict_search_waits_for_the_messages_stored_before_it_arrived(
    quiet: tuple[Settings, Stores],
) -> None:
    settings, stores = quiet
    running = create_server(settings, open_deps(settings))
    async with serving(running) as addr:
        await asyncio.sleep(0.3)  # the loop's first pass finds nothing and goes to sleep
        stores.ingest.put_message(100, 1, "the invoice for March is attached")
        stores.ingest.put_message(100, 2, "thanks, paying it today")
        found = await _search(addr, "invoice", timeout=20)
    assert found["words_ready"] is True
    assert [item["msg_id"] for item in found["items"]] == [1]


async def test_strict_search_asks_for_a_retry_before_its_deadline_when_the_index_lags(
    quiet: tuple[Settings, Stores],
) -> None:
    settings, stores = quiet
    running = create_server(settings, open_deps(settings))
    async with serving(running) as addr:
        await asyncio.sleep(0.3)
        stores.ingest.put_message(100, 1, "the invoice for March is attached")
        writer = db.connect(settings.db_path("lexical"))
        writer.execute("BEGIN IMMEDIATE")  # the indexer cannot write until this ends
        try:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await _search(addr, "invoice", timeout=4)
            no_words = await _search(addr, "date>=2024-01-01", timeout=4)
        finally:
            writer.execute("ROLLBACK")
            writer.close()
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    decoded = decode_error(caught.value)
    assert decoded.reason == "INDEX_BEHIND"
    assert decoded.retry_after_s is not None and decoded.retry_after_s > 0
    assert decoded.metadata["ingest_behind"] == "1"
    assert no_words["words_ready"] is False
    assert [item["msg_id"] for item in no_words["items"]] == [1]


async def test_a_brief_status_keeps_the_lag_and_leaves_out_the_counts(
    quiet: tuple[Settings, Stores],
) -> None:
    settings, stores = quiet
    stores.ingest.put_message(100, 1, "the invoice for March is attached")
    running = create_server(settings, open_deps(settings))
    async with serving(running) as addr:
        await _search(addr, "invoice", timeout=20)  # answers once the message is indexed
        writer = db.connect(settings.db_path("lexical"))
        writer.execute("BEGIN IMMEDIATE")  # the indexer cannot index the next message
        try:
            stores.ingest.put_message(100, 2, "thanks, paying it today")
            async with grpc.aio.insecure_channel(addr) as channel:
                stub = lexical_service_pb2_grpc.LexicalServiceStub(channel)
                full = (await stub.GetStatus(pb.GetStatusRequest(), timeout=5)).status
                brief = (await stub.GetStatus(pb.GetStatusRequest(brief=True), timeout=5)).status
        finally:
            writer.execute("ROLLBACK")
            writer.close()
    assert full.lexical.messages_indexed == 1
    assert not brief.lexical.HasField("messages_indexed")
    assert not brief.lexical.HasField("units_indexed")
    assert dict(brief.feed_lag) == dict(full.feed_lag)
    assert brief.feed_lag["ingest"] == 1
    assert brief.lexical.words_ready is False
