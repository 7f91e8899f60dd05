"""The quantised KNN path: recall against the exact path, filters, and keeping up with writes.

Quality tests, not timing tests: the vectors mimic all-MiniLM-L6-v2 embeddings of chat text
(a large shared component, topic clusters of Zipf-distributed sizes, a decaying spectrum).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from chatseek_core import db
from chatseek_vector import knn
from chatseek_vector.index import remove_unit
from chatseek_vector.schema import MIGRATIONS
from chatseek_vector.spaces import Identity, Space, create_space, drop_space

DIM = 384
CHATS = 10
BASE_DATE = 1_704_067_200
COLUMNS = "(unit_id, chat_id, embedding, start_date, kind, account)"


def clustered_vectors(n: int, seed: int) -> np.ndarray:
    """Unit vectors shaped like MiniLM embeddings of chat messages (see the module docstring).

    Calibrated on MiniLM embeddings of 6,000 ``bench.generate`` texts: norm of the mean vector
    0.57, mean pairwise cosine 0.33, median cosine of the nearest neighbour 0.90 and of the 10th
    0.85 (these give 0.57, 0.32, 0.90 and 0.84).
    """
    rng = np.random.default_rng(seed)
    shared = rng.standard_normal(DIM)
    shared *= 0.8 / np.linalg.norm(shared)
    spectrum = np.arange(1, DIM + 1, dtype=np.float64) ** -0.75
    spectrum /= np.linalg.norm(spectrum)
    basis, _ = np.linalg.qr(rng.standard_normal((DIM, DIM)))
    clusters = max(8, n // 40)
    sizes = 1.0 / np.arange(1, clusters + 1) ** 0.8
    centres = shared + (rng.standard_normal((clusters, DIM)) * spectrum) @ basis.T
    member = rng.choice(clusters, size=n, p=sizes / sizes.sum())
    noise = (rng.standard_normal((n, DIM)) * spectrum * 0.8) @ basis.T
    out = (centres[member] + noise).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def random_vectors(n: int, seed: int) -> np.ndarray:
    """Isotropic Gaussian unit vectors: the worst case for sign bits."""
    out = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def _store(
    conn: db.Connection,
    space: Space,
    vectors: np.ndarray,
    first_id: int = 0,
    kind: str | None = None,
) -> None:
    """Write vectors as ``index.store_vectors`` does (float, bits, bookkeeping, cache)."""
    rows = [
        (
            first_id + i,
            (first_id + i) % CHATS,
            vectors[i].tobytes(),
            BASE_DATE + (first_id + i) * 60,
            kind or ("window" if i % 4 else "thread"),
            "default",
        )
        for i in range(len(vectors))
    ]
    sid = space.space_id
    with db.transaction(conn):
        conn.executemany(f"INSERT INTO vec_{sid} {COLUMNS} VALUES (?, ?, ?, ?, ?, ?)", rows)
        conn.executemany(
            f"INSERT INTO vbit_{sid} {COLUMNS} VALUES (?, ?, vec_quantize_binary(?), ?, ?, ?)",
            rows,
        )
        conn.executemany(
            "INSERT INTO embedded_units (space_id, unit_id, account, chat_id, kind, content_hash)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(sid, r[0], r[5], r[1], r[4], f"h{r[0]}") for r in rows],
        )
        conn.executemany(
            "INSERT INTO vector_cache (space_id, content_hash, vector) VALUES (?, ?, ?)",
            [(sid, f"h{r[0]}", r[2]) for r in rows],
        )


@pytest.fixture
def store(tmp_path: Path) -> tuple[db.Connection, Space]:
    """A migrated vector.db file (the codes cache is per file) with an empty 384-d space."""
    conn = db.connect(tmp_path / "vector.db", vec=True)
    db.migrate(conn, "vector", MIGRATIONS)
    with db.transaction(conn):
        space = create_space(conn, Identity("mimic-minilm", "1", DIM, True))
    return conn, space


def _recall(
    conn: db.Connection,
    space: Space,
    queries: np.ndarray,
    flt: knn.KnnFilter,
    **budget: int,
) -> float:
    """Mean recall@10 of the quantised path; a hit tied with the 10th exact cosine counts."""
    scores = []
    for query in queries:
        exact = knn.knn(conn, space, query, flt, 10, quantise_above=10**9)
        quick = knn.knn(conn, space, query, flt, 10, quantise_above=0, **budget)
        tenth = exact[-1][1]
        scores.append(sum(1 for _, cos, _ in quick if cos >= tenth - 1e-5) / len(exact))
    return float(np.mean(scores))


def test_quantised_recall_at_10_is_high_on_minilm_like_vectors(
    store: tuple[db.Connection, Space],
) -> None:
    conn, space = store
    vectors = clustered_vectors(20_030, seed=5)
    _store(conn, space, vectors[30:])
    # Budgets in the same proportion to the scope as the defaults at 1M vectors.
    recall = _recall(conn, space, vectors[:30], knn.KnnFilter(), shortlist=400, rescore=60)
    assert recall >= 0.95


def test_quantised_path_keeps_most_neighbours_of_random_vectors(
    store: tuple[db.Connection, Space],
) -> None:
    conn, space = store
    vectors = random_vectors(20_020, seed=6)
    _store(conn, space, vectors[20:])
    recall = _recall(conn, space, vectors[:20], knn.KnnFilter(), shortlist=2_000, rescore=400)
    assert recall >= 0.8


def test_quantised_hits_carry_exact_cosines_best_first(store: tuple[db.Connection, Space]) -> None:
    conn, space = store
    vectors = clustered_vectors(3_001, seed=7)
    _store(conn, space, vectors[1:])
    found = knn.knn(conn, space, vectors[0], knn.KnnFilter(), 10, quantise_above=0)
    cosines = [cos for _, cos, _ in found]
    assert cosines == sorted(cosines, reverse=True)
    for unit_id, cos, chat_id in found:
        assert chat_id == unit_id % CHATS
        assert cos == pytest.approx(float(vectors[1 + unit_id] @ vectors[0]), abs=1e-5)


def test_quantised_path_applies_chat_kind_and_date_filters(
    store: tuple[db.Connection, Space],
) -> None:
    conn, space = store
    vectors = clustered_vectors(5_001, seed=8)
    _store(conn, space, vectors[1:])
    since, until = BASE_DATE + 1_000 * 60, BASE_DATE + 3_000 * 60
    flt = knn.KnnFilter(chat_ids=(2, 5), kinds=("window",), since=since, until=until)
    found = knn.knn(conn, space, vectors[0], flt, 20, quantise_above=0)
    exact = knn.knn(conn, space, vectors[0], flt, 20, quantise_above=10**9)
    assert len(found) == 20
    for unit_id, _, chat_id in found:
        assert chat_id in (2, 5) and unit_id % 4 != 0
        assert since <= BASE_DATE + unit_id * 60 <= until
    assert [u for u, _, _ in found] == [u for u, _, _ in exact]


def test_quantised_path_sees_units_written_and_removed_after_its_first_query(
    store: tuple[db.Connection, Space],
) -> None:
    conn, space = store
    vectors = clustered_vectors(4_000, seed=9)
    _store(conn, space, vectors[:3_000])
    query = vectors[3_500]
    knn.knn(conn, space, query, knn.KnnFilter(), 10, quantise_above=0)  # loads the codes
    _store(conn, space, vectors[3_000:], first_id=3_000)
    found = knn.knn(conn, space, query, knn.KnnFilter(), 10, quantise_above=0)
    assert found[0][0] == 3_500
    with db.transaction(conn):
        remove_unit(conn, 3_500)
    found = knn.knn(conn, space, query, knn.KnnFilter(), 10, quantise_above=0)
    assert 3_500 not in {u for u, _, _ in found}
    exact = knn.knn(conn, space, query, knn.KnnFilter(), 10, quantise_above=10**9)
    assert [u for u, _, _ in found] == [u for u, _, _ in exact]


def test_a_dropped_and_recreated_space_is_searched_afresh(
    store: tuple[db.Connection, Space],
) -> None:
    conn, space = store
    first = clustered_vectors(2_000, seed=10)
    _store(conn, space, first)
    knn.knn(conn, space, first[0], knn.KnnFilter(), 5, quantise_above=0)
    with db.transaction(conn):
        drop_space(conn, space.space_id)
        space = create_space(conn, Identity("mimic-minilm", "2", DIM, True))
    second = clustered_vectors(2_000, seed=11)
    _store(conn, space, second)
    found = knn.knn(conn, space, second[7], knn.KnnFilter(), 5, quantise_above=0)
    assert found[0][0] == 7
    assert found[0][1] == pytest.approx(1.0, abs=1e-5)


def test_small_scopes_take_the_exact_path_by_default(store: tuple[db.Connection, Space]) -> None:
    conn, space = store
    vectors = random_vectors(1_001, seed=12)
    _store(conn, space, vectors[1:])
    assert knn.scope_size(conn, space, knn.KnnFilter()) < knn.QUANTISE_ABOVE
    found = knn.knn(conn, space, vectors[0], knn.KnnFilter(), 10)
    scores = vectors[1:] @ vectors[0]
    assert [u for u, _, _ in found] == [int(i) for i in np.argsort(-scores)[:10]]


def test_vector_changes_follow_inserts_updates_and_deletes(
    store: tuple[db.Connection, Space],
) -> None:
    conn, space = store
    _store(conn, space, random_vectors(3, seed=13))

    def log() -> list[tuple[int, int]]:
        return [
            (int(r[0]), int(r[1]))
            for r in conn.execute("SELECT seq, unit_id FROM vector_changes ORDER BY seq")
        ]

    assert [u for _, u in log()] == [0, 1, 2]
    with db.transaction(conn):
        conn.execute("UPDATE embedded_units SET content_hash = 'x' WHERE unit_id = 0")
        remove_unit(conn, 1)
    assert [u for _, u in log()] == [2, 0, 1]
    with db.transaction(conn):
        drop_space(conn, space.space_id)
    assert log() == []


def test_current_chunks_are_ranked_exactly_among_themselves(
    store: tuple[db.Connection, Space], tmp_path: Path
) -> None:
    """Chunk queries take the codes path; within a small scope it rescores every current chunk
    exactly, and chunks of a superseded build never answer."""
    from chatseek_unitize.schema import MIGRATIONS as UNITIZE_MIGRATIONS

    conn, space = store
    units, chunks = clustered_vectors(3_000, seed=11), clustered_vectors(300, seed=12)
    _store(conn, space, units)
    _store(conn, space, chunks, first_id=10_000, kind="conversation")
    unitize = db.connect(tmp_path / "unitize.db")
    db.migrate(unitize, "unitize", UNITIZE_MIGRATIONS)
    with db.transaction(unitize):
        for chat in range(CHATS):
            for build, state in ((2 * chat + 1, "superseded"), (2 * chat + 2, "complete")):
                unitize.execute(
                    "INSERT INTO conversation_builds (build_id, account, chat_id, state, scorer)"
                    " VALUES (?, 'default', ?, ?, 'rules')",
                    (build, chat, state),
                )
            unitize.execute(
                "INSERT INTO current_builds (account, chat_id, build_id) VALUES ('default', ?, ?)",
                (chat, 2 * chat + 2),
            )
        for i in range(len(chunks)):
            unit_id, chat = 10_000 + i, (10_000 + i) % CHATS
            unitize.execute(
                "INSERT INTO units (unit_id, account, chat_id, kind, key, build_id, first_msg_id,"
                " last_msg_id, start_date, end_date, msg_ids, senders, text, content_hash,"
                " recipe) VALUES (?, 'default', ?, 'conversation', ?, ?, 1, 1, 0, 0, '[1]',"
                " '[]', 'chunk', ?, 1)",
                (unit_id, chat, f"c:{unit_id}", 2 * chat + 1 + i % 2, f"h{unit_id}"),
            )
    unitize.close()
    db.attach_readonly(conn, tmp_path / "unitize.db", "unitize")
    current = [i for i in range(len(chunks)) if i % 2]  # build 2·chat + 2
    flt = knn.KnnFilter(kinds=("conversation",), current_chunks_only=True)
    for query in clustered_vectors(5, seed=13):
        found = knn.knn(conn, space, query, flt, 20)
        cosines = chunks[current] @ query / np.linalg.norm(query)
        best = np.argsort(-cosines)[:20]
        assert [u for u, _, _ in found] == [10_000 + current[i] for i in best]
        assert [c for _, c, _ in found] == pytest.approx(cosines[best].tolist(), abs=1e-5)


def _rows(codes: knn._Codes) -> list[tuple[int, int, str, str, int, bytes]]:
    """The live rows of ``codes`` by unit id: chat, kind and account by name, date, code."""
    kinds = {v: k for k, v in codes.kinds.items()}
    accounts = {v: k for k, v in codes.accounts.items()}
    live = np.flatnonzero(codes.alive[: codes.n])
    out = [
        (
            int(codes.unit_ids[r]),
            int(codes.chat_ids[r]),
            kinds[int(codes.kind[r])],
            accounts[int(codes.account[r])],
            int(codes.dates[r]),
            codes.codes[:, r].tobytes(),
        )
        for r in live
    ]
    return sorted(out)


def test_a_whole_load_holds_what_loading_unit_by_unit_gives(
    store: tuple[db.Connection, Space], monkeypatch: pytest.MonkeyPatch
) -> None:
    conn, space = store
    vectors = clustered_vectors(300, seed=12)
    # Written out of id order, with units of two accounts and a unit whose bits are stored
    # but which embedded_units does not list (so it is not embedded: it must be left out).
    _store(conn, space, vectors[150:], first_id=150)
    _store(conn, space, vectors[:150], kind="post")
    with db.transaction(conn):
        conn.execute(
            "UPDATE embedded_units SET account = 'work' WHERE space_id = ? AND unit_id % 3 = 0",
            (space.space_id,),
        )
        conn.execute(
            "DELETE FROM embedded_units WHERE space_id = ? AND unit_id = 77", (space.space_id,)
        )
    monkeypatch.setattr(knn, "LOAD_CHUNK", 7)  # many reads, and columns that grow
    whole = knn._Codes(DIM, 1)
    knn._add_units(conn, space, whole, None, expected=1)
    by_unit = knn._Codes(DIM, 1)
    ids = [u for u in range(300) if u != 77]
    for start in range(0, len(ids), 40):
        knn._add_units(conn, space, by_unit, ids[start : start + 40][::-1])
    rows = _rows(whole)
    assert rows == _rows(by_unit)
    assert [r[0] for r in rows] == ids
    bits = dict(conn.execute(f"SELECT unit_id, embedding FROM vbit_{space.space_id}").fetchall())
    for unit_id, chat_id, kind, account, date, code in rows:
        assert chat_id == unit_id % CHATS and date == BASE_DATE + unit_id * 60
        assert kind == ("post" if unit_id < 150 else "window" if unit_id % 4 != 2 else "thread")
        assert account == ("work" if unit_id % 3 == 0 else "default")
        assert code == bits[unit_id]
