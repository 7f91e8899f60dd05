"""KNN over 384-d vectors: the exact path, the quantised path and the numpy floor, same run.

For each size and each vector set (``clustered``: MiniLM-like; ``gaussian``: the worst case for
sign bits) the vectors are written the way ``chatseek_vector.index.store_vectors`` writes them
(float vec0, sign-bit vec0, ``embedded_units``, ``vector_cache``), then every query runs through
``chatseek_vector.knn.knn`` on the exact path, on the quantised path (warm; the one-off load of
the codes is reported apart), through the quantised path as it was before this benchmark
(sqlite-vec Hamming KNN with 8× oversampling, rescored through vec0) and as a numpy
matrix-vector scan with ``argpartition`` (the memory-bandwidth floor). Recall@10 of each
quantised path is measured against the exact one; a hit whose exact cosine ties the 10th counts.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench import vectors
from bench.measure import latency, ratio, timed

__all__ = ["SIZES", "knn_section"]

SIZES = {"10k": [10_000], "100k": [100_000], "1m": [100_000, 1_000_000]}
# The gaussian set is the worst case for sign bits, shown and not judged: it runs up to this
# size only, since a 1M set takes about four minutes of the bench's 45.
UNJUDGED_UP_TO = 100_000
QUERIES = 100
# Above this many vectors a query through the exact and the previous path costs most of a
# second, so the larger sets run half the queries (recall@10 still rests on 500 hits:
# 50 queries × k 10).
FEWER_QUERIES_ABOVE = 100_000
K = 10
WRITE_CHUNK = 20_000
OLD_OVERSAMPLE = 8
TIE_EPSILON = 1e-5
COLUMNS = "(unit_id, chat_id, embedding, start_date, kind, account)"
CHATS = 10
SETS: dict[str, Callable[[int, int], np.ndarray]] = {
    "clustered": vectors.clustered,
    "gaussian": vectors.gaussian,
}


def _write(conn: Any, space_id: int, matrix: np.ndarray) -> None:
    from chatseek_core import db

    for start in range(0, len(matrix), WRITE_CHUNK):
        stop = min(len(matrix), start + WRITE_CHUNK)
        rows = [
            (i, i % CHATS, matrix[i].tobytes(), 1_704_067_200 + i, "window", "default")
            for i in range(start, stop)
        ]
        with db.transaction(conn):
            conn.executemany(
                f"INSERT INTO vec_{space_id} {COLUMNS} VALUES (?, ?, ?, ?, ?, ?)", rows
            )
            conn.executemany(
                f"INSERT INTO vbit_{space_id} {COLUMNS}"
                " VALUES (?, ?, vec_quantize_binary(?), ?, ?, ?)",
                rows,
            )
            conn.executemany(
                "INSERT INTO embedded_units"
                " (space_id, unit_id, account, chat_id, kind, content_hash)"
                " VALUES (?, ?, 'default', ?, 'window', ?)",
                [(space_id, r[0], r[1], f"h{r[0]}") for r in rows],
            )
            conn.executemany(
                "INSERT INTO vector_cache (space_id, content_hash, vector) VALUES (?, ?, ?)",
                [(space_id, f"h{r[0]}", r[2]) for r in rows],
            )


def _old_quantised(conn: Any, space_id: int, blob: bytes, k: int) -> list[tuple[int, float]]:
    """The quantised path before this benchmark: Hamming KNN in vec0, rescored through vec0."""
    candidates = [
        int(r[0])
        for r in conn.execute(
            f"SELECT unit_id FROM vbit_{space_id}"
            " WHERE embedding MATCH vec_quantize_binary(?) AND k = ?",
            [blob, k * OLD_OVERSAMPLE],
        )
    ]
    marks = ",".join("?" for _ in candidates)
    rows = conn.execute(
        f"SELECT unit_id, vec_distance_cosine(embedding, ?) FROM vec_{space_id}"
        f" WHERE unit_id IN ({marks})",
        [blob, *candidates],
    ).fetchall()
    return sorted(((int(r[0]), 1.0 - float(r[1])) for r in rows), key=lambda t: -t[1])[:k]


def _recall(found: list[float], exact: list[float]) -> float:
    tenth = exact[-1]
    return sum(1 for cos in found if cos >= tenth - TIE_EPSILON) / len(exact)


def _one(size: int, name: str, progress: Callable[[str], None]) -> dict[str, Any]:
    from chatseek_core import db
    from chatseek_vector import knn
    from chatseek_vector.schema import MIGRATIONS
    from chatseek_vector.spaces import Identity, create_space

    make = SETS[name]
    count = QUERIES if size <= FEWER_QUERIES_ABOVE else QUERIES // 2
    data = make(size + count, size)
    queries, matrix = data[:count], np.ascontiguousarray(data[count:])
    del data
    with tempfile.TemporaryDirectory(prefix="chatseek-knn-") as tmp:
        conn = db.connect(Path(tmp) / "vector.db", vec=True)
        db.migrate(conn, "vector", MIGRATIONS)
        with db.transaction(conn):
            space = create_space(conn, Identity(f"bench-{name}", "1", vectors.DIM, True))
        write_s, _ = timed(lambda: _write(conn, space.space_id, matrix))
        flt = knn.KnnFilter()
        exact_t, exact_found = [], []
        for q in queries:
            took, found = timed(partial(knn.knn, conn, space, q, flt, K, quantise_above=10**12))
            exact_t.append(took)
            exact_found.append([cos for _, cos, _ in found])
        load_s, _ = timed(lambda: knn.knn(conn, space, queries[0], flt, K, quantise_above=0))
        quant_t, quant_recall = [], []
        for q, exact in zip(queries, exact_found, strict=True):
            took, found = timed(partial(knn.knn, conn, space, q, flt, K, quantise_above=0))
            quant_t.append(took)
            quant_recall.append(_recall([cos for _, cos, _ in found], exact))
        old_t, old_recall = [], []
        for q, exact in zip(queries, exact_found, strict=True):
            blob = np.ascontiguousarray(q, dtype="<f4").tobytes()
            took, old = timed(partial(_old_quantised, conn, space.space_id, blob, K))
            old_t.append(took)
            old_recall.append(_recall([cos for _, cos in old], exact))
        numpy_t = []
        for q in queries:

            def scan(q: np.ndarray = q) -> np.ndarray:
                scores = matrix @ q
                top = np.argpartition(-scores, K)[:K]
                return top[np.argsort(-scores[top])]

            numpy_t.append(timed(scan)[0])
        size_mib = round((Path(tmp) / "vector.db").stat().st_size / 2**20, 1)
        conn.close()
    entry: dict[str, Any] = {
        "vectors": size,
        "queries": count,
        "write_s": round(write_s, 2),
        "vectors_per_s_written": round(size / write_s),
        "db_mib": size_mib,
        "exact": latency(exact_t),
        "quantised": latency(quant_t),
        "quantised_codes_load_s": round(load_s, 2),
        "quantised_recall_at_10": round(float(np.mean(quant_recall)), 4),
        "quantised_recall_min": round(float(np.min(quant_recall)), 2),
        "previous_quantised": latency(old_t),
        "previous_quantised_recall_at_10": round(float(np.mean(old_recall)), 4),
        "numpy_scan": latency(numpy_t),
    }
    floor = entry["numpy_scan"]["p50_ms"]
    entry["quantised_over_numpy"] = ratio(entry["quantised"]["p50_ms"], floor, 2)
    entry["exact_over_numpy"] = ratio(entry["exact"]["p50_ms"], floor, 2)
    entry["previous_quantised_over_numpy"] = ratio(entry["previous_quantised"]["p50_ms"], floor, 2)
    entry["quantised_over_exact"] = ratio(entry["quantised"]["p50_ms"], entry["exact"]["p50_ms"], 3)
    progress(
        f"knn {name} {size}: exact p50 {entry['exact']['p50_ms']} ms, quantised"
        f" {entry['quantised']['p50_ms']} ms (recall {entry['quantised_recall_at_10']}),"
        f" numpy {floor} ms"
    )
    return entry


def knn_section(scale: str, progress: Callable[[str], None]) -> dict[str, Any]:
    """``{set: {size: figures}}`` for the sizes of ``scale``."""
    from chatseek_vector import knn

    out: dict[str, Any] = {
        "k": K,
        "queries": QUERIES,
        "budgets": {
            "quantise_above": knn.QUANTISE_ABOVE,
            "shortlist": f"max({knn.SHORTLIST_MIN}, scope / {knn.SHORTLIST_DIVISOR})",
            "rescore": f"clamp(scope / {knn.RESCORE_DIVISOR}, {knn.RESCORE_MIN},"
            f" {knn.RESCORE_MAX}), at least {knn.RESCORE_PER_K} × k",
        },
    }
    for name in SETS:
        sizes = [s for s in SIZES[scale] if name == "clustered" or s <= UNJUDGED_UP_TO]
        out[name] = {str(size): _one(size, name, progress) for size in sizes}
    return out
