"""The lexical indexer: keeps lexical.db's FTS5 word indexes in step with the owners' feeds.

Invariants:
* A batch reads its feed after the cursor, writes FTS rows and ``indexed_*`` bookkeeping and
  moves the cursor in ONE transaction: a crash loses nothing and repeats nothing.
* The feed says what to look at; the owner's current row says what is true. An entity whose
  row is gone is removed whatever the op, so replays and reorderings converge.
* ``indexed_messages`` / ``indexed_units`` hold one row per FTS row; their ``content_hash``
  covers the indexed text and ``NORMALISER_VERSION``, so unchanged content is not rewritten.
* Columns are ``raw = " ".join(words(text))`` and ``stem = analyse(text)`` (``index_columns``):
  the shared analyser decides every token, FTS5 only splits on the spaces (see ``schema``).
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import sqlean

from chatseek_core import db
from chatseek_core.feed import cursor, head, set_cursor
from chatseek_core.render import indexed_text
from chatseek_core.text import NORMALISER_VERSION, folded_for_words, stem
from chatseek_lexical.schema import MIGRATIONS, OWNER

__all__ = [
    "CHUNK_KIND",
    "DEFAULT_BATCH",
    "FEED_INGEST",
    "FEED_UNITIZE",
    "INGEST_SCHEMA",
    "IndexCounts",
    "UNITIZE_SCHEMA",
    "UNIT_BATCH_MAX",
    "apply_feeds",
    "connect_index",
    "drop_chat",
    "fts_table",
    "index_columns",
    "message_content",
    "rebuild",
    "unit_columns",
]

log = logging.getLogger(__name__)

FEED_INGEST = "ingest"
FEED_UNITIZE = "unitize"
INGEST_SCHEMA = "ingest"
UNITIZE_SCHEMA = "unitize"
MESSAGE_EVENT = "message"
UNIT_EVENT = "unit"
CHUNK_KIND = "conversation"
DEFAULT_BATCH = 5_000
# Unit texts run to tens of kilobytes, so unit batches stay smaller to bound memory.
UNIT_BATCH_MAX = 2_000
REBUILD_FETCH = 20_000
# The token → stem cache's byte bound (an estimate: two strings and a dict slot per entry).
STEM_CACHE_BYTES = 32 * 1024 * 1024
_ENTRY_BYTES = 200
HASH_BYTES = 16
_HASH_PERSON = f"chatseek-n{NORMALISER_VERSION}".encode()
_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)
# The same tokens as ``_WORD_RE`` in text without an underscore (``index_columns``).
_WORD_NO_UNDERSCORE_RE = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class IndexCounts:
    """How many rows a rebuild wrote: messages, units (window/thread/post) and chunks."""

    messages: int
    units: int
    chunks: int


def connect_index(
    lexical_path: Path | str, *, ingest_path: Path, unitize_path: Path
) -> db.Connection:
    """Open lexical.db read-write, migrate it, and attach the producers' files read-only.

    Returns:
        A connection with ``ingest`` and ``unitize`` attached, as every function here expects.

    Raises:
        StorageError: a producer's file does not exist yet, or lexical.db cannot be opened.
        SchemaTooNew: lexical.db was migrated by newer code.
    """
    conn = db.connect(lexical_path)
    try:
        db.migrate(conn, OWNER, MIGRATIONS)
        db.attach_readonly(conn, ingest_path, INGEST_SCHEMA)
        db.attach_readonly(conn, unitize_path, UNITIZE_SCHEMA)
    except BaseException:
        conn.close()
        raise
    return conn


# --- analysis ---


class _StemCache(dict[str, str]):
    """Token → stem; a plain dict lookup per token, cleared when it grows past its byte bound.

    Misses go to the stemmer itself, not to ``text.stem``'s own cache, so a token is held once.
    """

    bytes_held = 0

    def __missing__(self, token: str) -> str:
        value = _stem_uncached(token)
        cost = _ENTRY_BYTES + 2 * (len(token) + len(value))
        if self.bytes_held + cost > STEM_CACHE_BYTES:
            self.clear()
            self.bytes_held = 0
        self[token] = value
        self.bytes_held += cost
        return value


_stem_uncached = stem.__wrapped__
_stems = _StemCache()
# Bound once: ``map`` over it looks each token up without a Python-level loop.
_stem_of = _stems.__getitem__


def index_columns(text: str) -> tuple[str, str]:
    """The ``(raw, stem)`` FTS columns of ``text``: its words and their stems, space-joined.

    Equal to ``(" ".join(words(text)), analyse(text))``, only faster: one normalisation and a
    dict stem cache. No token holds whitespace, so the text is folded but its whitespace not
    (``folded_for_words``); and without an underscore, ``\\w+`` cuts the same tokens as
    ``[^\\W_]+``, a little faster. Property tests pin the equality.
    """
    norm = folded_for_words(text)
    tokens = (_WORD_RE if "_" in norm else _WORD_NO_UNDERSCORE_RE).findall(norm)
    return " ".join(tokens), " ".join(map(_stem_of, tokens))


def unit_columns(text: str) -> tuple[str, str]:
    """The ``(raw, stem)`` FTS columns of a unit's or chunk's rendered ``text``: its lines
    without their time stamps, then their dates as words (``render.indexed_text``)."""
    return index_columns(indexed_text(text))


def message_content(text: str | None, file_name: str | None, extracted: str | None) -> str:
    """What a message's FTS row indexes: its text, its file's name, and text read out of the
    file, one per line."""
    if not file_name and not extracted:
        return text or ""
    return "\n".join(part for part in (text, file_name, extracted) if part)


def _content_hash(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=HASH_BYTES, person=_HASH_PERSON).hexdigest()


def _unit_hash(content_hash: str) -> str:
    return f"{NORMALISER_VERSION}:{content_hash}"


def fts_table(kind: str) -> str:
    """The FTS table that holds a unit of ``kind``: conversation chunks apart from the rest."""
    return "chunk_fts" if kind == CHUNK_KIND else "unit_fts"


# --- feeds ---


def apply_feeds(conn: db.Connection, *, batch: int = DEFAULT_BATCH) -> int:
    """Index every event announced on the ingest and unitize feeds until both are caught up.

    Message batches come first: a unit batch runs only when no message event is waiting.
    Each batch of at most ``batch`` events is one transaction: FTS rows, bookkeeping and the
    cursor move together. Repeated events for one entity within a batch collapse into one.
    Events of kinds this index does not hold are consumed without effect.

    Args:
        conn: lexical.db with ``ingest`` and ``unitize`` attached (``connect_index``).
        batch: the most feed events per transaction (at least 1; unit batches are also
            capped at ``UNIT_BATCH_MAX``).

    Returns:
        The number of feed events consumed, over both feeds.

    Raises:
        ValueError: ``batch`` is below 1.
        DatabaseBusy, StorageError: lexical.db cannot be written; nothing of the failed batch
            is visible and its cursor has not moved.
    """
    if batch < 1:
        raise ValueError("batch must be at least 1")
    started = time.perf_counter()
    total = 0
    feeds: tuple[tuple[str, str, Callable[[db.Connection, str, int, int], int], int], ...] = (
        (FEED_INGEST, INGEST_SCHEMA, _apply_message_events, batch),
        (FEED_UNITIZE, UNITIZE_SCHEMA, _apply_unit_events, min(batch, UNIT_BATCH_MAX)),
    )
    live = []
    for feed in feeds:
        feed_name, schema = feed[0], feed[1]
        position, target = cursor(conn, feed_name), head(conn, schema)
        if position > target:
            log.warning(
                "lexical cursor on %s is past the feed head (%d > %d); run a lexical reindex",
                feed_name,
                position,
                target,
            )
            continue
        live.append(feed)
    # Messages first: a unit batch runs only while no message waits, so a strict search that
    # waits for the messages stored before it arrived waits behind one unit batch at most.
    # Units (hybrid search, which says when its index is stale) catch up when messages do.
    while True:
        consumed = 0
        for name, schema, handler, size in live:
            consumed = _apply_batch(conn, name, schema, handler, size, head(conn, schema))
            if consumed:
                break
        if consumed == 0:
            break
        total += consumed
    if total:
        log.info(
            "lexical indexed %d feed events in %.0f ms",
            total,
            (time.perf_counter() - started) * 1000,
        )
    return total


def _apply_batch(
    conn: db.Connection,
    feed_name: str,
    schema: str,
    handler: Callable[[db.Connection, str, int, int], int],
    batch: int,
    target: int,
) -> int:
    with db.storage_errors(), db.transaction(conn):
        after = cursor(conn, feed_name)
        # The batch is the feed's range (after, last]: handlers join it in SQL, so events never
        # become Python objects and no temporary key table is filled.
        row = conn.execute(
            f"SELECT COUNT(*), MAX(seq) FROM (SELECT seq FROM {schema}._feed"
            " WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?)",
            (after, target, batch),
        ).fetchone()
        count, last = int(row[0]), row[1]
        if not count:
            return 0
        written = handler(conn, schema, after, int(last))
        set_cursor(conn, feed_name, int(last))
    log.debug(
        "lexical %s batch: %d events up to seq %d, %d rows written",
        feed_name,
        count,
        last,
        written,
    )
    return count


def _apply_message_events(conn: db.Connection, schema: str, after: int, last: int) -> int:
    keys = (
        f"SELECT DISTINCT account, chat_id, entity AS msg_id FROM {schema}._feed"
        f" WHERE seq > :after AND seq <= :last AND kind = '{MESSAGE_EVENT}'"
    )
    span = {"after": after, "last": last}
    current = conn.execute(
        "SELECT m.mid, m.account, m.chat_id, m.msg_id, m.text, md.file_name, md.extracted_text"
        f" FROM ({keys}) k"
        " JOIN ingest.messages m"
        "   ON m.account = k.account AND m.chat_id = k.chat_id AND m.msg_id = k.msg_id"
        " LEFT JOIN ingest.media md ON md.mid = m.mid"
        " ORDER BY m.mid",
        span,
    ).fetchall()
    indexed = conn.execute(
        f"SELECT i.mid, i.content_hash FROM ({keys}) k"
        " JOIN indexed_messages i"
        "   ON i.account = k.account AND i.chat_id = k.chat_id AND i.msg_id = k.msg_id",
        span,
    ).fetchall()
    old_hash = {int(r[0]): str(r[1]) for r in indexed}
    keep: set[int] = set()
    fts_rows: list[tuple[int, str, str]] = []
    book_rows: list[tuple[int, str, int, int, str]] = []
    for mid, account, chat_id, msg_id, text, file_name, extracted in current:
        content = message_content(text, file_name, extracted)
        digest = _content_hash(content)
        if old_hash.get(mid) == digest:
            keep.add(mid)
            continue
        raw, stemmed = index_columns(content)
        fts_rows.append((mid, raw, stemmed))
        book_rows.append((mid, account, chat_id, msg_id, digest))
    rewritten = {row[0] for row in fts_rows}
    # A rewritten mid is replaced in place by the insert below; only vanished mids are deleted.
    gone = [(mid,) for mid in sorted(old_hash) if mid not in keep and mid not in rewritten]
    conn.executemany("DELETE FROM msg_fts WHERE rowid = ?", gone)
    conn.executemany("DELETE FROM indexed_messages WHERE mid = ?", gone)
    _write_messages(conn, fts_rows, book_rows, held=old_hash.keys() & rewritten)
    return len(gone) + len(fts_rows)


def _write_messages(
    conn: db.Connection,
    fts_rows: Sequence[tuple[int, str, str]],
    book_rows: Sequence[tuple[int, str, int, int, str]],
    *,
    held: Collection[int] = (),
) -> None:
    """Index message rows (``fts_rows[k]`` and ``book_rows[k]`` describe one mid).

    The mids in ``held`` are indexed already and are replaced in place, first. The others
    are inserted as new rows, which costs FTS5 and the bookkeeping about 2 µs a row less
    than a replace. A contentless FTS5 table takes a second row under a rowid it holds
    without a word, so their bookkeeping rows go first: its primary key refuses a mid that
    is indexed after all (one bookkeeping row per FTS row), and then those rows are replaced
    too. With held rows first, a batch's rowids can go backwards once (one more segment).
    """
    # Rows arrive in rowid order: FTS5 flushes its pending segment whenever a rowid goes
    # backwards, and tiny segments make every later merge expensive.
    if held:
        replaced = [k for k, row in enumerate(fts_rows) if row[0] in held]
        _replace_messages(conn, [fts_rows[k] for k in replaced], [book_rows[k] for k in replaced])
        fresh = [k for k, row in enumerate(fts_rows) if row[0] not in held]
        fts_rows = [fts_rows[k] for k in fresh]
        book_rows = [book_rows[k] for k in fresh]
    conn.execute("SAVEPOINT lexical_fresh_rows")
    try:
        conn.executemany(
            "INSERT INTO indexed_messages (mid, account, chat_id, msg_id, content_hash)"
            " VALUES (?, ?, ?, ?, ?)",
            book_rows,
        )
    except sqlean.IntegrityError:
        # A reused mid still held under another key must not wedge the feed.
        conn.execute("ROLLBACK TO lexical_fresh_rows")
        conn.execute("RELEASE lexical_fresh_rows")
        _replace_messages(conn, fts_rows, book_rows)
        return
    conn.execute("RELEASE lexical_fresh_rows")
    conn.executemany("INSERT INTO msg_fts (rowid, raw, stem) VALUES (?, ?, ?)", fts_rows)


def _replace_messages(
    conn: db.Connection,
    fts_rows: Sequence[tuple[int, str, str]],
    book_rows: Sequence[tuple[int, str, int, int, str]],
) -> None:
    conn.executemany("INSERT OR REPLACE INTO msg_fts (rowid, raw, stem) VALUES (?, ?, ?)", fts_rows)
    conn.executemany(
        "INSERT OR REPLACE INTO indexed_messages (mid, account, chat_id, msg_id, content_hash)"
        " VALUES (?, ?, ?, ?, ?)",
        book_rows,
    )


def _apply_unit_events(conn: db.Connection, schema: str, after: int, last: int) -> int:
    ids = (
        f"SELECT DISTINCT entity AS unit_id FROM {schema}._feed"
        f" WHERE seq > :after AND seq <= :last AND kind = '{UNIT_EVENT}'"
    )
    span = {"after": after, "last": last}
    current = conn.execute(
        "SELECT u.unit_id, u.account, u.chat_id, u.kind, u.text, u.content_hash"
        f" FROM ({ids}) k JOIN unitize.units u ON u.unit_id = k.unit_id"
        " ORDER BY u.unit_id",
        span,
    ).fetchall()
    indexed = conn.execute(
        "SELECT i.unit_id, i.kind, i.content_hash"
        f" FROM ({ids}) k JOIN indexed_units i ON i.unit_id = k.unit_id",
        span,
    ).fetchall()
    old = {int(r[0]): (str(r[1]), str(r[2])) for r in indexed}
    keep: set[int] = set()
    rows: list[tuple[int, str, int, str, str, str]] = []
    for unit_id, account, chat_id, kind, text, content_hash in current:
        digest = _unit_hash(content_hash)
        if old.get(unit_id) == (kind, digest):
            keep.add(unit_id)
            continue
        rows.append((unit_id, account, chat_id, kind, text, digest))
    rewritten = {(row[0], fts_table(row[3])) for row in rows}
    gone = [
        (unit_id, kind)
        for unit_id, (kind, _) in sorted(old.items())
        if unit_id not in keep and (unit_id, fts_table(kind)) not in rewritten
    ]
    _delete_units(conn, gone)
    _write_units(conn, rows)
    return len(gone) + len(rows)


def _delete_units(conn: db.Connection, gone: Iterable[tuple[int, str]]) -> None:
    by_table: dict[str, list[tuple[int]]] = {"unit_fts": [], "chunk_fts": []}
    for unit_id, kind in sorted(gone):
        by_table[fts_table(kind)].append((unit_id,))
    for table, ids in by_table.items():
        conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", ids)
        conn.executemany("DELETE FROM indexed_units WHERE unit_id = ?", ids)


def _write_units(
    conn: db.Connection, rows: Sequence[tuple[int, str, int, str, str, str]]
) -> tuple[int, int]:
    by_table: dict[str, list[tuple[int, str, str]]] = {"unit_fts": [], "chunk_fts": []}
    for unit_id, _account, _chat_id, kind, text, _digest in sorted(rows):
        raw, stemmed = unit_columns(text)
        by_table[fts_table(kind)].append((unit_id, raw, stemmed))
    for table, fts_rows in by_table.items():
        conn.executemany(
            f"INSERT OR REPLACE INTO {table} (rowid, raw, stem) VALUES (?, ?, ?)", fts_rows
        )
    conn.executemany(
        "INSERT OR REPLACE INTO indexed_units (unit_id, account, chat_id, kind, content_hash)"
        " VALUES (?, ?, ?, ?, ?)",
        [(u, a, c, k, d) for u, a, c, k, _t, d in rows],
    )
    return len(by_table["unit_fts"]), len(by_table["chunk_fts"])


# --- rebuild and drop ---


def rebuild(conn: db.Connection, *, fetch: int = REBUILD_FETCH) -> IndexCounts:
    """Drop every FTS row and cursor and index the owners' current rows again (``reindex``).

    Runs as one transaction over one snapshot of each producer file: the cursors are set to
    the feed heads of that snapshot, so later events are applied by ``apply_feeds`` and
    nothing in between is lost. Readers keep the old index until the commit.

    Args:
        conn: lexical.db with ``ingest`` and ``unitize`` attached.
        fetch: rows read from a producer per step (bounds memory).

    Returns:
        How many messages, units and chunks were indexed.
    """
    started = time.perf_counter()
    messages = units = chunks = 0
    with db.storage_errors(), db.transaction(conn):
        for table in ("msg_fts", "unit_fts", "chunk_fts"):
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('delete-all')")
        conn.execute("DELETE FROM indexed_messages")
        conn.execute("DELETE FROM indexed_units")
        conn.execute("DELETE FROM _cursors WHERE feed IN (?, ?)", (FEED_INGEST, FEED_UNITIZE))
        ingest_head = head(conn, INGEST_SCHEMA)
        unitize_head = head(conn, UNITIZE_SCHEMA)
        source = conn.execute(
            "SELECT m.mid, m.account, m.chat_id, m.msg_id, m.text, md.file_name,"
            " md.extracted_text FROM ingest.messages m LEFT JOIN ingest.media md ON md.mid = m.mid"
            " ORDER BY m.mid"
        )
        while chunk := source.fetchmany(fetch):
            fts_rows: list[tuple[int, str, str]] = []
            book_rows: list[tuple[int, str, int, int, str]] = []
            for mid, account, chat_id, msg_id, text, file_name, extracted in chunk:
                content = message_content(text, file_name, extracted)
                raw, stemmed = index_columns(content)
                fts_rows.append((mid, raw, stemmed))
                book_rows.append((mid, account, chat_id, msg_id, _content_hash(content)))
            _write_messages(conn, fts_rows, book_rows)
            messages += len(fts_rows)
        source = conn.execute(
            "SELECT unit_id, account, chat_id, kind, text, content_hash FROM unitize.units"
            " ORDER BY unit_id"
        )
        while unit_chunk := source.fetchmany(min(fetch, UNIT_BATCH_MAX)):
            written = _write_units(
                conn, [(u, a, c, k, t, _unit_hash(h)) for u, a, c, k, t, h in unit_chunk]
            )
            units += written[0]
            chunks += written[1]
        set_cursor(conn, FEED_INGEST, ingest_head)
        set_cursor(conn, FEED_UNITIZE, unitize_head)
    log.info(
        "lexical rebuilt: %d messages, %d units, %d chunks in %.0f ms",
        messages,
        units,
        chunks,
        (time.perf_counter() - started) * 1000,
    )
    return IndexCounts(messages=messages, units=units, chunks=chunks)


def drop_chat(conn: db.Connection, account: str, chat_id: int) -> int:
    """Remove every FTS row of one chat (messages, units and chunks); cursors do not move.

    Meant for a chat removed from the store or about to be re-imported: its rows come back
    only through new feed events or ``rebuild``.

    Returns:
        The number of FTS rows removed.
    """
    with db.storage_errors(), db.transaction(conn):
        mids = conn.execute(
            "SELECT mid FROM indexed_messages WHERE account = ? AND chat_id = ? ORDER BY mid",
            (account, chat_id),
        ).fetchall()
        gone_messages = [(int(r[0]),) for r in mids]
        conn.executemany("DELETE FROM msg_fts WHERE rowid = ?", gone_messages)
        conn.executemany("DELETE FROM indexed_messages WHERE mid = ?", gone_messages)
        unit_rows = conn.execute(
            "SELECT unit_id, kind FROM indexed_units WHERE account = ? AND chat_id = ?",
            (account, chat_id),
        ).fetchall()
        gone_units = [(int(r[0]), str(r[1])) for r in unit_rows]
        _delete_units(conn, gone_units)
    log.info(
        "lexical dropped chat %s/%d: %d messages, %d units",
        account,
        chat_id,
        len(gone_messages),
        len(gone_units),
    )
    return len(gone_messages) + len(gone_units)
