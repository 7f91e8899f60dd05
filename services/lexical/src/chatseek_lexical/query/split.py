"""A relevance page's bm25 scoring, split over rowid ranges and run on several cores at once.

A relevance page must score every match before it can keep the best, and FTS5's ``bm25`` costs
about 0.5-1.5 µs a match (it reads each match's document size): 130 ms for a two-word query
with 94,000 matches among a million messages. The statistics bm25 uses (the row count, each
phrase's document count, the average size) are the whole table's whatever rowids a query is
limited to, so the best rows of each rowid range, merged, are the best rows of the table, in the
same order and with the same scores.

Invariants:
* ``Splitter.best`` returns exactly what one query over the whole table returns: the ``top``
  best ``(rowid, score)`` pairs in ``ORDER BY score, rowid DESC`` (bm25 is lower-is-better).
* The first range runs on the caller's connection; the others on the splitter's own threads,
  each with a read-only connection of its own. Each part is held to what is left of the
  request's time budget (``Deadline`` counts the CPU time of the thread that asks it).
* While the indexer commits, the parts may read consecutive snapshots of the index: a message
  indexed in between can then be scored in one part and not in another, as the next request
  would see it. The page's rows are always joined on the caller's connection.
* Below ``SPLIT_MIN_ROWS`` messages, or with one core, nothing is split. A request splits only
  into the scoring threads that are idle when it starts, so under many concurrent requests (the
  cores already busy) each is scored on its own connection as before, and no request waits
  behind another's parts.
"""

from __future__ import annotations

import heapq
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice
from pathlib import Path

from chatseek_core import db
from chatseek_lexical.query.compile import QueryConnection
from chatseek_lexical.query.limits import Deadline, budgeted

__all__ = ["MAX_PARTS", "SPLIT_MIN_ROWS", "Splitter", "best_matches"]

# Where splitting starts. Not tuned: at 100k messages a common word's bm25 top 21 already costs
# about 12 ms (22k matches, bench store), far above handing a part to a thread; below it every
# query is a few ms and stays on one connection.
SPLIT_MIN_ROWS = 100_000
MAX_PARTS = 4


def best_matches(
    conn: QueryConnection,
    rank: str,
    floor: float | None,
    top: int,
    rowids: tuple[int | None, int | None] = (None, None),
) -> list[tuple[int, float]]:
    """The ``top`` best-scored messages matching ``rank`` (an FTS5 query over ``msg_fts``).

    Args:
        floor: keep only scores at or above it (a later page's lower bound).
        rowids: ``(low, high)``: only rowids ``low <= rowid < high``; None leaves a side open.
    """
    where = ""
    params: list[object] = [rank]
    low, high = rowids
    if low is not None:
        where += " AND rowid >= ?"
        params.append(low)
    if high is not None:
        where += " AND rowid < ?"
        params.append(high)
    kept = ""
    if floor is not None:
        kept = " WHERE score >= ?"
        params.append(floor)
    params.append(top)
    rows = conn.execute(
        "SELECT rid, score FROM (SELECT rowid AS rid, bm25(msg_fts, 1.0, 0.0) AS score"
        f" FROM msg_fts WHERE msg_fts MATCH ?{where}){kept} ORDER BY score, rid DESC LIMIT ?",
        params,
    ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


class Splitter:
    """Scores a relevance query's matches in up to ``parts`` rowid ranges at once.

    Args:
        path: ``lexical.db``; each worker thread opens it read-only.
        parts: how many ranges (default: the CPU count, at most ``MAX_PARTS``).
        min_rows: split only when the largest message id reaches this.
        cache_kib: each worker connection's page cache (a query connection's, by default).
    """

    def __init__(
        self,
        path: Path | str,
        *,
        parts: int | None = None,
        min_rows: int = SPLIT_MIN_ROWS,
        cache_kib: int = db.QUERY_CACHE_SIZE_KIB,
    ) -> None:
        self.parts = max(1, min(parts if parts is not None else os.cpu_count() or 1, MAX_PARTS))
        self.min_rows = min_rows
        self._conns = db.ThreadConnections(path, readonly=True, cache_kib=cache_kib)
        self._threads = (
            ThreadPoolExecutor(self.parts - 1, thread_name_prefix="lexical-bm25")
            if self.parts > 1
            else None
        )
        self._idle = threading.BoundedSemaphore(self.parts - 1) if self.parts > 1 else None

    def best(
        self,
        conn: QueryConnection,
        rank: str,
        floor: float | None,
        top: int,
        deadline: Deadline,
    ) -> list[tuple[int, float]]:
        """``best_matches`` over the whole table, its ranges scored at once.

        ``conn`` is the caller's connection (lexical.db with ingest.db attached as ``ingest``),
        already inside ``budgeted``.

        Raises:
            QueryLimit: a part ran out of the time budget.
        """
        if self._threads is None or self._idle is None:
            return best_matches(conn, rank, floor, top)
        last = conn.execute("SELECT MAX(mid) FROM ingest.messages").fetchone()[0] or 0
        if last < self.min_rows:
            return best_matches(conn, rank, floor, top)
        taken = 0
        while taken < self.parts - 1 and self._idle.acquire(blocking=False):
            taken += 1
        try:
            if not taken:
                return best_matches(conn, rank, floor, top)
            step = last // (taken + 1) + 1
            cuts = [step * i for i in range(1, taken + 1)]
            ranges = list(zip([None, *cuts], [*cuts, None], strict=True))
            others: list[Future[list[tuple[int, float]]]] = [
                self._threads.submit(self._part, rank, floor, top, span, deadline.left_ms())
                for span in ranges[1:]
            ]
            try:
                parts = [best_matches(conn, rank, floor, top, ranges[0])]
                parts.extend(f.result() for f in others)
            finally:
                for f in others:
                    f.cancel()
                for f in others:
                    if not f.cancelled():
                        f.exception()  # wait: a slot is free again only once its part ended
        finally:
            for _ in range(taken):
                self._idle.release()
        merged = heapq.merge(*parts, key=lambda r: (r[1], -r[0]))
        return list(islice(merged, top))

    def _part(
        self,
        rank: str,
        floor: float | None,
        top: int,
        span: tuple[int | None, int | None],
        left_ms: int,
    ) -> list[tuple[int, float]]:
        conn = self._conns.get()
        with budgeted(conn, Deadline(left_ms)):
            return best_matches(conn, rank, floor, top, span)

    def close(self) -> None:
        """Stop the worker threads and close their connections."""
        if self._threads is not None:
            self._threads.shutdown(wait=True, cancel_futures=True)
        self._conns.close()
