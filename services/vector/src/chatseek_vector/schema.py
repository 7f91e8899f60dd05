"""The schema of ``vector.db``: the embedding space, the vector cache and the vec0 tables.

One space at a time is current (``spaces.current = 1``); its identity (model name, revision,
dimension, normaliser) is checked before every write and every query. Vectors live in
``vec_<space_id>`` vec0 tables created per space, partitioned by chat, keyed by unitize's
``unit_id`` with the unit's start time and kind as metadata. ``vector_cache`` maps
(space, content hash) to a vector so identical text is never embedded twice.
``vector_changes`` (m002) holds, per embedded unit, the sequence number of its latest insert,
update or delete, written by triggers on ``embedded_units``; the quantised KNN path reads it to
keep its in-memory sign codes in step (``knn``). m003 makes ``vector_cache`` a rowid table: a
vector is larger than a WITHOUT ROWID row should be, and there every entry spilled onto an
overflow page in random hash order (2.8x its bytes on disk, most of each batch's WAL pages).
"""

from __future__ import annotations

from chatseek_core.db import Migration
from chatseek_core.feed import CURSOR_DDL

__all__ = ["MIGRATIONS", "OWNER"]

OWNER = "vector"

_M001 = (
    """
CREATE TABLE spaces (
    space_id INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    revision TEXT NOT NULL,
    dim INTEGER NOT NULL,
    normalized INTEGER NOT NULL,
    current INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL DEFAULT (unixepoch()),
    UNIQUE (model, revision, dim)
);

CREATE TABLE vector_cache (
    space_id INTEGER NOT NULL REFERENCES spaces(space_id) ON DELETE CASCADE,
    content_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (space_id, content_hash)
) WITHOUT ROWID;

CREATE TABLE embedded_units (
    space_id INTEGER NOT NULL REFERENCES spaces(space_id) ON DELETE CASCADE,
    unit_id INTEGER NOT NULL,
    account TEXT NOT NULL,
    chat_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    PRIMARY KEY (space_id, unit_id)
) WITHOUT ROWID;
CREATE INDEX embedded_units_by_chat ON embedded_units(space_id, account, chat_id);

CREATE TABLE pending_units (
    unit_id INTEGER PRIMARY KEY,
    account TEXT NOT NULL,
    chat_id INTEGER NOT NULL
);
"""
    + CURSOR_DDL
)

_M002 = """
CREATE TABLE vector_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    space_id INTEGER NOT NULL REFERENCES spaces(space_id) ON DELETE CASCADE,
    unit_id INTEGER NOT NULL
);
CREATE UNIQUE INDEX vector_changes_by_unit ON vector_changes(space_id, unit_id);

CREATE TRIGGER embedded_units_insert_change AFTER INSERT ON embedded_units
BEGIN
    DELETE FROM vector_changes WHERE space_id = NEW.space_id AND unit_id = NEW.unit_id;
    INSERT INTO vector_changes (space_id, unit_id) VALUES (NEW.space_id, NEW.unit_id);
END;

CREATE TRIGGER embedded_units_update_change AFTER UPDATE ON embedded_units
BEGIN
    DELETE FROM vector_changes WHERE space_id = NEW.space_id AND unit_id = NEW.unit_id;
    INSERT INTO vector_changes (space_id, unit_id) VALUES (NEW.space_id, NEW.unit_id);
END;

CREATE TRIGGER embedded_units_delete_change AFTER DELETE ON embedded_units
BEGIN
    DELETE FROM vector_changes WHERE space_id = OLD.space_id AND unit_id = OLD.unit_id;
    INSERT INTO vector_changes (space_id, unit_id)
        SELECT OLD.space_id, OLD.unit_id WHERE EXISTS (
            SELECT 1 FROM spaces WHERE space_id = OLD.space_id
        );
END;
"""

_M003 = """
CREATE TABLE vector_cache_rowid (
    space_id INTEGER NOT NULL REFERENCES spaces(space_id) ON DELETE CASCADE,
    content_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (space_id, content_hash)
);
INSERT INTO vector_cache_rowid (space_id, content_hash, vector)
    SELECT space_id, content_hash, vector FROM vector_cache;
DROP TABLE vector_cache;
ALTER TABLE vector_cache_rowid RENAME TO vector_cache;
"""

MIGRATIONS = [
    Migration(1, "initial", _M001),
    Migration(2, "vector_changes", _M002),
    Migration(3, "vector_cache_rowid", _M003),
]
