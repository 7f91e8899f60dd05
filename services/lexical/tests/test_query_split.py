"""A relevance page scored in rowid ranges on several threads equals one scored whole.

The rich fixture's messages are split into ranges of a few rows each (``min_rows=1``), so every
range boundary falls among matches; a larger synthetic table checks the time budget in the
worker threads.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from chatseek_core import db
from chatseek_core.errors import QueryLimit
from chatseek_lexical import schema as lexical_schema
from chatseek_lexical.query import SearchRequest, search
from chatseek_lexical.query.limits import Deadline
from chatseek_lexical.query.split import Splitter, best_matches

from .conftest_query import RICH, build_store, ts

NOW = ts("2026-04-02T12:00:00Z")

# Queries ordered by relevance on the rich fixture: single words, AND, OR, phrases, patterns
# and fields beside words, some with many matches and some with one.
RELEVANCE = [
    "invoice",
    "alpha",
    "alpha beta",
    "alpha OR invoice OR a",
    "(alpha OR invoice) AND beta",
    '"invoice attached"',
    "inv*",
    "invoice AND NOT attached",
    "alpha AND from:bob",
    "invoice OR (alpha AND NOT kind:private)",
    "ищу квартиру",
    "gamma OR beta OR invoice",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[db.Connection, Path]]:
    directory = Path(tmp_path_factory.mktemp("split"))
    connection = build_store(directory, RICH)
    yield connection, directory / "lexical.db"
    connection.close()


@pytest.fixture(params=[2, 3, 4])
def splitter(
    request: pytest.FixtureRequest, store: tuple[db.Connection, Path]
) -> Iterator[Splitter]:
    split = Splitter(store[1], parts=request.param, min_rows=1)
    yield split
    split.close()


def _ranks(conn: db.Connection) -> list[str]:
    """The bm25 queries of ``RELEVANCE`` as the engine compiles them."""
    from chatseek_lexical.query.execute import prepare

    out = []
    for query in RELEVANCE:
        request = SearchRequest(query, now=NOW, limit=20)
        prepared = prepare(conn, request, Deadline(request.budgets.time_ms))
        rank = prepared.compiler.rank_query(prepared.tree.root)
        if rank:
            out.append(rank)
    return out


def test_the_ranges_cover_the_table_and_merge_to_its_own_order_and_scores(
    store: tuple[db.Connection, Path], splitter: Splitter
) -> None:
    conn, _ = store
    ranks = _ranks(conn)
    assert len(ranks) >= 8
    largest = 0
    for rank in ranks:
        whole = best_matches(conn, rank, None, 1000)
        largest = max(largest, len(whole))
        for top in (1, 2, 5, 1000):
            assert splitter.best(conn, rank, None, top, Deadline(2000)) == whole[:top]
        if len(whole) > 1:
            # A later page's lower bound: the second score, ties included.
            floor = whole[1][1]
            kept = [row for row in whole if row[1] >= floor]
            assert splitter.best(conn, rank, floor, 1000, Deadline(2000)) == kept
    assert largest >= 5  # some query's matches span every range


def test_below_the_split_size_the_whole_table_is_scored_on_the_callers_connection(
    store: tuple[db.Connection, Path],
) -> None:
    conn, path = store
    last = conn.execute("SELECT MAX(mid) FROM ingest.messages").fetchone()[0]
    split = Splitter(path, parts=3, min_rows=last + 1)
    try:
        rank = _ranks(conn)[0]
        assert split.best(conn, rank, None, 1000, Deadline(2000)) == best_matches(
            conn, rank, None, 1000
        )
        # No part went to a worker thread: none opened a connection.
        assert split._conns._all == []
    finally:
        split.close()


@pytest.mark.parametrize("query", RELEVANCE)
def test_a_search_with_a_splitter_returns_the_same_envelope(
    store: tuple[db.Connection, Path], splitter: Splitter, query: str
) -> None:
    conn, _ = store
    request = SearchRequest(query, now=NOW, limit=1000)
    alone = search(conn, request)
    split = search(conn, request, splitter=splitter)
    assert split.to_json() == alone.to_json()


@pytest.mark.parametrize(
    "query", ["alpha OR invoice OR a", "alpha beta", "gamma OR beta OR invoice"]
)
def test_pages_through_a_splitter_with_a_growing_pool_concatenate_to_the_whole(
    store: tuple[db.Connection, Path],
    splitter: Splitter,
    query: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from chatseek_lexical.query import execute

    conn, _ = store
    whole = search(conn, SearchRequest(query, now=NOW, limit=1000)).items
    assert len(whole) >= 2
    monkeypatch.setattr(execute, "POOL_MIN", 1)
    monkeypatch.setattr(execute, "POOL_FACTOR", 1)
    monkeypatch.setattr(execute, "POOL_GROWTH", 2)
    seen = []
    token = None
    while True:
        request = SearchRequest(query, now=NOW, limit=2, page_token=token)
        envelope = search(conn, request, splitter=splitter)
        assert envelope.query.order == "relevance"
        assert envelope.to_json() == search(conn, request).to_json()
        seen.extend(envelope.items)
        if not envelope.has_more:
            break
        token = envelope.next_page_token
    assert [i.locator for i in seen] == [i.locator for i in whole]


def test_a_request_splits_only_into_idle_scoring_threads(
    store: tuple[db.Connection, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    conn, path = store
    split = Splitter(path, parts=3, min_rows=1)
    handed: list[tuple[int | None, int | None]] = []
    part = split._part

    def recorded(
        rank: str, floor: float | None, top: int, span: tuple[int | None, int | None], left: int
    ) -> list[tuple[int, float]]:
        handed.append(span)
        return part(rank, floor, top, span, left)

    monkeypatch.setattr(split, "_part", recorded)
    try:
        rank = _ranks(conn)[0]
        whole = best_matches(conn, rank, None, 1000)
        assert split._idle is not None
        split._idle.acquire()
        split._idle.acquire()
        # Both scoring threads busy with other requests: scored alone, on the caller's conn.
        assert split.best(conn, rank, None, 1000, Deadline(2000)) == whole
        assert handed == []
        split._idle.release()
        # One idle: two ranges, the second on a scoring thread.
        assert split.best(conn, rank, None, 1000, Deadline(2000)) == whole
        assert len(handed) == 1 and handed[0][1] is None
        handed.clear()
        split._idle.release()
        # Both idle: three ranges, two of them handed out.
        assert split.best(conn, rank, None, 1000, Deadline(2000)) == whole
        assert len(handed) == 2 and handed[-1][1] is None
    finally:
        split.close()


def test_concurrent_requests_each_get_the_whole_tables_answer(
    store: tuple[db.Connection, Path], splitter: Splitter
) -> None:
    _, path = store
    ranks = _ranks(store[0])

    def ask(i: int) -> bool:
        conn = db.connect(path, readonly=True)
        db.attach_readonly(conn, path.parent / "ingest.db", "ingest")
        try:
            rank = ranks[i % len(ranks)]
            for _ in range(5):
                got = splitter.best(conn, rank, None, 1000, Deadline(5000))
                if got != best_matches(conn, rank, None, 1000):
                    return False
            return True
        finally:
            conn.close()

    with ThreadPoolExecutor(6) as pool:
        assert all(pool.map(ask, range(12)))


def _big_index(directory: Path, rows: int) -> tuple[db.Connection, Path]:
    """``rows`` messages that all hold "alpha", in lexical.db with a stand-in ingest.db."""
    ingest = db.connect(directory / "ingest.db")
    ingest.execute("CREATE TABLE messages (mid INTEGER PRIMARY KEY)")
    with db.transaction(ingest):
        ingest.executemany(
            "INSERT INTO messages (mid) VALUES (?)", ((i,) for i in range(1, rows + 1))
        )
    ingest.close()
    path = directory / "lexical.db"
    conn = db.connect(path)
    db.migrate(conn, lexical_schema.OWNER, lexical_schema.MIGRATIONS)
    with db.transaction(conn):
        conn.executemany(
            "INSERT INTO msg_fts (rowid, raw, stem) VALUES (?, ?, ?)",
            ((i, f"alpha beta w{i % 97}", "alpha beta") for i in range(1, rows + 1)),
        )
    db.attach_readonly(conn, directory / "ingest.db", "ingest")
    return conn, path


def test_a_part_on_a_worker_thread_keeps_to_the_time_budget(tmp_path: Path) -> None:
    conn, path = _big_index(tmp_path, 30_000)
    split = Splitter(path, parts=2, min_rows=1)
    try:
        # Enough budget: every part scores its range.
        assert len(split.best(conn, 'raw:"alpha"', None, 50_000, Deadline(60_000))) == 30_000
        # None left: the worker's part is interrupted and the request fails, whole.
        with pytest.raises(QueryLimit) as caught:
            split.best(conn, 'raw:"alpha"', None, 50_000, Deadline(0))
        assert caught.value.metadata["budget"] == "time_ms"
    finally:
        split.close()
        conn.close()


def test_parts_are_clamped_and_one_part_scores_on_the_callers_connection(tmp_path: Path) -> None:
    conn, path = _big_index(tmp_path, 10)
    made = [Splitter(path, parts=n, min_rows=1) for n in (0, 1, 2, 16)]
    try:
        assert [s.parts for s in made] == [1, 1, 2, 4]
        assert made[1].best(conn, 'raw:"alpha"', None, 5, Deadline(2000)) == best_matches(
            conn, 'raw:"alpha"', None, 5
        )
        assert made[1]._conns._all == []
    finally:
        for split in made:
            split.close()
        conn.close()
