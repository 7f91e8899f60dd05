"""Reading the queue and writing vectors in batches, on real SQLite files (no gRPC)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from chatseek_core import db, feed
from chatseek_unitize.schema import MIGRATIONS as UNITIZE_MIGRATIONS
from chatseek_vector import index, spaces
from chatseek_vector.schema import MIGRATIONS, OWNER

DIM = 8
IDENTITY = spaces.Identity("test/model", "1", DIM, True)


def _units(path: Path, texts: dict[int, str]) -> None:
    conn = db.connect(path)
    db.migrate(conn, "unitize", UNITIZE_MIGRATIONS)
    with db.transaction(conn):
        for unit_id, text in texts.items():
            conn.execute(
                "INSERT INTO units (unit_id, account, chat_id, kind, key, first_msg_id,"
                " last_msg_id, start_date, end_date, msg_ids, senders, text, content_hash,"
                " recipe) VALUES (?, 'default', -1, 'window', ?, ?, ?, 0, 0, ?, '[]', ?, ?, 1)"
                " ON CONFLICT (unit_id) DO UPDATE SET text = excluded.text,"
                " content_hash = excluded.content_hash",
                (
                    unit_id,
                    f"w:{unit_id}",
                    unit_id,
                    unit_id,
                    json.dumps([unit_id]),
                    text,
                    hashlib.sha256(text.encode()).hexdigest(),
                ),
            )
            feed.append(conn, [("unit", "default", -1, unit_id, "upsert")])
    conn.close()


@pytest.fixture
def vector_db(tmp_path: Path) -> Iterator[tuple[db.Connection, spaces.Space, Path]]:
    """vector.db migrated, with unitize.db attached and a current space."""
    _units(tmp_path / "unitize.db", {1: "a" * 10, 2: "b" * 30, 3: "c" * 30, 4: "a" * 10})
    conn = db.connect(tmp_path / "vector.db", vec=True)
    db.migrate(conn, OWNER, MIGRATIONS)
    db.attach_readonly(conn, tmp_path / "unitize.db", "unitize")
    while index.apply_unit_feed(conn):
        pass
    with db.transaction(conn):
        space = spaces.create_space(conn, IDENTITY)
    yield conn, space, tmp_path
    conn.close()


def _vector(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(DIM).astype("<f4")


def test_take_pending_pages_by_unit_id_and_bounds_a_batch_by_its_text(
    vector_db: tuple[db.Connection, spaces.Space, Path],
) -> None:
    conn, space, _ = vector_db
    assert [u.unit_id for u in index.take_pending(conn, space, 10)] == [1, 2, 3, 4]
    assert [u.unit_id for u in index.take_pending(conn, space, 10, after=2)] == [3, 4]
    assert [u.unit_id for u in index.take_pending(conn, space, 10, max_chars=45)] == [1, 2]
    assert [u.unit_id for u in index.take_pending(conn, space, 10, max_chars=5)] == [1]


def test_the_queues_text_is_summed_whole_or_sized_from_evenly_spaced_units(
    vector_db: tuple[db.Connection, spaces.Space, Path],
) -> None:
    conn, space, tmp_path = vector_db
    assert index.pending_chars(conn, 4) == 80.0  # 10 + 30 + 30 + 10, every unit read
    # Every second unit of the queue (2 and 4): their mean, 20 characters, times four.
    assert index.pending_chars(conn, 4, sample=2) == 80.0
    _units(tmp_path / "unitize.db", {5: "e" * 100, 6: "f" * 20})
    while index.apply_unit_feed(conn):
        pass
    # Units 2, 4 and 6 stand for the six: (30 + 10 + 20) / 3 * 6.
    assert index.pending_chars(conn, 6, sample=3) == 120.0
    assert index.pending_chars(conn, 6) == 200.0
    first = index.take_pending(conn, space, 5)
    index.store_vectors(conn, space, [(u, _vector(u.unit_id)) for u in first])
    assert index.pending_chars(conn, 1) == 20.0
    assert index.pending_chars(conn, 0) == 0.0


def test_units_made_since_the_feed_was_read_are_counted_with_their_text(
    vector_db: tuple[db.Connection, spaces.Space, Path],
) -> None:
    conn, _, tmp_path = vector_db
    assert (index.unqueued_count(conn), index.unqueued_chars(conn, 0)) == (0, 0.0)
    _units(tmp_path / "unitize.db", {5: "e" * 100, 6: "f" * 20})
    _units(tmp_path / "unitize.db", {5: "g" * 40})  # changed again: one unit, its last text
    assert index.unqueued_count(conn) == 2
    assert index.unqueued_chars(conn, 2) == 60.0
    assert index.unqueued_chars(conn, 2, sample=1) == 40.0  # unit 6 of the two, times two
    while index.apply_unit_feed(conn):
        pass
    assert index.unqueued_count(conn) == 0
    assert index.pending_chars(conn, 6) == 140.0


def test_a_batch_is_written_whole_and_a_cached_text_costs_no_budget(
    vector_db: tuple[db.Connection, spaces.Space, Path],
) -> None:
    conn, space, _ = vector_db
    first = index.take_pending(conn, space, 1)
    assert index.store_vectors(conn, space, [(first[0], _vector(1))]) == 1
    rest = index.take_pending(conn, space, 10, max_chars=60)
    assert [(u.unit_id, u.cached is not None) for u in rest] == [
        (2, False),
        (3, False),
        (4, True),
    ]
    items = [(u, _vector(u.unit_id)) for u in rest]
    assert index.store_vectors(conn, space, items + [items[0]]) == 3
    counts = conn.execute(
        "SELECT (SELECT COUNT(*) FROM embedded_units), (SELECT COUNT(*) FROM vec_1),"
        " (SELECT COUNT(*) FROM vbit_1), (SELECT COUNT(*) FROM vector_cache),"
        " (SELECT COUNT(*) FROM pending_units)"
    ).fetchone()
    assert tuple(counts) == (4, 4, 4, 3, 0)


def test_a_re_embedded_unit_replaces_its_vectors_and_drops_its_unused_cache_entry(
    vector_db: tuple[db.Connection, spaces.Space, Path],
) -> None:
    conn, space, tmp_path = vector_db
    batch = index.take_pending(conn, space, 10)
    index.store_vectors(conn, space, [(u, _vector(u.unit_id)) for u in batch])
    _units(tmp_path / "unitize.db", {2: "d" * 30})
    while index.apply_unit_feed(conn):
        pass
    again = index.take_pending(conn, space, 10)
    assert [(u.unit_id, u.cached) for u in again] == [(2, None)]
    assert index.store_vectors(conn, space, [(again[0], _vector(9))]) == 1
    hashes = {str(r[0]) for r in conn.execute("SELECT content_hash FROM vector_cache").fetchall()}
    assert hashlib.sha256(b"b" * 30).hexdigest() not in hashes
    assert hashlib.sha256(b"d" * 30).hexdigest() in hashes
    rows = conn.execute("SELECT COUNT(*) FROM vec_1 WHERE unit_id = 2").fetchone()[0]
    assert rows == 1


def test_the_cache_keeps_its_entries_through_the_rowid_migration(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "vector.db", vec=True)
    db.migrate(conn, OWNER, MIGRATIONS[:2])
    with db.transaction(conn):
        space = spaces.create_space(conn, IDENTITY)
        conn.execute(
            "INSERT INTO vector_cache (space_id, content_hash, vector) VALUES (?, 'h', ?)",
            (space.space_id, _vector(3).tobytes()),
        )
    db.migrate(conn, OWNER, MIGRATIONS)
    row = conn.execute("SELECT vector FROM vector_cache WHERE content_hash = 'h'").fetchone()
    assert np.array_equal(np.frombuffer(row[0], dtype="<f4"), _vector(3))
    with db.transaction(conn):
        spaces.drop_space(conn, space.space_id)
    assert conn.execute("SELECT COUNT(*) FROM vector_cache").fetchone()[0] == 0
    conn.close()
