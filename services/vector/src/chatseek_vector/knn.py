"""Nearest units to a query vector, with chat, date, kind and account filters inside the scan.

Exact search asks the float vec0 table (cosine, partitioned by chat, so a few chats scan only
their partitions). Above ``QUANTISE_ABOVE`` vectors in scope, and for the chunks of current
conversation builds (a small share of their chats' vectors, which vec0 would all scan), the
quantised path runs in three
stages over the sign bits that ``vbit_<space>`` stores: Hamming distance to every code in scope
keeps a shortlist; the query's float values against each shortlisted code's bits (an asymmetric
estimate, 1 bit for the stored side only) keep the rescore set; exact cosines of the stored
float vectors (``vector_cache``, else vec0) rank it. Budgets grow with ``k`` and with the scope.
Returned scores are always exact cosines.

The codes live in memory, once per process and (file, space), loaded on the first quantised
query and then kept in step through ``vector_changes`` (written by triggers): every query first
applies the changes since the last one. Rescoring re-reads each candidate's chat, kind and
account, so a code that is briefly stale can cost recall, never a wrong or unfiltered hit.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from chatseek_core import memory
from chatseek_core.db import Connection
from chatseek_vector.spaces import Space, bit_table, float_table

__all__ = [
    "MAX_K",
    "QUANTISE_ABOVE",
    "RESCORE_MAX",
    "RESCORE_MIN",
    "SHORTLIST_MIN",
    "KnnFilter",
    "knn",
    "scope_size",
]

QUANTISE_ABOVE = 200_000
MAX_K = 4096
CURRENT_CHUNKS_OVERFETCH = 4
# Hamming survivors: at least this many, and at least 1/SHORTLIST_DIVISOR of the scope.
SHORTLIST_MIN = 16_384
SHORTLIST_DIVISOR = 64
# Exact rescoring: 1/RESCORE_DIVISOR of the scope within [RESCORE_MIN, RESCORE_MAX], and at
# least RESCORE_PER_K per wanted neighbour.
RESCORE_MIN = 500
RESCORE_MAX = 2_000
RESCORE_DIVISOR = 200
RESCORE_PER_K = 20
CHUNK_RESCORE_PER_K = 5
# More pending changes than this share of the cached codes: reload instead of patching.
RELOAD_SHARE = 0.1
# Dead rows above this share of the cached rows: compact the arrays.
COMPACT_SHARE = 0.25
GROWTH = 1.5
# Rows read at a time while loading the codes (a chunk's rows are Python tuples: about 4 MiB).
LOAD_CHUNK = 16_384
NO_DISTANCE = np.iinfo(np.uint16).max
_BYTE_BITS = ((np.arange(256)[:, None] >> np.arange(8)) & 1).astype(np.float32)


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


# --- the in-memory sign codes ---


class _Codes:
    """Sign codes and filter columns of one space, in step with vector.db up to ``seq``.

    Rows ``[0, n)`` are used; a changed unit's old row is marked dead and its new one appended.
    Readers take ``snapshot()`` and never see rows appended after it; arrays are replaced, not
    resized, when they grow, so a snapshot stays valid.
    """

    codes: np.ndarray
    unit_ids: np.ndarray
    chat_ids: np.ndarray
    dates: np.ndarray
    kind: np.ndarray
    account: np.ndarray
    alive: np.ndarray

    def __init__(self, dim: int, capacity: int) -> None:
        self.words = -(-dim // 64)
        self.seq = 0
        self.n = 0
        self.dead = 0
        self.kinds: dict[str, int] = {}
        self.accounts: dict[str, int] = {}
        self._allocate(max(1024, capacity))

    def _allocate(self, capacity: int) -> None:
        old = self.n
        fresh = {
            "codes": np.zeros((self.words, capacity), dtype="<u8"),
            "unit_ids": np.zeros(capacity, dtype=np.int64),
            "chat_ids": np.zeros(capacity, dtype=np.int64),
            "dates": np.zeros(capacity, dtype=np.int64),
            "kind": np.zeros(capacity, dtype=np.int32),
            "account": np.zeros(capacity, dtype=np.int32),
            "alive": np.zeros(capacity, dtype=bool),
        }
        if old:
            for name, array in fresh.items():
                if name == "codes":
                    array[:, :old] = self.codes[:, :old]
                else:
                    array[:old] = getattr(self, name)[:old]
        self.codes = fresh["codes"]
        self.unit_ids = fresh["unit_ids"]
        self.chat_ids = fresh["chat_ids"]
        self.dates = fresh["dates"]
        self.kind = fresh["kind"]
        self.account = fresh["account"]
        self.alive = fresh["alive"]

    def label(self, table: dict[str, int], value: str) -> int:
        """The small integer standing for a kind or an account."""
        return table.setdefault(value, len(table))

    def append(
        self,
        unit_ids: np.ndarray,
        chat_ids: np.ndarray,
        kinds: np.ndarray,
        accounts: np.ndarray,
        dates: np.ndarray,
        codes: bytes,
    ) -> None:
        """Add rows; ``codes`` is their sign bits, ``dim / 8`` bytes each, concatenated."""
        count = len(unit_ids)
        if not count:
            return
        need = self.n + count
        if need > self.unit_ids.shape[0]:
            self._allocate(int(need * GROWTH) + 1024)
        start, end = self.n, need
        raw = np.frombuffer(codes, dtype=np.uint8).reshape(count, -1)
        padded = np.zeros((count, self.words * 8), dtype=np.uint8)
        padded[:, : raw.shape[1]] = raw
        self.codes[:, start:end] = padded.view("<u8").T
        self.unit_ids[start:end] = unit_ids
        self.chat_ids[start:end] = chat_ids
        self.kind[start:end] = kinds
        self.account[start:end] = accounts
        self.dates[start:end] = dates
        self.alive[start:end] = True
        self.n = end

    def forget(self, unit_ids: Sequence[int]) -> None:
        """Mark every row of ``unit_ids`` dead."""
        hit = np.flatnonzero(
            np.isin(self.unit_ids[: self.n], np.asarray(unit_ids, dtype=np.int64))
            & self.alive[: self.n]
        )
        self.alive[hit] = False
        self.dead += len(hit)

    def compact(self) -> None:
        """Drop dead rows (a copy: snapshots taken before stay valid)."""
        keep = np.flatnonzero(self.alive[: self.n])
        self.codes = np.ascontiguousarray(self.codes[:, keep])
        for name in ("unit_ids", "chat_ids", "dates", "kind", "account", "alive"):
            setattr(self, name, getattr(self, name)[keep].copy())
        self.n = len(keep)
        self.dead = 0
        self._allocate(int(self.n * GROWTH) + 1024)

    def snapshot(self) -> _Snapshot:
        """The first ``n`` rows, safe to read while another thread appends."""
        n = self.n
        return _Snapshot(
            codes=self.codes[:, :n],
            unit_ids=self.unit_ids[:n],
            chat_ids=self.chat_ids[:n],
            dates=self.dates[:n],
            kind=self.kind[:n],
            account=self.account[:n],
            alive=self.alive[:n],
            kinds=dict(self.kinds),
            accounts=dict(self.accounts),
        )


@dataclass(frozen=True)
class _Snapshot:
    codes: np.ndarray
    unit_ids: np.ndarray
    chat_ids: np.ndarray
    dates: np.ndarray
    kind: np.ndarray
    account: np.ndarray
    alive: np.ndarray
    kinds: dict[str, int]
    accounts: dict[str, int]

    def scope(self, flt: KnnFilter) -> np.ndarray:
        """Boolean mask of the live rows the filter leaves (dates included)."""
        mask = self.alive.copy()
        if flt.chat_ids:
            mask &= np.isin(self.chat_ids, np.asarray(flt.chat_ids, dtype=np.int64))
        if flt.kinds:
            labels = [self.kinds[k] for k in flt.kinds if k in self.kinds]
            mask &= np.isin(self.kind, np.asarray(labels, dtype=np.int32))
        if flt.accounts:
            labels = [self.accounts[a] for a in flt.accounts if a in self.accounts]
            mask &= np.isin(self.account, np.asarray(labels, dtype=np.int32))
        if flt.since:
            mask &= self.dates >= flt.since
        if flt.until:
            mask &= self.dates <= flt.until
        return mask


_registry: dict[tuple[str, int], _Codes] = {}
_registry_lock = threading.Lock()
_locks: dict[tuple[str, int], threading.Lock] = {}


def _database_file(conn: Connection) -> str:
    for row in conn.execute("PRAGMA database_list"):
        if row[1] == "main":
            return str(row[2] or "")
    return ""


def _changes_head(conn: Connection) -> int:
    row = conn.execute("SELECT MAX(seq) FROM vector_changes").fetchone()
    return int(row[0] or 0)


def _add_units(
    conn: Connection,
    space: Space,
    codes: _Codes,
    unit_ids: Sequence[int] | None,
    expected: int = 0,
) -> None:
    """Append the current rows of ``unit_ids`` (None: every embedded unit, about ``expected``
    of them) to ``codes``.

    ``embedded_units`` decides which units are in and their chat, kind and account; the bit
    table gives their codes and dates. Rows are read ``LOAD_CHUNK`` at a time, and the
    metadata is held once, as columns in unit id order (the table's key order, so a whole load
    sorts nothing): a load holds the codes and about 24 bytes a unit beside them.
    """
    if unit_ids is None:
        cursor = conn.execute(
            "SELECT unit_id, chat_id, kind, account FROM embedded_units WHERE space_id = ?"
            " ORDER BY unit_id",
            (space.space_id,),
        )
    else:
        cursor = conn.execute(
            "SELECT e.unit_id, e.chat_id, e.kind, e.account FROM json_each(?) j CROSS JOIN"
            " embedded_units e ON e.space_id = ? AND e.unit_id = j.value ORDER BY e.unit_id",
            (json.dumps(list(unit_ids)), space.space_id),
        )
    meta = _Meta(expected if unit_ids is None else len(unit_ids))
    for rows in iter(lambda: cursor.fetchmany(LOAD_CHUNK), []):
        meta.extend(codes, rows)
    if not meta.n:
        return
    meta_ids, chat_ids, kinds, accounts = meta.columns()
    del meta
    table = bit_table(space.space_id)
    if unit_ids is None:
        scan = conn.execute(f"SELECT unit_id, embedding, start_date FROM {table}")
        chunks = iter(lambda: scan.fetchmany(LOAD_CHUNK), [])
    else:
        point = f"SELECT unit_id, embedding, start_date FROM {table} WHERE unit_id = ?"
        found = [conn.execute(point, (int(u),)).fetchone() for u in meta_ids]
        chunks = iter([[r for r in found if r is not None]])
    for chunk in chunks:
        if not chunk:
            continue
        chunk_ids = np.fromiter((r[0] for r in chunk), dtype=np.int64, count=len(chunk))
        at = np.minimum(np.searchsorted(meta_ids, chunk_ids), len(meta_ids) - 1)
        known = np.flatnonzero(meta_ids[at] == chunk_ids)
        if not len(known):
            continue
        at = at[known]
        codes.append(
            chunk_ids[known],
            chat_ids[at],
            kinds[at],
            accounts[at],
            np.fromiter((chunk[i][2] or 0 for i in known), dtype=np.int64, count=len(known)),
            b"".join(chunk[i][1] for i in known),
        )


class _Meta:
    """``embedded_units`` rows as growing columns: unit id, chat id, kind and account labels."""

    def __init__(self, expected: int) -> None:
        size = max(expected, 1)
        self.ids = np.empty(size, dtype=np.int64)
        self.chats = np.empty(size, dtype=np.int64)
        self.kinds = np.empty(size, dtype=np.int32)
        self.accounts = np.empty(size, dtype=np.int32)
        self.n = 0

    def extend(self, codes: _Codes, rows: Sequence[tuple[Any, ...]]) -> None:
        count = len(rows)
        end = self.n + count
        if end > len(self.ids):
            grown = max(end, int(len(self.ids) * GROWTH))
            for name in ("ids", "chats", "kinds", "accounts"):
                old = getattr(self, name)
                fresh = np.empty(grown, dtype=old.dtype)
                fresh[: self.n] = old[: self.n]
                setattr(self, name, fresh)
        at = slice(self.n, end)
        self.ids[at] = np.fromiter((r[0] for r in rows), dtype=np.int64, count=count)
        self.chats[at] = np.fromiter((r[1] for r in rows), dtype=np.int64, count=count)
        kinds, accounts = codes.kinds, codes.accounts
        label = codes.label
        self.kinds[at] = np.fromiter(
            (label(kinds, r[2]) for r in rows), dtype=np.int32, count=count
        )
        self.accounts[at] = np.fromiter(
            (label(accounts, r[3]) for r in rows), dtype=np.int32, count=count
        )
        self.n = end

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The four columns, cut to the rows read."""
        n = self.n
        return self.ids[:n], self.chats[:n], self.kinds[:n], self.accounts[:n]


def _load(conn: Connection, space: Space) -> _Codes:
    head = _changes_head(conn)
    count = conn.execute(
        "SELECT COUNT(*) FROM embedded_units WHERE space_id = ?", (space.space_id,)
    ).fetchone()[0]
    codes = _Codes(space.identity.dim, int(count))
    _add_units(conn, space, codes, None, int(count))
    codes.seq = head
    return codes


def _sync(conn: Connection, space: Space, codes: _Codes) -> _Codes | None:
    """Apply the changes after ``codes.seq`` to ``codes``; None when they call for a reload."""
    head = _changes_head(conn)
    if head == codes.seq:
        return codes
    if head < codes.seq:
        return None
    changed = [
        int(r[0])
        for r in conn.execute(
            "SELECT unit_id FROM vector_changes WHERE seq > ? AND seq <= ? AND space_id = ?",
            (codes.seq, head, space.space_id),
        )
    ]
    if len(changed) > RELOAD_SHARE * max(codes.n - codes.dead, 1):
        return None
    if changed:
        codes.forget(changed)
        _add_units(conn, space, codes, changed)
        if codes.dead > COMPACT_SHARE * codes.n:
            codes.compact()
    codes.seq = head
    return codes


def _codes_for(conn: Connection, space: Space) -> _Codes:
    """The space's codes for this process, loaded or brought up to date."""
    path = _database_file(conn)
    if not path:
        return _load(conn, space)
    key = (path, space.space_id)
    with _registry_lock:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        codes = _registry.get(key)
        if codes is not None:
            codes = _sync(conn, space, codes)
        if codes is None:
            # Let go of the old codes before the new ones are read, so that the two are not
            # held at once (a query still reading a snapshot of them keeps its arrays).
            with _registry_lock:
                _registry.pop(key, None)
            codes = _load(conn, space)
            # The rows read on the way are freed but still mapped: give them back now.
            memory.release()
        with _registry_lock:
            _registry[key] = codes
        return codes


def _cached(conn: Connection, space: Space) -> _Codes | None:
    path = _database_file(conn)
    with _registry_lock:
        return _registry.get((path, space.space_id)) if path else None


def _query_code(conn: Connection, blob: bytes, words: int) -> np.ndarray:
    code = conn.execute("SELECT vec_quantize_binary(?)", (blob,)).fetchone()[0]
    return np.frombuffer(bytes(code).ljust(words * 8, b"\0"), dtype="<u8")


def _hamming(snap: _Snapshot, query: np.ndarray, mask: np.ndarray) -> np.ndarray:
    distance: np.ndarray = np.bitwise_count(snap.codes[0] ^ query[0]).astype(np.uint16)
    for word in range(1, snap.codes.shape[0]):
        distance += np.bitwise_count(snap.codes[word] ^ query[word])
    distance[~mask] = NO_DISTANCE
    return distance


def _smallest(values: np.ndarray, count: int) -> np.ndarray:
    """Indices of ``count`` smallest small non-negative integers (a histogram cut, not a sort)."""
    histogram = np.bincount(values, minlength=int(NO_DISTANCE) + 1)
    cut = int(np.searchsorted(np.cumsum(histogram), count))
    below = np.flatnonzero(values < cut)
    ties = np.flatnonzero(values == cut)[: count - len(below)]
    return np.concatenate([below, ties])


def _budgets(k: int, scope: int, shortlist: int | None, rescore: int | None) -> tuple[int, int]:
    by_scope = min(RESCORE_MAX, max(RESCORE_MIN, scope // RESCORE_DIVISOR))
    wide = rescore or max(by_scope, k * RESCORE_PER_K)
    short = shortlist or max(SHORTLIST_MIN, scope // SHORTLIST_DIVISOR, wide * 4)
    return min(scope, max(short, wide)), min(scope, wide)


def _rescore(
    conn: Connection,
    space: Space,
    vector: np.ndarray,
    unit_ids: Sequence[int],
    flt: KnnFilter,
    k: int,
) -> list[tuple[int, float, int]]:
    """The ``k`` best exact cosines among the candidates still embedded and passing the filter
    (best first, ties by unit id)."""
    chats, kinds, accounts = set(flt.chat_ids), set(flt.kinds), set(flt.accounts)
    found = [
        row
        for row in conn.execute(
            "SELECT e.unit_id, e.chat_id, e.kind, e.account, c.vector FROM json_each(?) j"
            " CROSS JOIN embedded_units e ON e.space_id = ? AND e.unit_id = j.value"
            " LEFT JOIN vector_cache c ON c.space_id = e.space_id"
            " AND c.content_hash = e.content_hash",
            (json.dumps([int(u) for u in unit_ids]), space.space_id),
        )
        if (not chats or row[1] in chats)
        and (not kinds or row[2] in kinds)
        and (not accounts or row[3] in accounts)
    ]
    if not found:
        return []
    missing = [int(row[0]) for row in found if row[4] is None]
    stored: dict[int, bytes] = {}
    if missing:
        stored = dict(
            conn.execute(
                f"SELECT f.unit_id, f.embedding FROM json_each(?) j CROSS JOIN"
                f" {float_table(space.space_id)} f ON f.unit_id = j.value",
                (json.dumps(missing),),
            ).fetchall()
        )
    empty = bytes(4 * space.identity.dim)
    blobs = b"".join(
        row[4] if row[4] is not None else stored.get(int(row[0]), empty) for row in found
    )
    matrix = np.frombuffer(blobs, dtype="<f4").reshape(len(found), -1)
    query = np.asarray(vector, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(query))
    cosines = (matrix @ query) / np.where(norms > 0, norms, 1.0)
    ids = np.fromiter((row[0] for row in found), dtype=np.int64, count=len(found))
    if len(found) > k:
        # Everything tied with the k-th best stays in, so ties break by unit id below.
        cut = np.partition(-cosines, k - 1)[k - 1]
        keep = np.flatnonzero(-cosines <= cut)
    else:
        keep = np.arange(len(found))
    order = keep[np.lexsort((ids[keep], -cosines[keep]))][:k]
    return [(int(ids[i]), float(cosines[i]), int(found[i][1])) for i in order]


def _quantised(
    conn: Connection,
    space: Space,
    vector: np.ndarray,
    blob: bytes,
    flt: KnnFilter,
    k: int,
    snap: _Snapshot,
    mask: np.ndarray,
    *,
    shortlist: int | None = None,
    rescore: int | None = None,
) -> list[tuple[int, float, int]]:
    scope = int(mask.sum())
    if scope == 0:
        return []
    short, wide = _budgets(k, scope, shortlist, rescore)
    distance = _hamming(snap, _query_code(conn, blob, snap.codes.shape[0]), mask)
    rows = np.flatnonzero(mask) if short >= scope else _smallest(distance, short)
    if wide < len(rows):
        dim_bytes = space.identity.dim // 8
        codes = np.ascontiguousarray(snap.codes[:, rows].T).view(np.uint8)[:, :dim_bytes]
        query = np.asarray(vector, dtype=np.float32)[: dim_bytes * 8]
        tables = query.reshape(dim_bytes, 8) @ _BYTE_BITS.T
        estimate = tables[np.arange(dim_bytes), codes].sum(axis=1)
        rows = rows[np.argpartition(-estimate, wide - 1)[:wide]]
    return _rescore(conn, space, vector, snap.unit_ids[rows].tolist(), flt, k)


# --- the entry point ---


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
    shortlist: int | None = None,
    rescore: int | None = None,
) -> list[tuple[int, float, int]]:
    """``(unit_id, cosine, chat_id)`` of the ``k`` nearest units, best first.

    Args:
        conn: vector.db (with unitize.db attached when ``flt.current_chunks_only``).
        space: the current space; ``vector`` has its dimension.
        vector: the query vector.
        flt: what the search is restricted to.
        k: how many neighbours (clamped to ``1..MAX_K``).
        quantise_above: scopes larger than this take the quantised path.
        shortlist: Hamming survivors of the quantised path (default: adaptive).
        rescore: candidates rescored exactly on the quantised path (default: adaptive).
    """
    k = max(1, min(MAX_K, k))
    blob = np.ascontiguousarray(vector, dtype="<f4").tobytes()
    fetch = min(MAX_K, k * CURRENT_CHUNKS_OVERFETCH) if flt.current_chunks_only else k
    codes = _cached(conn, space)
    # vec0 scans every vector of the scoped chats, whatever their kind: for conversation chunks
    # (a small share of them) the codes path is far cheaper, and exact when the scope fits its
    # rescoring budget.
    chunks = flt.current_chunks_only
    if codes is None and not chunks and scope_size(conn, space, flt) <= quantise_above:
        found = _exact(conn, space, blob, flt, fetch)
    else:
        snap = _codes_for(conn, space).snapshot()
        mask = snap.scope(flt)
        if chunks or int(mask.sum()) > quantise_above:
            found = _quantised(
                conn,
                space,
                vector,
                blob,
                flt,
                fetch,
                snap,
                mask,
                shortlist=shortlist,
                # Chunks only weigh the units they hold: a smaller exact rescoring will do,
                # and the over-fetch for current chunks widens the answer, not the rescoring.
                rescore=rescore or (max(RESCORE_MIN, k * CHUNK_RESCORE_PER_K) if chunks else None),
            )
        else:
            found = _exact(conn, space, blob, flt, fetch)
    if flt.current_chunks_only:
        keep = _current_chunks(conn, found)
        found = [f for f in found if f[0] in keep]
    return found[:k]
