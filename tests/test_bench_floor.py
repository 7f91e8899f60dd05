"""The word index's floor in the bench times the rows the lexical indexer itself writes."""

from __future__ import annotations

from pathlib import Path

from bench.generate import generate
from bench.pipeline import index_floor
from chatseek_core import db
from chatseek_ingest.importer import import_export
from chatseek_lexical.indexer import apply_feeds, connect_index
from chatseek_testing.telegram import ingest_db
from chatseek_unitize.schema import MIGRATIONS as UNITIZE_MIGRATIONS
from chatseek_unitize.units import apply_ingest_feed

FTS_TABLES = ("msg_fts", "unit_fts", "chunk_fts")


def _instances(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every token occurrence (term, row, column, offset) of the three FTS tables."""
    conn = db.connect(path)
    out = {}
    for table in FTS_TABLES:
        conn.execute(
            f"CREATE VIRTUAL TABLE temp.{table}_i USING fts5vocab(main, {table}, instance)"
        )
        out[table] = [
            tuple(r) for r in conn.execute(f"SELECT * FROM temp.{table}_i ORDER BY 1, 2, 3, 4")
        ]
    conn.close()
    return out


def test_the_floor_inserts_exactly_the_rows_the_indexer_writes(tmp_path: Path) -> None:
    export = tmp_path / "export" / "result.json"
    generate(export, 400, seed=3)
    ingest = ingest_db(tmp_path / "ingest.db")
    import_export(ingest, "default", export.parent, reader_process=False)
    ingest.close()
    unitize = db.connect(tmp_path / "unitize.db")
    db.migrate(unitize, "unitize", UNITIZE_MIGRATIONS)
    db.attach_readonly(unitize, tmp_path / "ingest.db", "ingest")
    while apply_ingest_feed(unitize):
        pass
    unitize.close()
    lexical = connect_index(
        tmp_path / "lexical.db",
        ingest_path=tmp_path / "ingest.db",
        unitize_path=tmp_path / "unitize.db",
    )
    while apply_feeds(lexical):
        pass
    lexical.close()

    floor = index_floor(tmp_path / "ingest.db", tmp_path / "unitize.db", into=tmp_path / "floor.db")

    indexed = _instances(tmp_path / "lexical.db")
    assert indexed["msg_fts"] and indexed["unit_fts"]
    assert _instances(tmp_path / "floor.db") == indexed
    stored = db.connect(tmp_path / "ingest.db", readonly=True)
    assert floor.messages == stored.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    stored.close()
    assert floor.fts5_s > 0 and floor.analysis_s > 0
