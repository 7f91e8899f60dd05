"""Keeping ``vector.db`` in step with the unitize feed, and writing vectors.

Invariants:
* The feed consumer only queues work: an upserted unit goes to ``pending_units``; a deleted
  unit's vectors (in every space) and its cache entries that no other embedded text uses are
  removed. The cursor advances in the same transaction.
* Embedding happens outside transactions (it is slow); writing a batch is one transaction that
  first checks each unit still has the text that was embedded, so a unit re-cut meanwhile stays
  pending instead of getting a stale vector.
* The cache maps (space, content hash) to a vector: identical text is embedded once. An entry
  lives while an embedded unit has that text: a unit deleted, or re-embedded with new text (a
  message of it deleted or edited), takes the entries no other unit uses along.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from chatseek_core import db, feed
from chatseek_core.db import Connection
from chatseek_vector.spaces import Space, bit_table, float_table

__all__ = [
    "FEED",
    "PendingUnit",
    "apply_unit_feed",
    "drop_orphan_pending",
    "pending_chars",
    "pending_count",
    "remove_unit",
    "requeue_all",
    "status",
    "store_vectors",
    "take_pending",
    "unqueued_chars",
    "unqueued_count",
]

FEED = "unitize"
UNITIZE = "unitize"
FEED_BATCH = 2000
PENDING_SAMPLE = 512
"""Units whose texts ``pending_chars`` and ``unqueued_chars`` read to size what is left."""


@dataclass(frozen=True)
class PendingUnit:
    """A unit waiting for its vector, with its text and, when cached, its vector."""

    unit_id: int
    account: str
    chat_id: int
    kind: str
    start_date: int
    text: str
    content_hash: str
    cached: bytes | None


def _spaces(conn: Connection) -> list[int]:
    return [int(r[0]) for r in conn.execute("SELECT space_id FROM spaces")]


def _embedded_hash(conn: Connection, space_id: int, unit_id: int) -> str | None:
    row = conn.execute(
        "SELECT content_hash FROM embedded_units WHERE space_id = ? AND unit_id = ?",
        (space_id, unit_id),
    ).fetchone()
    return None if row is None else str(row[0])


def _drop_unused_cache(conn: Connection, space_id: int, content_hash: str) -> None:
    still_used = conn.execute(
        "SELECT 1 FROM embedded_units WHERE space_id = ? AND content_hash = ? LIMIT 1",
        (space_id, content_hash),
    ).fetchone()
    if still_used is None:
        conn.execute(
            "DELETE FROM vector_cache WHERE space_id = ? AND content_hash = ?",
            (space_id, content_hash),
        )


def remove_unit(conn: Connection, unit_id: int) -> None:
    """Delete a unit's vectors everywhere and cache entries nothing else uses. In a transaction."""
    for space_id in _spaces(conn):
        old_hash = _embedded_hash(conn, space_id, unit_id)
        conn.execute(f"DELETE FROM {float_table(space_id)} WHERE unit_id = ?", (unit_id,))
        conn.execute(f"DELETE FROM {bit_table(space_id)} WHERE unit_id = ?", (unit_id,))
        if old_hash is None:
            continue
        conn.execute(
            "DELETE FROM embedded_units WHERE space_id = ? AND unit_id = ?", (space_id, unit_id)
        )
        _drop_unused_cache(conn, space_id, old_hash)
    conn.execute("DELETE FROM pending_units WHERE unit_id = ?", (unit_id,))


def apply_unit_feed(conn: Connection, *, batch: int = FEED_BATCH) -> int:
    """Consume one batch of unitize events; returns how many were consumed.

    ``conn`` is vector.db with unitize.db attached as ``unitize``.
    """
    with db.transaction(conn):
        after = feed.cursor(conn, FEED)
        events = feed.read_after(conn, after, batch, schema=UNITIZE)
        if not events:
            return 0
        last: dict[int, str] = {}
        for event in events:
            if event.kind == "unit":
                last[event.entity] = event.op
        for unit_id, op in last.items():
            row = None
            if op == "upsert":
                row = conn.execute(
                    "SELECT account, chat_id FROM unitize.units WHERE unit_id = ?", (unit_id,)
                ).fetchone()
            if row is None:
                remove_unit(conn, unit_id)
                continue
            conn.execute(
                "INSERT INTO pending_units (unit_id, account, chat_id) VALUES (?, ?, ?)"
                " ON CONFLICT (unit_id) DO UPDATE SET account = excluded.account,"
                " chat_id = excluded.chat_id",
                (unit_id, row[0], row[1]),
            )
        feed.set_cursor(conn, FEED, events[-1].seq)
    return len(events)


def take_pending(
    conn: Connection,
    space: Space,
    limit: int,
    chat_ids: Sequence[int] | None = None,
    *,
    after: int = 0,
    max_chars: int = 0,
) -> list[PendingUnit]:
    """Up to ``limit`` pending units with their current text (and cached vector, if any).

    Units come in ``unit_id`` order, from the first above ``after``. With ``max_chars`` the batch
    ends before the unit whose uncached text would take it past that many characters (it always
    holds at least one unit), so one embed request stays small however long the units are.
    """
    where = " AND p.unit_id > ?"
    params: list[object] = [space.space_id, after]
    if chat_ids:
        where += f" AND p.chat_id IN ({','.join('?' for _ in chat_ids)})"
        params.extend(chat_ids)
    params.append(limit)
    rows = conn.execute(
        "SELECT p.unit_id, u.account, u.chat_id, u.kind, u.start_date, u.text, u.content_hash,"
        " c.vector FROM pending_units p"
        " JOIN unitize.units u ON u.unit_id = p.unit_id"
        " LEFT JOIN vector_cache c ON c.space_id = ? AND c.content_hash = u.content_hash"
        f" WHERE 1{where} ORDER BY p.unit_id LIMIT ?",
        params,
    ).fetchall()
    taken: list[PendingUnit] = []
    chars = 0
    for r in rows:
        if r[7] is None:
            chars += len(r[5])
            if max_chars and taken and chars > max_chars:
                break
        taken.append(
            PendingUnit(
                unit_id=int(r[0]),
                account=r[1],
                chat_id=int(r[2]),
                kind=r[3],
                start_date=int(r[4]),
                text=r[5],
                content_hash=r[6],
                cached=r[7],
            )
        )
    return taken


def drop_orphan_pending(conn: Connection) -> int:
    """Forget pending units whose unit no longer exists; returns how many."""
    with db.transaction(conn):
        cur = conn.execute(
            "DELETE FROM pending_units WHERE unit_id NOT IN (SELECT unit_id FROM unitize.units)"
        )
        return int(cur.rowcount)


def store_vectors(
    conn: Connection, space: Space, items: Sequence[tuple[PendingUnit, np.ndarray]]
) -> int:
    """Write vectors for units whose text is unchanged since it was read; returns how many.

    One transaction and one statement per table for the whole batch; a unit given twice keeps
    its last vector.
    """
    batch = {unit.unit_id: (unit, vector) for unit, vector in items}
    if not batch:
        return 0
    floats, bits = float_table(space.space_id), bit_table(space.space_id)
    ids = json.dumps(list(batch))
    with db.transaction(conn):
        now = dict(
            conn.execute(
                "SELECT u.unit_id, u.content_hash FROM json_each(?) j"
                " CROSS JOIN unitize.units u ON u.unit_id = j.value",
                (ids,),
            ).fetchall()
        )
        old = dict(
            conn.execute(
                "SELECT e.unit_id, e.content_hash FROM json_each(?) j"
                " CROSS JOIN embedded_units e ON e.space_id = ? AND e.unit_id = j.value",
                (ids, space.space_id),
            ).fetchall()
        )
        fresh = [(u, v) for u, v in batch.values() if now.get(u.unit_id) == u.content_hash]
        if not fresh:
            return 0
        # A unit without an embedded_units row has no vec0 rows (they are written together).
        replaced = [(u.unit_id,) for u, _ in fresh if u.unit_id in old]
        if replaced:
            conn.executemany(f"DELETE FROM {floats} WHERE unit_id = ?", replaced)
            conn.executemany(f"DELETE FROM {bits} WHERE unit_id = ?", replaced)
        rows = [
            (
                u.unit_id,
                u.chat_id,
                np.ascontiguousarray(v, dtype="<f4").tobytes(),
                u.start_date,
                u.kind,
                u.account,
            )
            for u, v in fresh
        ]
        conn.executemany(
            f"INSERT INTO {floats} (unit_id, chat_id, embedding, start_date, kind, account)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.executemany(
            f"INSERT INTO {bits} (unit_id, chat_id, embedding, start_date, kind, account)"
            " VALUES (?, ?, vec_quantize_binary(?), ?, ?, ?)",
            rows,
        )
        conn.executemany(
            "INSERT INTO embedded_units"
            " (space_id, unit_id, account, chat_id, kind, content_hash)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (space_id, unit_id) DO UPDATE SET"
            " account = excluded.account, chat_id = excluded.chat_id,"
            " kind = excluded.kind, content_hash = excluded.content_hash",
            [
                (space.space_id, u.unit_id, u.account, u.chat_id, u.kind, u.content_hash)
                for u, _ in fresh
            ],
        )
        conn.executemany(
            "INSERT INTO vector_cache (space_id, content_hash, vector) VALUES (?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            [
                (space.space_id, u.content_hash, row[2])
                for (u, _), row in zip(fresh, rows, strict=True)
            ],
        )
        conn.executemany(
            "DELETE FROM pending_units WHERE unit_id = ?", [(u.unit_id,) for u, _ in fresh]
        )
        for stale in {
            old[u.unit_id] for u, _ in fresh if old.get(u.unit_id, u.content_hash) != u.content_hash
        }:
            _drop_unused_cache(conn, space.space_id, stale)
    return len(fresh)


def pending_count(conn: Connection, chat_ids: Sequence[int] | None = None) -> int:
    """Units waiting for a vector (in the given chats)."""
    if chat_ids:
        marks = ",".join("?" for _ in chat_ids)
        row = conn.execute(
            f"SELECT COUNT(*) FROM pending_units WHERE chat_id IN ({marks})", list(chat_ids)
        ).fetchone()
    else:
        row = conn.execute("SELECT COUNT(*) FROM pending_units").fetchone()
    return int(row[0])


def pending_chars(conn: Connection, pending: int, sample: int = PENDING_SAMPLE) -> float:
    """About how many characters of text the ``pending`` queued units hold (``_text_of``)."""
    return _text_of(conn, "SELECT unit_id FROM pending_units", (), pending, sample)


def unqueued_count(conn: Connection) -> int:
    """Units unitize has made or changed that this service has not queued yet (its feed's
    tail). ``conn`` has unitize.db attached."""
    row = conn.execute(f"SELECT COUNT(*) FROM ({_UNQUEUED})", (feed.cursor(conn, FEED),))
    return int(row.fetchone()[0])


def unqueued_chars(conn: Connection, unqueued: int, sample: int = PENDING_SAMPLE) -> float:
    """About how many characters of text those ``unqueued`` units hold (``_text_of``)."""
    return _text_of(conn, _UNQUEUED, (feed.cursor(conn, FEED),), unqueued, sample)


_UNQUEUED = (
    f"SELECT DISTINCT entity AS unit_id FROM {UNITIZE}._feed"
    " WHERE seq > ? AND kind = 'unit' AND op = 'upsert'"
)


def _text_of(
    conn: Connection, ids: str, params: tuple[object, ...], count: int, sample: int
) -> float:
    """The characters of text of the ``count`` units ``ids`` selects: their number times the
    mean length of at most ``sample`` of them, taken at even steps in id order (every one of
    them when no more wait). An exact sum over a queue the size of a 1M-message archive's reads
    every unit's text (a third of a second on a synthetic 275k-unit queue); the sample reads a
    few hundred."""
    if count <= 0:
        return 0.0
    step = max(1, count // sample)
    row = conn.execute(
        "SELECT COUNT(*), SUM(length(u.text)) FROM"
        f" (SELECT unit_id, row_number() OVER (ORDER BY unit_id) AS k FROM ({ids})) p"
        f" JOIN {UNITIZE}.units u ON u.unit_id = p.unit_id WHERE p.k % ? = 0",
        (*params, step),
    ).fetchone()
    sampled, chars = int(row[0]), row[1]
    return float(chars) * count / sampled if sampled else 0.0


def requeue_all(conn: Connection) -> int:
    """Queue every unit for embedding (a re-embed); returns the queue length. In a transaction."""
    conn.execute(
        "INSERT INTO pending_units (unit_id, account, chat_id)"
        " SELECT unit_id, account, chat_id FROM unitize.units WHERE true"
        " ON CONFLICT (unit_id) DO NOTHING"
    )
    return pending_count(conn)


def status(conn: Connection, space: Space | None) -> dict[str, object]:
    """Embedded and pending units per chat, for ``chatseek embed status``."""
    chats: dict[tuple[str, int], dict[str, object]] = {}
    for account, chat_id, count in conn.execute(
        "SELECT account, chat_id, COUNT(*) FROM pending_units GROUP BY account, chat_id"
    ):
        chats[(account, chat_id)] = {"account": account, "chat_id": chat_id, "pending": count}
    if space is not None:
        for account, chat_id, count in conn.execute(
            "SELECT account, chat_id, COUNT(*) FROM embedded_units WHERE space_id = ?"
            " GROUP BY account, chat_id",
            (space.space_id,),
        ):
            entry = chats.setdefault(
                (account, chat_id), {"account": account, "chat_id": chat_id, "pending": 0}
            )
            entry["embedded"] = count
    for entry in chats.values():
        entry.setdefault("embedded", 0)
    return {
        "model": space.identity.model if space else None,
        "dim": space.identity.dim if space else None,
        "chats": sorted(chats.values(), key=lambda e: (str(e["account"]), int(str(e["chat_id"])))),
        "total_pending": pending_count(conn),
        "cached_vectors": int(conn.execute("SELECT COUNT(*) FROM vector_cache").fetchone()[0]),
    }
