"""Nearest units to a query vector, with chat, date, kind and account filters inside the scan.

Exact search asks the float vec0 table (cosine, partitioned by chat, so a few chats scan only
their partitions). Above ``QUANTISE_ABOVE`` vectors in scope, a first pass over the sign bits
(Hamming distance) over-fetches ``OVERSAMPLE × k`` candidates, which are rescored exactly with
their float vectors. Returned scores are always exact cosine similarities.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from chatseek_core.db import Connection
from chatseek_vector.spaces import Space, bit_table, float_table

__all__ = ["MAX_K", "OVERSAMPLE", "QUANTISE_ABOVE", "KnnFilter", "knn", "scope_size"]

QUANTISE_ABOVE = 200_000
OVERSAMPLE = 8
MAX_K = 4096
CURRENT_CHUNKS_OVERFETCH = 4


@dataclass(frozen=True)
class KnnFilter:
    """What a KNN query is restricted to; empty tuples and zero bounds mean no restriction."""

    accounts: tuple[str, ...] = ()
    chat_ids: tuple[int, ...] = ()
    since: int = 0
    until: int = 0
    kinds: tuple[str, ...] = ()
    current_chunks_only: bool = False


def _where(flt: KnnFilter) -> tuple[str, list[object]]:
    clauses: list[str] = []
    params: list[object] = []
    if flt.chat_ids:
        clauses.append(f"chat_id IN ({','.join('?' for _ in flt.chat_ids)})")
        params.extend(flt.chat_ids)
    if flt.kinds:
        clauses.append(f"kind IN ({','.join('?' for _ in flt.kinds)})")
        params.extend(flt.kinds)
    if flt.accounts:
        clauses.append(f"account IN ({','.join('?' for _ in flt.accounts)})")
        params.extend(flt.accounts)
    if flt.since:
        clauses.append("start_date >= ?")
        params.append(flt.since)
    if flt.until:
        clauses.append("start_date <= ?")
        params.append(flt.until)
    return "".join(f" AND {c}" for c in clauses), params


def scope_size(conn: Connection, space: Space, flt: KnnFilter) -> int:
    """How many embedded units the filter leaves (chat, account and kind only)."""
    clauses = ["space_id = ?"]
    params: list[object] = [space.space_id]
    if flt.chat_ids:
        clauses.append(f"chat_id IN ({','.join('?' for _ in flt.chat_ids)})")
        params.extend(flt.chat_ids)
    if flt.kinds:
        clauses.append(f"kind IN ({','.join('?' for _ in flt.kinds)})")
        params.extend(flt.kinds)
    if flt.accounts:
        clauses.append(f"account IN ({','.join('?' for _ in flt.accounts)})")
        params.extend(flt.accounts)
    row = conn.execute(
        f"SELECT COUNT(*) FROM embedded_units WHERE {' AND '.join(clauses)}", params
    ).fetchone()
    return int(row[0])


def _exact(
    conn: Connection, space: Space, blob: bytes, flt: KnnFilter, k: int
) -> list[tuple[int, float, int]]:
    where, params = _where(flt)
    rows = conn.execute(
        f"SELECT unit_id, distance, chat_id FROM {float_table(space.space_id)}"
        f" WHERE embedding MATCH ? AND k = ?{where} ORDER BY distance",
        [blob, k, *params],
    ).fetchall()
    return [(int(r[0]), 1.0 - float(r[1]), int(r[2])) for r in rows]


def _quantised(
    conn: Connection, space: Space, blob: bytes, flt: KnnFilter, k: int
) -> list[tuple[int, float, int]]:
    where, params = _where(flt)
    wide = min(MAX_K, k * OVERSAMPLE)
    candidates = [
        int(r[0])
        for r in conn.execute(
            f"SELECT unit_id FROM {bit_table(space.space_id)}"
            f" WHERE embedding MATCH vec_quantize_binary(?) AND k = ?{where}",
            [blob, wide, *params],
        )
    ]
    if not candidates:
        return []
    marks = ",".join("?" for _ in candidates)
    rows = conn.execute(
        f"SELECT unit_id, vec_distance_cosine(embedding, ?), chat_id"
        f" FROM {float_table(space.space_id)} WHERE unit_id IN ({marks})",
        [blob, *candidates],
    ).fetchall()
    scored = sorted(((int(r[0]), 1.0 - float(r[1]), int(r[2])) for r in rows), key=lambda t: -t[1])
    return scored[:k]


def _current_chunks(conn: Connection, found: Sequence[tuple[int, float, int]]) -> set[int]:
    ids = [unit_id for unit_id, _, _ in found]
    if not ids:
        return set()
    marks = ",".join("?" for _ in ids)
    return {
        int(r[0])
        for r in conn.execute(
            "SELECT u.unit_id FROM unitize.units u JOIN unitize.current_builds cb"
            " ON cb.account = u.account AND cb.chat_id = u.chat_id AND cb.build_id = u.build_id"
            f" WHERE u.unit_id IN ({marks})",
            ids,
        )
    }


def knn(
    conn: Connection,
    space: Space,
    vector: np.ndarray,
    flt: KnnFilter,
    k: int,
    *,
    quantise_above: int = QUANTISE_ABOVE,
) -> list[tuple[int, float, int]]:
    """``(unit_id, cosine, chat_id)`` of the ``k`` nearest units, best first."""
    k = max(1, min(MAX_K, k))
    blob = np.ascontiguousarray(vector, dtype="<f4").tobytes()
    fetch = min(MAX_K, k * CURRENT_CHUNKS_OVERFETCH) if flt.current_chunks_only else k
    if scope_size(conn, space, flt) > quantise_above:
        found = _quantised(conn, space, blob, flt, fetch)
    else:
        found = _exact(conn, space, blob, flt, fetch)
    if flt.current_chunks_only:
        keep = _current_chunks(conn, found)
        found = [f for f in found if f[0] in keep]
    return found[:k]
