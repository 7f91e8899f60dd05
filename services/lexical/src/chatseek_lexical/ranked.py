"""BM25 ranked lists for hybrid search: units, conversation chunks, messages mapped to units.

Invariants:
* Query words go through the indexing analyser; each becomes ``(raw:"w" OR stem:"s")``, every
  term double-quoted (quotes doubled), so no user text can break FTS5 syntax.
* The terms are the query's words less Russian and English function words (``stopwords``),
  unless the query has no other word: "how do I open a bank account" matches on "open", "bank"
  and "account". Those terms are ANDed first; rows of the ORed query are appended only when
  that finds fewer than ``limit``, so rows holding every term come first and a top-up row holds
  at least one content word, never just "how". The word indexes keep every word, so the
  strict language still finds any of them exactly.
* Filters (accounts, chats, unit start date, kind, current build) are in the SQL, before the
  limit; the FTS table drives every join. Scores are ``-bm25(raw 2.0, stem 1.0)``: higher is
  better, comparable only within one list.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from chatseek_core import db
from chatseek_core.errors import InvalidValue
from chatseek_core.stopwords import MAX_QUERY_TERMS, query_terms
from chatseek_lexical.pools import POOL_FACTOR, POOL_GROWTH, POOL_MIN
from chatseek_lexical.readiness import require_words_ready

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MAX_QUERY_TERMS",
    "MESSAGE_UNIT_KINDS",
    "UNIT_KINDS",
    "chunk_list",
    "match_expression",
    "message_list",
    "query_terms",
    "unit_list",
]

log = logging.getLogger(__name__)

RAW_WEIGHT = 2.0
STEM_WEIGHT = 1.0
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
UNIT_KINDS = ("window", "thread", "post")
CHUNK_KIND = "conversation"
MESSAGE_UNIT_KINDS = (*UNIT_KINDS, CHUNK_KIND)

Run = Callable[[str, int], list[tuple[Any, ...]]]


@dataclass(frozen=True, slots=True)
class _Filters:
    """Restrictions every list applies inside its SQL.

    Attributes:
        account_scope: accounts to search; None means every account in the store.
        chat_ids: chat ids (marked) to search within the scope; None means every chat.
        since: unit start date lower bound, unix seconds UTC, inclusive; None for no bound.
        until: unit start date upper bound, unix seconds UTC, exclusive; None for no bound.
        kinds: unit kinds; None means the list's default kinds.
    """

    account_scope: Sequence[str] | None = None
    chat_ids: Sequence[int] | None = None
    since: int | None = None
    until: int | None = None
    kinds: Sequence[str] | None = None

    def selective(self, default_kinds: Sequence[str]) -> bool:
        """Whether these filters may keep few of a table's matches: chats, dates, or kinds
        other than ``default_kinds`` (an account scope rarely does)."""
        return (
            self.chat_ids is not None
            or self.since is not None
            or self.until is not None
            or (self.kinds is not None and set(self.kinds) != set(default_kinds))
        )


# --- query text ---


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def match_expression(terms: Sequence[tuple[str, str]], operator: str) -> str:
    """An FTS5 MATCH string joining each ``(raw:"w" OR stem:"s")`` group by ``operator``.

    Raises:
        ValueError: ``operator`` is not ``AND`` or ``OR``, or ``terms`` is empty.
    """
    if operator not in ("AND", "OR"):
        raise ValueError(f"operator must be AND or OR, got {operator!r}")
    if not terms:
        raise ValueError("no terms to match")
    groups = [f"(raw:{_quoted(raw)} OR stem:{_quoted(stemmed)})" for raw, stemmed in terms]
    return f" {operator} ".join(groups)


# --- lists ---


def unit_list(
    conn: db.Connection,
    query_text: str,
    *,
    account_scope: Sequence[str] | None = None,
    chat_ids: Sequence[int] | None = None,
    since: int | None = None,
    until: int | None = None,
    kinds: Sequence[str] | None = None,
    limit: int = DEFAULT_LIMIT,
    require_ready: bool = False,
) -> list[tuple[int, float]]:
    """Units (window, thread, post) ranked by BM25 over ``unit_fts``.

    Args:
        conn: lexical.db with ``unitize`` (and, for readiness, ``ingest``) attached.
        query_text: free text; words without index terms are ignored.
        account_scope: accounts to search; None means every account in the store.
        chat_ids: chat ids (marked) to search within the scope; None means every chat.
        since: unit start date lower bound, unix seconds UTC, inclusive; None for no bound.
        until: unit start date upper bound, unix seconds UTC, exclusive; None for no bound.
        kinds: unit kinds to keep; None means window, thread and post.
        limit: the most rows returned, 1..``MAX_LIMIT``.
        require_ready: raise instead of answering from an index that is behind its feeds.

    Returns:
        ``(unit_id, score)`` best first; empty when the query has no indexable words.

    Raises:
        InvalidValue: a bad limit, kind or date range.
        IndexNotReady: ``require_ready`` and the word index is behind.
    """
    filters = _Filters(account_scope, chat_ids, since, until, kinds)
    where, params = _unit_filters(filters, allowed=UNIT_KINDS, default=UNIT_KINDS)
    run = _pooled(
        conn,
        "unit_fts",
        _unit_join(where),
        params,
        selective=filters.selective(UNIT_KINDS),
        in_pool_order=True,
    )
    found = _and_then_or(conn, run, query_text, limit, require_ready)
    return [(int(r[0]), float(r[1])) for r in found]


def chunk_list(
    conn: db.Connection,
    query_text: str,
    *,
    account_scope: Sequence[str] | None = None,
    chat_ids: Sequence[int] | None = None,
    since: int | None = None,
    until: int | None = None,
    limit: int = DEFAULT_LIMIT,
    require_ready: bool = False,
) -> list[tuple[int, float]]:
    """Conversation chunks of each chat's current build, ranked by BM25 over ``chunk_fts``.

    Args and raises are those of ``unit_list`` (there is no kind filter: every row is a
    ``conversation`` unit). Chunks of builds that are not current are never returned.

    Returns:
        ``(unit_id, score)`` best first; empty when the query has no indexable words.
    """
    filters = _Filters(account_scope, chat_ids, since, until, (CHUNK_KIND,))
    where, params = _unit_filters(filters, allowed=(CHUNK_KIND,), default=(CHUNK_KIND,))
    run = _pooled(
        conn,
        "chunk_fts",
        _unit_join(where),
        params,
        selective=filters.selective((CHUNK_KIND,)),
        in_pool_order=True,
    )
    found = _and_then_or(conn, run, query_text, limit, require_ready)
    return [(int(r[0]), float(r[1])) for r in found]


def message_list(
    conn: db.Connection,
    query_text: str,
    *,
    account_scope: Sequence[str] | None = None,
    chat_ids: Sequence[int] | None = None,
    since: int | None = None,
    until: int | None = None,
    kinds: Sequence[str] | None = None,
    limit: int = DEFAULT_LIMIT,
    require_ready: bool = False,
) -> list[tuple[int, float, int]]:
    """Messages ranked by BM25 over ``msg_fts``, mapped to the units that hold them.

    A message reaches its units through ``ingest.messages`` (mid → account, chat, msg_id) and
    ``unitize.unit_members``; each unit keeps the rank of its best message. _Filters apply to
    the unit (its chat, start date and kind); ``conversation`` may be asked for in ``kinds``
    and then only chunks of current builds count.

    Args and raises are those of ``unit_list``; kinds default to window, thread and post.

    Returns:
        ``(unit_id, score, best_msg_id)`` best first, ``best_msg_id`` being the chat's
        message id of the unit's best-ranked message; empty when nothing is indexable.
    """
    filters = _Filters(account_scope, chat_ids, since, until, kinds)
    where, params = _unit_filters(filters, allowed=MESSAGE_UNIT_KINDS, default=UNIT_KINDS)
    sql = (
        f"SELECT um.unit_id, MAX(h.score) AS best, m.msg_id, {_WORST}"
        f" FROM {_POOL} AS h"
        " CROSS JOIN ingest.messages m ON m.mid = h.rid"
        " CROSS JOIN unitize.unit_members um ON um.account = m.account"
        "   AND um.chat_id = m.chat_id AND um.msg_id = m.msg_id"
        " CROSS JOIN unitize.units u ON u.unit_id = um.unit_id"
        f" WHERE 1{where}"
        " GROUP BY um.unit_id ORDER BY best DESC, um.unit_id LIMIT :limit"
    )
    run = _pooled(
        conn, "msg_fts", sql, params, selective=filters.selective(UNIT_KINDS), in_pool_order=False
    )
    found = _and_then_or(conn, run, query_text, limit, require_ready)
    return [(int(r[0]), float(r[1]), int(r[2])) for r in found]


# --- shared machinery ---


def _unit_filters(
    filters: _Filters, *, allowed: Sequence[str], default: Sequence[str]
) -> tuple[str, dict[str, object]]:
    """SQL conditions on ``u`` (``unitize.units``) and their named parameters.

    Conversation chunks count only while their build is their chat's current one.
    """
    kinds = list(default if filters.kinds is None else filters.kinds)
    unknown = sorted(set(kinds) - set(allowed))
    if unknown:
        raise InvalidValue(
            f"unknown unit kind(s) {', '.join(unknown)}",
            hint=f"use one of {', '.join(allowed)}",
            metadata={"field": "kinds"},
        )
    if filters.since is not None and filters.until is not None and filters.since > filters.until:
        raise InvalidValue(
            "the date range ends before it starts",
            hint="give since <= until (unix seconds)",
            metadata={"field": "since"},
        )
    where = " AND u.kind IN (SELECT value FROM json_each(:kinds))"
    params: dict[str, object] = {"kinds": json.dumps(kinds)}
    if CHUNK_KIND in kinds:
        where += (
            f" AND (u.kind <> '{CHUNK_KIND}' OR EXISTS (SELECT 1 FROM unitize.current_builds cb"
            " WHERE cb.account = u.account AND cb.chat_id = u.chat_id"
            " AND cb.build_id = u.build_id))"
        )
    if filters.account_scope is not None:
        where += " AND u.account IN (SELECT value FROM json_each(:accounts))"
        params["accounts"] = json.dumps(list(filters.account_scope))
    if filters.chat_ids is not None:
        where += " AND u.chat_id IN (SELECT value FROM json_each(:chats))"
        params["chats"] = json.dumps([int(c) for c in filters.chat_ids])
    if filters.since is not None:
        where += " AND u.start_date >= :since"
        params["since"] = int(filters.since)
    if filters.until is not None:
        where += " AND u.start_date < :until"
        params["until"] = int(filters.until)
    return where, params


def _and_then_or(
    conn: db.Connection, run: Run, query_text: str, limit: int, require_ready: bool
) -> list[tuple[Any, ...]]:
    """``run`` the ANDed terms, then top up from the ORed terms; rows best first."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidValue(
            f"limit must be between 1 and {MAX_LIMIT}",
            hint=f"ask for at most {MAX_LIMIT} rows",
            metadata={"field": "limit"},
        )
    if require_ready:
        require_words_ready(conn)
    terms = query_terms(query_text)
    if not terms:
        return []
    with db.storage_errors():
        rows = run(match_expression(terms, "AND"), limit)
        if len(rows) < limit and len(terms) > 1:
            seen = {r[0] for r in rows}
            extra = run(match_expression(terms, "OR"), limit + len(rows))
            rows.extend(r for r in extra if r[0] not in seen)
            del rows[limit:]
    log.debug("lexical ranked list: %d terms, %d rows", len(terms), len(rows))
    return rows


# The best-scored matches of one FTS table as JSON pairs ``[rowid, score]`` for a join, and
# the worst score among them.
_POOL = "(SELECT value ->> 0 AS rid, value ->> 1 AS score FROM json_each(:pool))"
_WORST = "(SELECT MIN(value ->> 1) FROM json_each(:pool)) AS worst"


def _unit_join(where: str) -> str:
    """The pool's rows that are units passing ``where``, best first, ``worst`` last."""
    return (
        f"SELECT h.rid, h.score, {_WORST} FROM {_POOL} AS h"
        f" CROSS JOIN unitize.units u ON u.unit_id = h.rid WHERE 1{where}"
        " ORDER BY h.score DESC, h.rid LIMIT :limit"
    )


def _pooled(
    conn: db.Connection,
    table: str,
    sql: str,
    params: dict[str, object],
    *,
    selective: bool,
    in_pool_order: bool,
) -> Run:
    """Run ``sql`` over the best-scored matches of ``table``, a pool at a time.

    ``sql`` ranks rows drawn from the ``:pool`` of matches (through ``_POOL``), at most
    ``:limit``, each row's score second and the pool's worst score (``_WORST``) last. Joining a
    match with the stores for the filters costs more than scoring it, so the matches are read
    best first and joined a pool at a time. The rows are the true ones when the pool held every
    match, or when the last of ``limit`` rows scores above the pool's worst: a match left out
    scores no higher than that, so it can neither raise a listed row nor add one. When ``sql``
    keeps the pool's own order (``in_pool_order``: score, then rowid, as a unit list does), a
    match left out sorts after every pooled row, so ``limit`` rows are the true ones even when
    the last ties with the pool's worst. Else the pool grows.

    Without ``selective`` filters (chats, dates, kinds other than the list's own) the first pool
    nearly always holds the answer, so it is read with a ``LIMIT``: SQLite then keeps only the
    best rows while bm25 runs, where an open-ended read sorts every match first (among a million
    messages, a unit list with 147k matches takes about 290 ms instead of 370). A pool that must
    grow, and every pool under selective filters, is read on from one open-ended pass, so bm25
    runs once more at most, not once per growth.
    """
    ranked = (
        f"SELECT rowid, -bm25({table}, {RAW_WEIGHT}, {STEM_WEIGHT}) AS score FROM {table}"
        f" WHERE {table} MATCH ? ORDER BY score DESC, rowid"
    )

    def page(pool: list[tuple[int, float]], want: int, limit: int) -> list[tuple[Any, ...]] | None:
        args = {**params, "pool": json.dumps(pool), "limit": limit}
        rows = [tuple(r) for r in conn.execute(sql, args)]
        if len(pool) < want or (
            len(rows) == limit and (in_pool_order or rows[-1][1] > rows[-1][-1])
        ):
            return rows
        return None

    def run(match: str, limit: int) -> list[tuple[Any, ...]]:
        want = max(POOL_MIN, POOL_FACTOR * limit)
        if not selective:
            first = [
                (int(r[0]), float(r[1])) for r in conn.execute(f"{ranked} LIMIT ?", (match, want))
            ]
            rows = page(first, want, limit)
            if rows is not None:
                return rows
            want *= POOL_GROWTH
        cursor = conn.execute(ranked, (match,))
        pool: list[tuple[int, float]] = []
        try:
            while True:
                pool.extend((int(r[0]), float(r[1])) for r in cursor.fetchmany(want - len(pool)))
                rows = page(pool, want, limit)
                if rows is not None:
                    return rows
                want *= POOL_GROWTH
        finally:
            cursor.close()

    return run
