"""Change feeds: how a producer announces its writes and how a consumer follows them.

A producer appends ``(seq, kind, account, chat_id, entity, op)`` rows to ``_feed`` in its own
database, inside the same transaction as the rows they announce. A consumer keeps its cursor in
``_cursors`` of *its own* database and advances it in the same transaction as what it derived, so
a crash at any point loses nothing and repeats nothing. Only one process writes a database, so
sequence numbers become visible in order and a cursor never skips a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from chatseek_core.db import Connection, insert_rows

__all__ = [
    "FEED_DDL",
    "CURSOR_DDL",
    "Event",
    "append",
    "cursor",
    "head",
    "read_after",
    "set_cursor",
]

FEED_DDL = """
CREATE TABLE IF NOT EXISTS _feed (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    account TEXT NOT NULL,
    chat_id INTEGER NOT NULL,
    entity INTEGER NOT NULL,
    op TEXT NOT NULL CHECK (op IN ('upsert', 'delete', 'recut')),
    at INTEGER NOT NULL DEFAULT (unixepoch())
);
"""

CURSOR_DDL = """
CREATE TABLE IF NOT EXISTS _cursors (
    feed TEXT PRIMARY KEY,
    seq INTEGER NOT NULL
);
"""


class Event(NamedTuple):
    """One feed row: ``entity`` is the producer's id (a message id, a unit id) within the chat.

    A tuple, not a dataclass: a consumer reads thousands a batch, and a row becomes one without
    a Python call per field (``_make``).
    """

    seq: int
    kind: str
    account: str
    chat_id: int
    entity: int
    op: str


def append(conn: Connection, events: Iterable[tuple[str, str, int, int, str]]) -> None:
    """Append ``(kind, account, chat_id, entity, op)`` events inside the writer's transaction."""
    insert_rows(
        conn,
        "INSERT INTO _feed (kind, account, chat_id, entity, op)",
        events if isinstance(events, Sequence) else list(events),
    )


def head(conn: Connection, schema: str = "main") -> int:
    """The newest sequence number of the feed in ``schema`` (0 when empty)."""
    row = conn.execute(f"SELECT COALESCE(MAX(seq), 0) FROM {schema}._feed").fetchone()
    return int(row[0])


def read_after(conn: Connection, after: int, limit: int, schema: str = "main") -> list[Event]:
    """Up to ``limit`` events with ``seq > after`` from the feed in ``schema``, in order."""
    cur = conn.execute(
        f"SELECT seq, kind, account, chat_id, entity, op FROM {schema}._feed"
        " WHERE seq > ? ORDER BY seq LIMIT ?",
        (after, limit),
    )
    return list(map(Event._make, cur.fetchall()))


def cursor(conn: Connection, feed: str) -> int:
    """This consumer's position in ``feed`` (0 before the first event)."""
    row = conn.execute("SELECT seq FROM _cursors WHERE feed = ?", (feed,)).fetchone()
    return int(row[0]) if row else 0


def set_cursor(conn: Connection, feed: str, seq: int) -> None:
    """Move this consumer's cursor; call inside the transaction that wrote the derived rows."""
    conn.execute(
        "INSERT INTO _cursors (feed, seq) VALUES (?, ?)"
        " ON CONFLICT (feed) DO UPDATE SET seq = excluded.seq",
        (feed, seq),
    )
