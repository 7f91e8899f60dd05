"""Each hit's anchor: the message of its unit that best matches the query's words.

A hit links to, and its snippet starts at, one message of its unit. Lexical's BM25 message list
used to pick it, but that list scores every message holding a query word (at 1M messages on
frequent words, half a second of lexical's CPU), while fusion needs only the hits' own few
hundred messages scored. So fusion scores them itself, as that list did:

* FTS5's ``bm25`` over ``msg_fts``: each query term is two phrases, its raw word (weight 2) and
  its stem (weight 1); k1 = 1.2, b = 0.75; a message's length is its tokens in both columns.
* Each phrase's document count is its term's ``doc`` in its column of ``msg_col_vocab``
  (lexical's per-column vocabulary of the message index); the row count and the mean length
  come from the index's averages record (``msg_fts_data`` row 1: varints, the rows, then the
  tokens of each column). Before lexical.db has that vocabulary every idf is FTS5's floor, and
  the order rests on term counts and lengths.
* A message holding every term ranks before one holding some (the list's AND-then-OR order);
  ties go to the earlier message. A unit none of whose messages holds a term has no anchor here.

The message text is what lexical indexes: text, file name and extracted text, one per line.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass

import sqlean

from chatseek_core.db import Connection
from chatseek_core.stopwords import query_terms
from chatseek_core.text import stem, words
from chatseek_fusion.store import MessageRow, UnitRow

__all__ = ["Anchors", "IndexStats", "index_stats", "message_score", "message_text"]

log = logging.getLogger(__name__)

K1 = 1.2
B = 0.75
RAW_WEIGHT = 2.0
STEM_WEIGHT = 1.0
# FTS5 floors a phrase's idf here when the phrase is in half the rows or more.
MIN_IDF = 1e-6
_AVERAGES_ROWID = 1


@dataclass(frozen=True, slots=True)
class IndexStats:
    """What bm25 needs of the whole message index.

    Attributes:
        rows: messages indexed.
        avg_length: mean tokens a message holds over both columns (raw words and stems).
        docs: messages holding each asked term in a column, by ``(column, term)``.
    """

    rows: int
    avg_length: float
    docs: Mapping[tuple[str, str], int]


def _varints(blob: bytes) -> list[int]:
    """SQLite's big-endian varints, as FTS5 writes its averages record."""
    out: list[int] = []
    i = 0
    while i < len(blob):
        value = 0
        for j in range(9):
            byte = blob[i]
            i += 1
            if j == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def index_stats(conn: Connection, terms: Iterable[str], schema: str = "lexical") -> IndexStats:
    """Row count, mean length and each of ``terms``' document count per column of ``msg_fts``."""
    row = conn.execute(
        f"SELECT block FROM {schema}.msg_fts_data WHERE id = ?", (_AVERAGES_ROWID,)
    ).fetchone()
    counts = _varints(bytes(row[0])) if row is not None and row[0] is not None else []
    rows = counts[0] if counts else 0
    avg = sum(counts[1:]) / rows if rows else 0.0
    wanted = sorted(set(terms))
    try:
        found = conn.execute(
            f"SELECT col, term, doc FROM {schema}.msg_col_vocab"
            " WHERE term IN (SELECT value FROM json_each(?))",
            (json.dumps(wanted),),
        ).fetchall()
    except sqlean.OperationalError as exc:
        log.warning("anchors without document counts (lexical.db not migrated yet?): %s", exc)
        return IndexStats(rows=rows, avg_length=avg, docs={})
    docs = {(str(r[0]), str(r[1])): int(r[2]) for r in found}
    return IndexStats(rows=rows, avg_length=avg, docs=docs)


def _idf(stats: IndexStats, column: str, term: str) -> float:
    if not stats.docs:
        return MIN_IDF
    n = stats.docs.get((column, term), 0)
    idf = math.log((stats.rows - n + 0.5) / (n + 0.5)) if stats.rows else 0.0
    return idf if idf > 0 else MIN_IDF


def message_text(m: MessageRow) -> str:
    """The text lexical indexes for ``m``."""
    if not m.file_name and not m.media_text:
        return m.text or ""
    return "\n".join(part for part in (m.text, m.file_name, m.media_text) if part)


def message_score(
    tokens: Sequence[str], terms: Sequence[tuple[str, str]], stats: IndexStats
) -> tuple[bool, float]:
    """``(holds every term, bm25)`` of a message of ``tokens`` (its words) for ``terms``;
    ``(False, 0.0)`` when it holds none."""
    raw = Counter(tokens)
    stemmed = Counter(stem(t) for t in tokens)
    length = 2 * len(tokens)
    norm = K1 * (1 - B + B * length / stats.avg_length) if stats.avg_length else K1
    held = 0
    score = 0.0
    for word, word_stem in terms:
        if raw[word] or stemmed[word_stem]:
            held += 1
        for column, freq, term in (
            ("raw", RAW_WEIGHT * raw[word], word),
            ("stem", STEM_WEIGHT * stemmed[word_stem], word_stem),
        ):
            if freq:
                score += _idf(stats, column, term) * freq * (K1 + 1) / (freq + norm)
    return held == len(terms), score


class Anchors:
    """Picks units' best messages for one query; the index is read once, on first use."""

    def __init__(self, conn: Connection, query: str) -> None:
        self._conn = conn
        self._terms = query_terms(query)
        self._stats: IndexStats | None = None

    def best(
        self, units: Iterable[UnitRow], messages: Mapping[tuple[str, int], Mapping[int, MessageRow]]
    ) -> dict[int, int]:
        """``{unit_id: msg_id}``: each unit's best message for the query's words.

        ``messages`` holds the units' messages by ``(account, chat_id)`` and id; a unit whose
        messages hold no query term is left out, as is every unit when the query has no words.
        """
        out: dict[int, int] = {}
        for unit in units:
            found = self.best_outside(unit, messages.get((unit.account, unit.chat_id), {}), ())
            if found is not None:
                out[unit.unit_id] = found
        return out

    def best_outside(
        self, unit: UnitRow, own: Mapping[int, MessageRow], shown: Container[int]
    ) -> int | None:
        """``unit``'s best message for the query's words among those not in ``shown``
        (``own`` holds its chat's messages by id); None when none of them holds a term."""
        if not self._terms:
            return None
        if self._stats is None:
            self._stats = index_stats(self._conn, [t for pair in self._terms for t in pair])
        best: tuple[bool, float] = (False, 0.0)
        found: int | None = None
        for msg_id in unit.msg_ids:
            m = own.get(msg_id)
            if m is None or msg_id in shown:
                continue
            key = message_score(words(message_text(m)), self._terms, self._stats)
            if key[1] > 0 and key > best:
                best = key
                found = msg_id
        return found
