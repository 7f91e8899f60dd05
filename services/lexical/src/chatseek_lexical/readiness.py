"""Whether the word indexes are complete: lexical's cursors against the producers' feed heads.

Invariants:
* ``words_ready`` is true only when, for both the ingest and the unitize feed, the cursor in
  lexical.db equals the feed's head: every stored message and unit is indexed.
* A cursor past its head means a producer file was replaced under the index: never ready,
  reported as ``needs_rebuild`` until ``chatseek reindex lexical`` runs.
* A strict search is answered as of its arrival: ``message_lag`` gives the ingest head it must
  see indexed, and ``messages_indexed_through`` says when the cursor has reached it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from chatseek_core import db
from chatseek_core.errors import IndexNotReady
from chatseek_core.feed import cursor, head
from chatseek_lexical.indexer import FEED_INGEST, FEED_UNITIZE, INGEST_SCHEMA, UNITIZE_SCHEMA

__all__ = [
    "FeedLag",
    "WordsStatus",
    "message_lag",
    "messages_indexed_through",
    "require_words_ready",
    "words_ready",
    "words_status",
]

_FEEDS = ((FEED_INGEST, INGEST_SCHEMA), (FEED_UNITIZE, UNITIZE_SCHEMA))


@dataclass(frozen=True, slots=True)
class FeedLag:
    """How far lexical is behind one feed.

    Attributes:
        feed: the feed's name (``ingest`` or ``unitize``).
        cursor: the last sequence number lexical has indexed.
        head: the newest sequence number on the feed.
        behind: events on the feed after the cursor, still to index.
    """

    feed: str
    cursor: int
    head: int
    behind: int

    @property
    def caught_up(self) -> bool:
        """True when every event of the feed is indexed."""
        return self.cursor == self.head

    @property
    def needs_rebuild(self) -> bool:
        """True when the cursor is past the head: the producer's file was replaced."""
        return self.cursor > self.head


@dataclass(frozen=True, slots=True)
class WordsStatus:
    """The word indexes' state for ``chatseek status``: per-feed lag and indexed row counts.

    The counts are None in a brief status (``words_status(counts=False)``).
    """

    feeds: tuple[FeedLag, ...]
    messages: int | None
    units: int | None

    @property
    def ready(self) -> bool:
        """True only when every feed is caught up."""
        return all(f.caught_up for f in self.feeds)

    @property
    def behind(self) -> int:
        """Events still to index, over all feeds."""
        return sum(f.behind for f in self.feeds)


def _lag(conn: db.Connection, feed_name: str, schema: str) -> FeedLag:
    position = cursor(conn, feed_name)
    newest = head(conn, schema)
    row = conn.execute(f"SELECT count(*) FROM {schema}._feed WHERE seq > ?", (position,)).fetchone()
    return FeedLag(feed=feed_name, cursor=position, head=newest, behind=int(row[0]))


def words_status(conn: db.Connection, *, counts: bool = True) -> WordsStatus:
    """Lag per feed and the number of indexed messages and units, read in one snapshot.

    Args:
        conn: lexical.db with ``ingest`` and ``unitize`` attached.
        counts: count the indexed rows (a walk over two tables, tens of milliseconds at a
            million messages); without them only the lag is read.
    """
    messages = units = None
    with db.storage_errors(), _snapshot(conn):
        feeds = tuple(_lag(conn, name, schema) for name, schema in _FEEDS)
        if counts:
            messages = int(conn.execute("SELECT count(*) FROM indexed_messages").fetchone()[0])
            units = int(conn.execute("SELECT count(*) FROM indexed_units").fetchone()[0])
    return WordsStatus(feeds=feeds, messages=messages, units=units)


@contextlib.contextmanager
def _snapshot(conn: db.Connection) -> Iterator[None]:
    """A read transaction, so counts over several files agree; joins an open transaction."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


def words_ready(conn: db.Connection) -> bool:
    """True only when everything stored in ingest.db and unitize.db is in the word indexes."""
    with db.storage_errors():
        return all(cursor(conn, name) == head(conn, schema) for name, schema in _FEEDS)


def message_lag(conn: db.Connection) -> FeedLag:
    """How far the message word index is behind the messages stored in ingest.db now."""
    with db.storage_errors(), _snapshot(conn):
        return _lag(conn, FEED_INGEST, INGEST_SCHEMA)


def messages_indexed_through(conn: db.Connection, seq: int) -> bool:
    """True when every ingest feed event up to ``seq`` is in the message word index."""
    with db.storage_errors():
        return cursor(conn, FEED_INGEST) >= seq


def require_words_ready(conn: db.Connection) -> None:
    """Return when the word indexes are complete.

    Raises:
        IndexNotReady: some feed is not fully indexed; metadata gives each feed's lag.
    """
    status = words_status(conn)
    if status.ready:
        return
    metadata = {f"{f.feed}_behind": str(f.behind) for f in status.feeds}
    rebuild = any(f.needs_rebuild for f in status.feeds)
    if rebuild:
        metadata["needs_rebuild"] = "true"
    raise IndexNotReady(
        f"the word index is {status.behind} change(s) behind the stored messages and units",
        hint="run `chatseek reindex lexical`"
        if rebuild
        else "wait for indexing to finish (see `chatseek status`) and retry",
        metadata=metadata,
    )
