"""The database helpers: settings, transactions, migrations and read-only attachment."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlean

from chatseek_core import db, feed
from chatseek_core.errors import SchemaTooNew, StorageError

MIGRATIONS = [
    db.Migration(1, "one", "CREATE TABLE a (x INTEGER);"),
    db.Migration(2, "two", lambda conn: conn.execute("CREATE TABLE b (y INTEGER)")),
]


def test_connect_sets_wal_foreign_keys_and_busy_timeout(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "x.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == db.BUSY_TIMEOUT_MS


def test_memory_is_bounded_per_connection_without_a_process_heap_limit(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "x.db")
    db.attach_readonly(conn, _file_with_a_table(tmp_path / "other.db"), "other")
    for schema in ("main", "other"):
        assert conn.execute(f"PRAGMA {schema}.mmap_size").fetchone()[0] == 0
        assert -conn.execute(f"PRAGMA {schema}.cache_size").fetchone()[0] <= db.CACHE_SIZE_KIB
    # Process-wide, a soft heap limit slowed a service's concurrent query threads (see
    # db.CACHE_SIZE_KIB); the page caches above are the bound instead.
    assert conn.execute("PRAGMA soft_heap_limit").fetchone()[0] == 0


def test_a_query_pool_opens_its_connections_with_its_own_page_cache(tmp_path: Path) -> None:
    path = _file_with_a_table(tmp_path / "x.db")
    queries = db.ThreadConnections(path, readonly=True, cache_kib=3072)
    writes = db.ThreadConnections(path)
    try:
        assert -queries.get().execute("PRAGMA cache_size").fetchone()[0] == 3072
        assert -writes.get().execute("PRAGMA cache_size").fetchone()[0] == db.CACHE_SIZE_KIB
    finally:
        queries.close()
        writes.close()


def test_a_wal_past_its_limit_is_cut_back_once_a_checkpoint_resets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db, "WAL_SIZE_LIMIT_BYTES", 256 * 1024)
    path = tmp_path / "w.db"
    conn = db.connect(path)
    conn.execute("CREATE TABLE t (x BLOB)")
    with db.transaction(conn):
        conn.executemany("INSERT INTO t VALUES (randomblob(4096))", [()] * 1000)
    wal = Path(f"{path}-wal")
    assert wal.stat().st_size > 4 * 1024 * 1024
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    with db.transaction(conn):  # the first write after a full checkpoint restarts the WAL
        conn.execute("INSERT INTO t VALUES (1)")
    assert wal.stat().st_size <= 256 * 1024


def _file_with_a_table(path: Path) -> Path:
    conn = db.connect(path)
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.close()
    return path


def test_none_binds_as_null_through_the_registered_adapter(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "a.db")
    assert (type(None), sqlean.PrepareProtocol) in sqlean.adapters
    conn.execute("CREATE TABLE t (a, b TEXT, c INTEGER NOT NULL DEFAULT 7)")
    conn.executemany("INSERT INTO t (a, b) VALUES (?, ?)", [(None, None), (1, "x"), (None, "y")])
    rows = conn.execute("SELECT typeof(a), typeof(b), c FROM t ORDER BY rowid").fetchall()
    assert [tuple(r) for r in rows] == [
        ("null", "null", 7),
        ("integer", "text", 7),
        ("null", "text", 7),
    ]
    assert conn.execute("SELECT COUNT(*) FROM t WHERE a IS ?", (None,)).fetchone()[0] == 2
    with pytest.raises(sqlean.IntegrityError):
        conn.execute("INSERT INTO t (a, c) VALUES (?, ?)", (1, None))


@pytest.mark.parametrize("count", [0, 1, 5, 63, 64, 65, 130])
def test_insert_rows_lands_what_executemany_would_in_the_same_order(
    tmp_path: Path, count: int
) -> None:
    conn = db.connect(tmp_path / "a.db")
    ddl = "CREATE TABLE {} (id INTEGER PRIMARY KEY AUTOINCREMENT, a, b TEXT, c INTEGER)"
    conn.execute(ddl.format("t"))
    conn.execute(ddl.format("u"))
    rows = [(k * 3 if k % 4 else None, f"r{k}", -k) for k in range(count)]
    with db.transaction(conn):
        db.insert_rows(conn, "INSERT INTO t (a, b, c)", rows)
        conn.executemany("INSERT INTO u (a, b, c) VALUES (?, ?, ?)", rows)
    got = "SELECT id, a, typeof(a), b, c FROM {} ORDER BY id"
    assert [tuple(r) for r in conn.execute(got.format("t"))] == [
        tuple(r) for r in conn.execute(got.format("u"))
    ]
    assert [tuple(r)[3] for r in conn.execute(got.format("t"))] == [f"r{k}" for k in range(count)]
    counter = "SELECT seq FROM sqlite_sequence WHERE name = ?"
    assert conn.execute(counter, ("t",)).fetchall() == conn.execute(counter, ("u",)).fetchall()


def test_insert_rows_with_or_ignore_skips_each_conflicting_row_alone(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "a.db")
    conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    conn.execute("INSERT INTO t VALUES (2, 'old'), (5, 'old')")
    db.insert_rows(conn, "INSERT OR IGNORE INTO t (k, v)", [(k, "new") for k in range(8)], per=3)
    assert [tuple(r) for r in conn.execute("SELECT k, v FROM t ORDER BY k")] == [
        (k, "old" if k in (2, 5) else "new") for k in range(8)
    ]


def test_a_row_insert_rows_cannot_insert_raises_and_the_transaction_keeps_nothing(
    tmp_path: Path,
) -> None:
    conn = db.connect(tmp_path / "a.db")
    conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
    conn.execute("INSERT INTO t VALUES (1, 'kept')")
    rows = [(k, "new" if k != 70 else None) for k in range(2, 100)]
    with pytest.raises(sqlean.IntegrityError), db.transaction(conn):
        db.insert_rows(conn, "INSERT INTO t (k, v)", rows)
    assert [tuple(r) for r in conn.execute("SELECT k, v FROM t")] == [(1, "kept")]


def test_bytes_bind_as_blobs_through_the_registered_adapter(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "a.db")
    assert (bytes, sqlean.PrepareProtocol) in sqlean.adapters
    conn.execute("CREATE TABLE t (a BLOB, b)")
    blobs = [b"", b"\x00\xff", bytes(range(256)) * 8]
    conn.executemany("INSERT INTO t (a, b) VALUES (?, ?)", [(v, bytearray(v)) for v in blobs])
    rows = conn.execute("SELECT a, typeof(a), b, typeof(b) FROM t ORDER BY rowid").fetchall()
    assert [tuple(r) for r in rows] == [(v, "blob", v, "blob") for v in blobs]
    assert conn.execute("SELECT COUNT(*) FROM t WHERE a = ?", (b"\x00\xff",)).fetchone()[0] == 1
    # Registering bytes must not turn adaptation on for the types the driver binds directly.
    assert conn.execute("SELECT typeof(?), typeof(?), typeof(?)", (1, 1.5, "x")).fetchone()[:] == (
        "integer",
        "real",
        "text",
    )


def test_sqlite_vec_loads_and_extension_loading_is_switched_off_again(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "v.db", vec=True)
    assert conn.execute("SELECT vec_version()").fetchone()[0].startswith("v")
    with pytest.raises(sqlean.OperationalError):
        conn.execute("SELECT load_extension('nothing')")


def test_migrations_apply_in_order_once(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "m.db")
    assert db.migrate(conn, "owner", MIGRATIONS) == 2
    assert db.migrate(conn, "owner", MIGRATIONS) == 2
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"a", "b", "_migrations"} <= names


def test_a_database_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "n.db")
    db.migrate(conn, "owner", MIGRATIONS)
    with pytest.raises(SchemaTooNew) as info:
        db.migrate(conn, "owner", MIGRATIONS[:1])
    assert info.value.metadata["found"] == "2"


def test_a_nested_transaction_joins_the_outer_one_and_rolls_back_with_it(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "t.db")
    db.migrate(conn, "owner", MIGRATIONS)
    with pytest.raises(RuntimeError), db.transaction(conn):
        conn.execute("INSERT INTO a VALUES (1)")
        with db.transaction(conn):
            conn.execute("INSERT INTO a VALUES (2)")
        raise RuntimeError("boom")
    assert conn.execute("SELECT COUNT(*) FROM a").fetchone()[0] == 0


def test_an_attached_database_is_read_only(tmp_path: Path) -> None:
    owner = db.connect(tmp_path / "owner.db")
    db.migrate(owner, "owner", MIGRATIONS)
    with db.transaction(owner):
        owner.execute("INSERT INTO a VALUES (7)")
    reader = db.connect(tmp_path / "reader.db")
    db.attach_readonly(reader, tmp_path / "owner.db", "other")
    assert reader.execute("SELECT x FROM other.a").fetchone()[0] == 7
    with pytest.raises(sqlean.OperationalError):
        reader.execute("INSERT INTO other.a VALUES (8)")


def test_attaching_a_missing_file_names_the_owner_to_start(tmp_path: Path) -> None:
    reader = db.connect(tmp_path / "reader.db")
    with pytest.raises(StorageError):
        db.attach_readonly(reader, tmp_path / "absent.db", "absent")


def test_a_read_only_data_file_gives_a_storage_error_and_keeps_the_data(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    conn = db.connect(path)
    db.migrate(conn, "owner", MIGRATIONS)
    with db.transaction(conn):
        conn.execute("INSERT INTO a VALUES (1)")
    conn.close()
    ro = db.connect(path, readonly=True)
    with pytest.raises(StorageError), db.transaction(ro):
        ro.execute("INSERT INTO a VALUES (2)")
    assert ro.execute("SELECT COUNT(*) FROM a").fetchone()[0] == 1


def test_a_full_database_gives_a_storage_error_and_keeps_what_was_committed(
    tmp_path: Path,
) -> None:
    conn = db.connect(tmp_path / "small.db")
    db.migrate(conn, "owner", MIGRATIONS)
    with db.transaction(conn):
        conn.execute("INSERT INTO a VALUES (1)")
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "database or disk is full"
    with pytest.raises(StorageError) as caught, db.transaction(conn):
        conn.executemany("INSERT INTO a VALUES (?)", [(n,) for n in range(100_000)])
    assert "free disk space" in caught.value.hint
    assert conn.execute("SELECT COUNT(*) FROM a").fetchone()[0] == 1
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _writes_anyway(folder: Path) -> bool:
    try:
        (folder / "probe").touch()
    except PermissionError:
        return False
    (folder / "probe").unlink()
    return True


def test_a_data_directory_that_cannot_be_written_is_named_with_what_to_do(
    tmp_path: Path,
) -> None:
    db.connect(tmp_path / "owner.db").close()
    (tmp_path / "owner.db").chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        if _writes_anyway(tmp_path):
            pytest.skip("this process writes through permissions (root); test_storage.py covers it")
        with pytest.raises(StorageError) as caught:
            db.connect(tmp_path / "owner.db")
    finally:
        tmp_path.chmod(0o755)
    assert "read-only" in caught.value.message
    assert "make the data directory writable" in caught.value.hint


def test_a_producer_counts_as_attached_only_once_its_feed_exists(tmp_path: Path) -> None:
    producer = db.connect(tmp_path / "producer.db")  # created, not migrated yet
    pool = db.ThreadConnections(
        tmp_path / "consumer.db", attach={"producer": tmp_path / "producer.db"}
    )
    try:
        assert not pool.attached("producer")
        producer.executescript(feed.FEED_DDL)
        assert pool.attached("producer")
        assert feed.head(pool.get(), "producer") == 0
    finally:
        pool.close()
        producer.close()


def _fill(pool: db.ThreadConnections, rows: int) -> None:
    conn = pool.get()
    conn.execute("CREATE TABLE t (x TEXT)")
    with db.transaction(conn):
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 200,) for _ in range(rows)])


def test_an_owner_pool_closing_beside_a_reader_truncates_its_write_ahead_log(
    tmp_path: Path,
) -> None:
    path = tmp_path / "owner.db"
    pool = db.ThreadConnections(path)
    _fill(pool, 5000)
    wal = tmp_path / "owner.db-wal"
    reader = db.connect(path, readonly=True)  # another service's ATTACH, still open
    assert reader.execute("SELECT count(*) FROM t").fetchone()[0] == 5000
    assert wal.stat().st_size > 0

    pool.close()

    assert wal.stat().st_size == 0
    assert reader.execute("SELECT count(*) FROM t").fetchone()[0] == 5000
    reader.close()


@contextlib.contextmanager
def _filled_pool_with_a_reader(path: Path) -> Iterator[db.ThreadConnections]:
    """An owner pool of 100 rows while another connection holds a read transaction on it."""
    pool = db.ThreadConnections(path)
    _fill(pool, 100)
    reader = db.connect(path, readonly=True)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchone()
    try:
        yield pool
    finally:
        reader.execute("COMMIT")
        reader.close()


def test_a_checkpoint_a_reader_keeps_busy_says_so_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "owner.db"
    with _filled_pool_with_a_reader(path) as pool:
        assert db.checkpoint(pool.get(), busy_timeout_ms=0) is False

    pool.close()
    again = db.connect(path)
    assert again.execute("SELECT count(*) FROM t").fetchone()[0] == 100


def test_closing_an_owner_pool_logs_the_checkpoint_numbers_and_the_wal_left_every_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pool = db.ThreadConnections(tmp_path / "owner.db")
    _fill(pool, 100)

    with caplog.at_level(logging.INFO, logger="chatseek_core.db"):
        pool.close()

    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any(
        re.fullmatch(
            r"checkpoint of owner\.db on close: busy=0 log=0 checkpointed=0;"
            r" owner\.db-wal [1-9]\d* B before, 0 B after",
            message,
        )
        for message in infos
    ), infos
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_close_that_readers_keep_busy_logs_the_numbers_and_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db, "CHECKPOINT_BUSY_TIMEOUT_MS", 0)
    path = tmp_path / "owner.db"
    with (
        _filled_pool_with_a_reader(path) as pool,
        caplog.at_level(logging.INFO, logger="chatseek_core.db"),
    ):
        pool.close()

    [info] = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert re.fullmatch(
        r"checkpoint of owner\.db on close: busy=1 log=\d+ checkpointed=\d+;"
        r" owner\.db-wal [1-9]\d* B before, [1-9]\d* B after",
        info,
    ), info
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"no checkpoint of {path} on close: readers kept its WAL busy"]


# --- commit hooks ---


def test_a_commit_hook_sees_each_writing_commit_before_and_after_but_no_empty_or_joined_one(
    tmp_path: Path,
) -> None:
    conn = db.connect(tmp_path / "hooked.db")
    conn.execute("CREATE TABLE t (n INTEGER)")
    seen: list[tuple[str, int]] = []

    def hook(c: db.Connection, phase: str) -> None:
        seen.append((phase, int(c.execute("SELECT count(*) FROM t").fetchone()[0])))

    remove = db.add_commit_hook(hook)
    try:
        with db.transaction(conn):
            conn.execute("SELECT 1").fetchone()
        with db.transaction(conn), db.transaction(conn):
            conn.execute("INSERT INTO t VALUES (1)")
    finally:
        remove()
    with db.transaction(conn):
        conn.execute("INSERT INTO t VALUES (2)")
    assert seen == [("before", 1), ("after", 1)]


def test_a_hook_that_raises_before_the_commit_rolls_the_transaction_back(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "hooked.db")
    conn.execute("CREATE TABLE t (n INTEGER)")

    def refuse(c: db.Connection, phase: str) -> None:
        if phase == "before":
            raise RuntimeError("refused")

    remove = db.add_commit_hook(refuse)
    try:
        with pytest.raises(RuntimeError, match="refused"), db.transaction(conn):
            conn.execute("INSERT INTO t VALUES (1)")
    finally:
        remove()
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    assert not conn.in_transaction
