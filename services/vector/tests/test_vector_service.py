"""The vector service: feed → pending → vectors through the embed service, KNN and its guards."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import sqlean

from chatseek.vector.v1 import vector_service_pb2 as pb
from chatseek.vector.v1 import vector_service_pb2_grpc
from chatseek_core import db, errors, feed
from chatseek_core.client import call, decode_error
from chatseek_core.settings import Settings
from chatseek_core.wire_json import to_json
from chatseek_embed import server as embed_server
from chatseek_testing.services import serving, temp_settings
from chatseek_unitize.schema import MIGRATIONS as UNITIZE_MIGRATIONS
from chatseek_vector import server as vector_server
from chatseek_vector.index import apply_unit_feed, remove_unit, store_vectors, take_pending
from chatseek_vector.spaces import PASSAGE_FORM, current_space

TEXTS = {
    1: "[2024-05-01 10:00] Ann: how do I open a bank account without a residence permit",
    2: "[2024-05-01 11:00] Bob: the hike to the waterfall starts at the bridge",
    3: "[2024-05-02 09:00] Cat: renting a flat needs a deposit of two months",
    4: "[2024-05-03 09:00] Dan: which SIM card works in the mountains",
}


def _write_units(path: Path, units: dict[int, str], chat_id: int = -100123) -> None:
    conn = db.connect(path)
    db.migrate(conn, "unitize", UNITIZE_MIGRATIONS)
    with db.transaction(conn):
        for unit_id, text in units.items():
            digest = hashlib.sha256(text.encode()).hexdigest()
            conn.execute(
                "INSERT INTO units (unit_id, account, chat_id, kind, key, first_msg_id,"
                " last_msg_id, start_date, end_date, msg_ids, senders, text, content_hash,"
                " recipe) VALUES (?, 'default', ?, 'window', ?, ?, ?, ?, ?, ?, '[]', ?, ?, 1)"
                " ON CONFLICT (unit_id) DO UPDATE SET text = excluded.text,"
                " content_hash = excluded.content_hash",
                (
                    unit_id,
                    chat_id,
                    f"w:{unit_id}",
                    unit_id,
                    unit_id,
                    1714550000 + unit_id,
                    1714550000 + unit_id,
                    json.dumps([unit_id]),
                    text,
                    digest,
                ),
            )
            feed.append(conn, [("unit", "default", chat_id, unit_id, "upsert")])
    conn.close()


async def _index(stub: Any, **kwargs: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    try:
        async for response in stub.IndexUnits(pb.IndexUnitsRequest(**kwargs), timeout=60):
            if response.event.WhichOneof("event") == "embed":
                result = to_json(response.event.embed)
    except grpc.aio.AioRpcError as err:
        raise decode_error(err) from None
    return result


@contextlib.asynccontextmanager
async def _embed_serving(tmp_path: Path) -> AsyncIterator[Settings]:
    """The embed service (fake models) in-process, and the vector service's settings to reach it
    over unitize.db holding TEXTS."""
    embed_settings = temp_settings(tmp_path, "embed")
    async with serving(
        embed_server.create_server(embed_settings, embed_server.load_models(embed_settings))
    ) as embed_addr:
        settings = temp_settings(
            tmp_path,
            "vector",
            {"CHATSEEK_EMBED_ADDR": embed_addr, "CHATSEEK_POLL_INTERVAL_S": "60"},
        )
        _write_units(settings.db_path("unitize"), TEXTS)
        yield settings


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[tuple[Any, Path]]:
    """The embed service (fake models) and the vector service in-process, its first pass done."""
    async with _embed_serving(tmp_path) as settings:
        deps = vector_server.open_deps(settings)
        async with serving(vector_server.create_server(settings, deps)) as addr:
            # The background loop's first pass embeds TEXTS; with a 60 s poll and no Notify it
            # then sleeps, so every pass a test asks for does its own work.
            await asyncio.wait_for(deps.worker.waiting.wait(), timeout=30)
            async with grpc.aio.insecure_channel(addr) as channel:
                yield vector_service_pb2_grpc.VectorServiceStub(channel), tmp_path


async def test_embedding_fills_the_index_and_knn_finds_the_right_unit(
    stack: tuple[Any, Path],
) -> None:
    stub, _ = stack
    report = await _index(stub)
    assert report["remaining"] == 0
    reply = await call(stub.Knn, pb.KnnRequest(query="open a bank account", k=2))
    assert reply.neighbours[0].unit_id == 1
    assert -1.0 <= reply.neighbours[0].cosine <= 1.0
    status = to_json((await call(stub.EmbedStatus, pb.EmbedStatusRequest())).result)
    assert status["total_pending"] == 0
    assert status["chats"][0]["embedded"] == len(TEXTS)


async def test_knn_filters_by_chat_and_date_inside_the_scan(stack: tuple[Any, Path]) -> None:
    stub, _ = stack
    await _index(stub)
    none = await call(stub.Knn, pb.KnnRequest(query="bank", chat_ids=[-999], k=5))
    assert list(none.neighbours) == []
    late = await call(
        stub.Knn,
        pb.KnnRequest(query="bank account", k=5, range={"since": 1714550003}),
    )
    assert {n.unit_id for n in late.neighbours} == {3, 4}


async def test_identical_text_is_embedded_once(stack: tuple[Any, Path]) -> None:
    stub, home = stack
    await _index(stub)
    _write_units(home / "data" / "unitize.db", {5: TEXTS[1]}, chat_id=-100999)
    report = await _index(stub)
    assert report == {"embedded": 0, "cached": 1, "skipped": 0, "remaining": 0}
    status = to_json((await call(stub.EmbedStatus, pb.EmbedStatusRequest())).result)
    assert status["since_start"] == {"embedded": len(TEXTS), "cached": 1, "skipped": 0}
    assert status["total_pending"] == 0


@pytest.mark.parametrize(
    ("column", "stored", "says"),
    [
        ("model", "another-model", r"from another-model \("),
        # The model's own revision alone: what a chatseek that embedded stamped units stored.
        ("revision", "", "units as an older chatseek gave them; this one gives them unstamped"),
        ("revision", "another-file", "from revision another-file of"),
    ],
    ids=["another model", "an older passage form", "another model file"],
)
async def test_vectors_of_another_space_refuse_dense_search_until_reembed(
    stack: tuple[Any, Path], column: str, stored: str, says: str
) -> None:
    stub, home = stack
    await _index(stub)
    conn = db.connect(home / "data" / "vector.db", vec=True)
    space = current_space(conn)
    assert space is not None and space.identity.revision.endswith(f"+{PASSAGE_FORM}")
    stored = stored or space.identity.revision.removesuffix(f"+{PASSAGE_FORM}")
    with db.transaction(conn):
        conn.execute(f"UPDATE spaces SET {column} = ?", (stored,))
    conn.close()
    with pytest.raises(errors.EmbeddingSpaceMismatch, match=says) as got:
        await call(stub.Knn, pb.KnnRequest(query="bank", k=2))
    assert "--reembed" in got.value.hint
    with pytest.raises(errors.EmbeddingSpaceMismatch):
        await _index(stub)  # nothing is written into the stored space either
    assert (await _index(stub, reembed=True))["remaining"] == 0
    reply = await call(stub.Knn, pb.KnnRequest(query="bank account", k=1))
    assert reply.neighbours[0].unit_id == 1


QUOTING = "[2024-06-02 08:00] Eve: visas\n[2024-06-03 09:30] Fay: quoted [2024-01-01 00:00]"


async def test_the_embedder_reads_each_units_lines_without_their_time_stamps(
    tmp_path: Path,
) -> None:
    async with _embed_serving(tmp_path) as settings:
        deps = vector_server.open_deps(settings)
        recording = _CountingEmbed(deps.worker._embed)
        deps.worker._embed = recording  # type: ignore[assignment]
        async with serving(vector_server.create_server(settings, deps)) as addr:
            await asyncio.wait_for(deps.worker.waiting.wait(), timeout=30)
            async with grpc.aio.insecure_channel(addr) as channel:
                stub = vector_service_pb2_grpc.VectorServiceStub(channel)
                _write_units(settings.db_path("unitize"), {5: QUOTING})
                assert (await _index(stub))["remaining"] == 0
                reply = await call(stub.Knn, pb.KnnRequest(query="bank account", k=1))
                assert reply.neighbours[0].unit_id == 1
    assert recording.passages[0] == (
        "Ann: how do I open a bank account without a residence permit\n2024 may май 1"
    )
    assert len(recording.passages) == len(TEXTS) + 1
    # A stamp a message quotes is its text; only the stamp that starts a line is left out.
    assert recording.passages[-1] == (
        "Eve: visas\nFay: quoted [2024-01-01 00:00]\n2024 june июнь 2 3"
    )


async def test_a_deleted_unit_loses_its_vector_and_unshared_cache_entry(
    stack: tuple[Any, Path],
) -> None:
    stub, home = stack
    await _index(stub)
    conn = db.connect(home / "data" / "vector.db", vec=True)
    db.attach_readonly(conn, home / "data" / "unitize.db", "unitize")
    with db.transaction(conn):
        remove_unit(conn, 2)
    counts = conn.execute(
        "SELECT (SELECT COUNT(*) FROM embedded_units), (SELECT COUNT(*) FROM vector_cache)"
    ).fetchone()
    assert tuple(counts) == (3, 3)
    conn.close()
    reply = await call(stub.Knn, pb.KnnRequest(query="hike waterfall bridge", k=4))
    assert 2 not in {n.unit_id for n in reply.neighbours}


async def test_a_pass_over_many_batches_embeds_every_unit_once_with_progress(
    stack: tuple[Any, Path],
) -> None:
    stub, home = stack
    await _index(stub)
    many = {
        100 + i: f"[2024-06-01 10:00] Eve: note number {i} about topic {i % 37}" for i in range(700)
    }
    _write_units(home / "data" / "unitize.db", many, chat_id=-100777)
    done: list[int] = []
    result: dict[str, Any] = {}
    async for response in stub.IndexUnits(pb.IndexUnitsRequest(), timeout=60):
        if response.event.WhichOneof("event") == "embed":
            result = to_json(response.event.embed)
        else:
            done.append(response.event.progress.done)
    assert result == {
        "embedded": len(many),
        "cached": 0,
        "skipped": 0,
        "remaining": 0,
    }
    assert len(done) > 2 and done == sorted(done) and done[-1] == len(many)
    conn = db.connect(home / "data" / "vector.db", vec=True)
    counts = conn.execute(
        "SELECT (SELECT COUNT(*) FROM embedded_units), (SELECT COUNT(*) FROM vec_1),"
        " (SELECT COUNT(*) FROM vbit_1), (SELECT COUNT(*) FROM vector_cache)"
    ).fetchone()
    conn.close()
    assert tuple(counts) == (len(TEXTS) + len(many),) * 4
    reply = await call(stub.Knn, pb.KnnRequest(query="note number 523 about topic 5", k=1))
    assert reply.neighbours[0].unit_id == 623


async def test_the_eta_is_the_text_of_the_queued_and_not_yet_queued_units(
    tmp_path: Path,
) -> None:
    """The background loop sleeps after its first pass (60 s poll): 300 new units wait in
    unitize's feed, then in the queue; either way the ETA is their text at the recent pace."""
    async with _embed_serving(tmp_path) as settings:
        deps = vector_server.open_deps(settings)
        async with serving(vector_server.create_server(settings, deps)) as addr:
            await asyncio.wait_for(deps.worker.waiting.wait(), timeout=30)
            async with grpc.aio.insecure_channel(addr) as channel:
                stub = vector_service_pb2_grpc.VectorServiceStub(channel)

                async def status() -> dict[str, Any]:
                    return to_json((await call(stub.EmbedStatus, pb.EmbedStatusRequest())).result)

                first = await status()
                assert (first["total_pending"], first["not_queued"], first["eta_s"]) == (0, 0, 0)
                many = {200 + i: f"[2024-06-02 10:00] Fay: line {i} on ferries" for i in range(300)}
                _write_units(tmp_path / "data" / "unitize.db", many, chat_id=-100778)
                pace = deps.worker.rate.chars_per_s()
                assert pace is not None
                expected = sum(map(len, many.values())) / pace
                waiting = await status()
                assert (waiting["total_pending"], waiting["not_queued"]) == (0, len(many))
                assert waiting["eta_s"] == pytest.approx(expected, abs=0.1)
                await deps.worker.follow_feed()
                queued = await status()
                assert (queued["total_pending"], queued["not_queued"]) == (len(many), 0)
                assert queued["eta_s"] == pytest.approx(expected, abs=0.1)
                await _index(stub)
                done = await status()
                assert (done["total_pending"], done["not_queued"], done["eta_s"]) == (0, 0, 0)


async def test_a_unit_re_cut_while_it_was_embedded_gets_its_new_text_in_the_same_pass(
    stack: tuple[Any, Path],
) -> None:
    stub, home = stack
    await _index(stub)
    _write_units(home / "data" / "unitize.db", {2: "first text about a ferry timetable"})
    conn = db.connect(home / "data" / "vector.db", vec=True)
    db.attach_readonly(conn, home / "data" / "unitize.db", "unitize")
    while apply_unit_feed(conn):
        pass
    space = current_space(conn)
    assert space is not None
    taken = take_pending(conn, space, 10)
    assert [u.unit_id for u in taken] == [2]
    _write_units(home / "data" / "unitize.db", {2: "second text about a mountain railway"})
    stale = [(taken[0], np.ones(space.identity.dim, dtype="<f4"))]
    assert store_vectors(conn, space, stale) == 0
    assert conn.execute("SELECT COUNT(*) FROM pending_units").fetchone()[0] == 1
    conn.close()
    report = await _index(stub)
    assert report["remaining"] == 0
    reply = await call(stub.Knn, pb.KnnRequest(query="mountain railway", k=1))
    assert reply.neighbours[0].unit_id == 2


class _CountingEmbed:
    """The real embed service's stub, counting the Embed calls that reach it; ``fail_first``
    makes the first one fail the way an unreachable embed service does."""

    def __init__(self, stub: Any, fail_first: bool = False) -> None:
        self._stub = stub
        self.ListModels = stub.ListModels
        self.calls = 0
        self.passages: list[str] = []
        self._fail = fail_first

    async def Embed(self, request: Any, **kwargs: Any) -> Any:  # noqa: N802 - the RPC's name
        from chatseek.embed.v1 import embed_service_pb2

        self.calls += 1
        if request.role == embed_service_pb2.ROLE_PASSAGE:
            self.passages.extend(request.texts)
        if self._fail:
            self._fail = False
            raise errors.Unavailable("embed is restarting")
        return await self._stub.Embed(request, **kwargs)


async def test_a_query_vector_is_embedded_once_for_concurrent_and_repeated_askers(
    tmp_path: Path,
) -> None:
    from chatseek.embed.v1 import embed_service_pb2, embed_service_pb2_grpc
    from chatseek_vector.worker import Worker

    embed_settings = temp_settings(tmp_path, "embed")
    async with (
        serving(
            embed_server.create_server(embed_settings, embed_server.load_models(embed_settings))
        ) as embed_addr,
        grpc.aio.insecure_channel(embed_addr) as channel,
    ):
        stub = embed_service_pb2_grpc.EmbedServiceStub(channel)
        counting = _CountingEmbed(stub)
        worker = Worker(db.ThreadConnections(tmp_path / "vector.db"), counting, 60.0)  # type: ignore[arg-type]
        identity, _ = await worker.identity()
        first, second = await asyncio.gather(
            worker.embed_query(identity, "bank account"),
            worker.embed_query(identity, "bank account"),
        )
        again = await worker.embed_query(identity, "bank account")
        assert counting.calls == 1
        direct = await worker.embed_texts(["bank account"], embed_service_pb2.ROLE_QUERY)
        assert np.array_equal(first, direct[0]) and np.array_equal(second, first)
        assert np.array_equal(again, first)
        await worker.embed_query(identity, "waterfall hike")
        assert counting.calls == 3  # another question (and the direct call above)

        failing = _CountingEmbed(stub, fail_first=True)
        worker = Worker(db.ThreadConnections(tmp_path / "vector.db"), failing, 60.0)  # type: ignore[arg-type]
        with pytest.raises(errors.Unavailable):
            await worker.embed_query(identity, "bank account")
        vector = await worker.embed_query(identity, "bank account")  # the failure was not kept
        assert failing.calls == 2
        assert np.array_equal(vector, first)


async def test_only_the_workers_threads_write_and_queries_read_through_a_read_only_pool(
    tmp_path: Path,
) -> None:
    async with _embed_serving(tmp_path) as settings:
        deps = vector_server.open_deps(settings)
        writers: set[str] = set()
        get = deps.pool.get

        def recorded() -> db.Connection:
            writers.add(threading.current_thread().name)
            return get()

        deps.pool.get = recorded  # type: ignore[method-assign]
        async with serving(vector_server.create_server(settings, deps)) as addr:
            await asyncio.wait_for(deps.worker.waiting.wait(), timeout=30)
            async with grpc.aio.insecure_channel(addr) as channel:
                stub = vector_service_pb2_grpc.VectorServiceStub(channel)
                _write_units(settings.db_path("unitize"), {5: "a new unit about visas"})
                assert (await _index(stub))["remaining"] == 0
                for question in ("bank account", "visas", "waterfall hike"):
                    await call(stub.Knn, pb.KnnRequest(query=question, k=2))
                await call(stub.EmbedStatus, pb.EmbedStatusRequest())
                await call(stub.GetStatus, pb.GetStatusRequest())
            query = deps.reads.get()
            assert -query.execute("PRAGMA cache_size").fetchone()[0] == db.QUERY_CACHE_SIZE_KIB
            with pytest.raises(sqlean.OperationalError, match="readonly"):
                query.execute("DELETE FROM embedded_units")
    assert writers
    assert all(name.startswith("vector-embed") for name in writers), writers
