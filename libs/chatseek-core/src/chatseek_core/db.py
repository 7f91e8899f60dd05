"""The only place a SQLite database is opened, plus transactions, migrations and ATTACH.

Invariants:
* Every connection uses the ``sqlean`` driver (the same SQLite everywhere, able to load
  sqlite-vec; None binds through a registered adapter, five times cheaper), WAL,
  ``synchronous=NORMAL``, a busy timeout and foreign keys; extension loading is switched on
  only while sqlite-vec loads and off again straight after.
* Every write runs inside ``transaction(conn)``: ``BEGIN IMMEDIATE``, or joins the open one.
* Each owner database has one named, append-only list of migrations recorded in ``_migrations``;
  a file migrated by newer code is refused with ``SchemaTooNew``, never downgraded.
* Other services' files are attached read-only (``mode=ro``) and never written.
* An owner's pool checkpoints its file into the database (``TRUNCATE``) when it closes: readers
  in other processes keep the last connection from deleting the WAL, so a stopped stack would
  otherwise leave every WAL at its high-water mark beside the file.

Commit hooks (``add_commit_hook``) see every writing COMMIT, just before and just after it;
empty transactions are not shown, so an idle poll never calls them. With no hook registered,
``transaction`` does no extra work. Nothing here reads the environment: the tests' fault
injection (``chatseek_testing.faults``) registers its kill point through this hook.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import sqlean

from chatseek_core.errors import (
    DatabaseBusy,
    ExtensionsUnsupported,
    SchemaTooNew,
    StorageError,
)

__all__ = [
    "CommitHook",
    "Connection",
    "Migration",
    "ThreadConnections",
    "add_commit_hook",
    "attach_readonly",
    "check_extensions",
    "checkpoint",
    "connect",
    "insert_rows",
    "migrate",
    "schema_version",
    "storage_error",
    "storage_errors",
    "transaction",
]

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 5000
# Memory has a byte bound. Each connection's page cache for its main file is at most
# CACHE_SIZE_KIB (attached files keep SQLite's default of 2 MiB); that is the bound, and no
# process-wide soft heap limit is set: with one (of any size), a service's query threads, each
# on its own connection, slowed one another although SQLite's memory stayed far below it
# (three ranked word lists at once at 1M: 388-435 ms against 262-314 without, at the same
# peak RSS; bench/PROFILES.md, "A heap limit that slowed the query threads"). Files are not
# memory-mapped: a mapped page counts in the process's RSS once per connection and file, so a
# service attaching two producers' files grew by up to 768 MiB of mappings at 1M messages; the
# OS page cache serves re-reads just as well. 16 MiB, not 32: a 100k import to words peaked
# 45-50 MiB lower over the four word-path services, at no CPU cost this host's noise could
# show (bench/PROFILES.md, "Page cache per connection").
CACHE_SIZE_KIB = 16 * 1024
# A connection that only answers queries re-reads pages the OS page cache already holds; its own
# cache buys no speed there and costs RSS on every query thread. 4 MiB: lexical's ranked lists at
# 1M read the same p50 as with 16 and peaked 37 MiB lower (bench/PROFILES.md, "Query threads'
# page caches").
QUERY_CACHE_SIZE_KIB = 4 * 1024
MMAP_SIZE_BYTES = 0
# A WAL file keeps its high-water size after a checkpoint resets it; past this it is cut back.
WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024
# How long a closing owner waits for readers in other processes to leave the WAL.
CHECKPOINT_BUSY_TIMEOUT_MS = 2000

if TYPE_CHECKING:
    from sqlite3 import Connection
else:
    Connection = sqlean.Connection


def _same(value: bytes | None) -> bytes | None:
    return value


# Binding None costs the driver a failed adapter lookup: two attribute probes that raise and
# format an AttributeError, about 2.7 µs a value (0.2 µs for an int), and a message row binds
# about ten. An adapter registered for None answers the lookup at once and binds NULL the same.
# bytes take the same lookup (only int, float, str and bytearray skip it): 1.0 against 0.25 µs
# a value with the adapter, for every vector blob the vector service writes. Neither type is
# one whose registration turns adaptation on for int, float or str.
sqlean.register_adapter(type(None), _same)
sqlean.register_adapter(bytes, _same)


def connect(
    path: Path | str,
    *,
    readonly: bool = False,
    vec: bool = False,
    check_same_thread: bool = False,
    cache_kib: int = CACHE_SIZE_KIB,
) -> Connection:
    """Open ``path`` with the house settings.

    Args:
        path: a database file, or ``":memory:"``.
        readonly: open with ``mode=ro`` (the file must exist).
        vec: load sqlite-vec into this connection.
        check_same_thread: passed to the driver; our services hand connections to one worker
            thread at a time, so the default is False.
        cache_kib: the page cache of the main file (``QUERY_CACHE_SIZE_KIB`` for connections
            that only answer queries).

    Raises:
        ExtensionsUnsupported: ``vec`` was asked for and the driver cannot load extensions.
        StorageError: the file cannot be opened.
    """
    target = str(path)
    try:
        if readonly:
            conn = sqlean.connect(
                f"file:{target}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=check_same_thread,
            )
        else:
            if target != ":memory:":
                folder = Path(target).parent
                folder.mkdir(parents=True, exist_ok=True)
                # SQLite would open the file and fail later, or never if its ``-wal`` and
                # ``-shm`` files survived: a writer refuses a read-only directory up front.
                if not os.access(folder, os.W_OK):
                    raise _read_only(Path(target))
            conn = sqlean.connect(target, isolation_level=None, check_same_thread=check_same_thread)
    except sqlean.OperationalError as exc:
        raise StorageError(
            f"cannot open database {target}: {exc}",
            hint="check that the data directory exists and is writable",
        ) from exc
    conn = cast(Connection, conn)
    conn.row_factory = sqlean.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if not readonly:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
        except sqlean.OperationalError as exc:
            conn.close()
            raise _unopenable(Path(target), exc) from exc
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA cache_size = -{cache_kib}")
    conn.execute(f"PRAGMA mmap_size = {MMAP_SIZE_BYTES}")
    conn.execute("PRAGMA temp_store = MEMORY")
    if vec:
        _load_vec(conn)
    return conn


def _unopenable(path: Path, exc: Exception) -> StorageError:
    """Why ``path`` could not be opened for writing, in words that say what to do."""
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return _read_only(path)
    mapped = storage_error(exc)
    if mapped is not None:
        return mapped
    return StorageError(
        f"cannot open database {path}: {exc}",
        hint="check that the data directory exists and is writable",
    )


def _read_only(path: Path) -> StorageError:
    return StorageError(
        f"the data directory {path.parent} is read-only: {path.name} cannot be written",
        hint="make the data directory writable (mount it read-write or fix its"
        " permissions) and start again; nothing in it was changed",
    )


def _load_vec(conn: Connection) -> None:
    import sqlite_vec

    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
    except (AttributeError, sqlean.OperationalError) as exc:
        raise ExtensionsUnsupported(
            "this SQLite driver cannot load the sqlite-vec extension",
            hint="install the sqlean.py package into the service's environment",
        ) from exc
    finally:
        with contextlib.suppress(AttributeError, sqlean.OperationalError):
            conn.enable_load_extension(False)


def checkpoint(conn: Connection, busy_timeout_ms: int = CHECKPOINT_BUSY_TIMEOUT_MS) -> bool:
    """Copy the WAL of ``conn``'s main file into it and truncate the WAL to zero bytes.

    Waits up to ``busy_timeout_ms`` for readers still inside a transaction, then gives up
    (nothing is lost: the WAL stays and the next open checkpoints it). The connection's busy
    timeout is left at ``busy_timeout_ms``; it is meant for a connection about to close.

    Returns:
        True when the WAL was checkpointed and truncated; False when a reader kept it busy.
    """
    busy, _, _ = _wal_checkpoint(conn, busy_timeout_ms)
    return not busy


def _wal_checkpoint(conn: Connection, busy_timeout_ms: int) -> tuple[int, int, int]:
    """``checkpoint``'s pragma and SQLite's answer: (busy, frames in the WAL, frames copied)."""
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    busy, frames, copied = conn.execute("PRAGMA main.wal_checkpoint(TRUNCATE)").fetchone()
    return int(busy), int(frames), int(copied)


def _size(path: Path) -> int | None:
    """The size of ``path`` in bytes; None when it does not exist."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def check_extensions() -> str:
    """Load sqlite-vec into a scratch connection; return its version or raise a named error."""
    conn = connect(":memory:", vec=True)
    try:
        return str(conn.execute("SELECT vec_version()").fetchone()[0])
    finally:
        conn.close()


# --- commit hooks ---


CommitHook = Callable[[Connection, str], None]
"""Called as ``hook(conn, "before")`` just before a writing COMMIT and ``hook(conn, "after")``
just after it, on the committing thread."""
_commit_hooks: tuple[CommitHook, ...] = ()
_hooks_lock = threading.Lock()


def add_commit_hook(hook: CommitHook) -> Callable[[], None]:
    """Call ``hook`` around every writing COMMIT of this process; returns its remover.

    Only the outermost COMMIT of a transaction that changed rows is shown (``total_changes``
    moved), never an empty or joined one. An exception the hook raises before the COMMIT
    rolls the transaction back and propagates; after it, it propagates with the data kept.
    """
    global _commit_hooks
    with _hooks_lock:
        _commit_hooks = (*_commit_hooks, hook)

    def remove() -> None:
        global _commit_hooks
        with _hooks_lock:
            _commit_hooks = tuple(h for h in _commit_hooks if h is not hook)

    return remove


def _run_hooks(hooks: Sequence[CommitHook], conn: Connection, phase: str) -> None:
    for hook in hooks:
        hook(conn, phase)


@contextlib.contextmanager
def transaction(conn: Connection) -> Iterator[Connection]:
    """Run the block in a write transaction: ``BEGIN IMMEDIATE``, or join one already open.

    The outermost block commits on success and rolls back on any exception. SQLite's "database
    is locked" past the busy timeout becomes ``DatabaseBusy`` (UNAVAILABLE, retryable); a full
    disk or read-only file becomes ``StorageError``. The commit hooks registered when the
    block began (``add_commit_hook``) run around a COMMIT that wrote rows.
    """
    if conn.in_transaction:
        yield conn
        return
    with storage_errors():
        conn.execute("BEGIN IMMEDIATE")
    hooks = _commit_hooks
    changes_before = conn.total_changes if hooks else 0
    try:
        with storage_errors():
            yield conn
        wrote = bool(hooks) and conn.total_changes != changes_before
        if wrote:
            _run_hooks(hooks, conn, "before")
    except BaseException:
        with contextlib.suppress(sqlean.Error):
            conn.execute("ROLLBACK")
        raise
    with storage_errors():
        conn.execute("COMMIT")
    if wrote:
        _run_hooks(hooks, conn, "after")


@contextlib.contextmanager
def storage_errors() -> Iterator[None]:
    """Translate SQLite's operational failures into typed, retryable or explanatory errors."""
    try:
        yield
    except sqlean.OperationalError as exc:
        text = str(exc).lower()
        if "locked" in text or "busy" in text:
            raise DatabaseBusy(
                "the database stayed busy past the timeout",
                hint="retry shortly; another writer holds the lock",
            ) from exc
        mapped = storage_error(exc)
        if mapped is not None:
            raise mapped from exc
        raise


_UNWRITABLE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
_UNWRITABLE_SQLITE = ("full", "readonly", "read-only", "disk i/o")


def storage_error(exc: BaseException) -> StorageError | None:
    """The ``StorageError`` that ``exc`` is, when it says the data directory cannot be written.

    A full disk, an exhausted quota or a read-only file system, whether SQLite or a plain file
    write reports it; None for anything else.
    """
    if isinstance(exc, OSError) and exc.errno in _UNWRITABLE_ERRNOS:
        detail = exc.strerror or str(exc)
    elif isinstance(exc, sqlean.OperationalError) and any(
        word in str(exc).lower() for word in _UNWRITABLE_SQLITE
    ):
        detail = str(exc)
    else:
        return None
    return StorageError(
        f"the data directory cannot be written: {detail}",
        hint="free disk space or make the data directory writable, then run the command again;"
        " everything already stored is intact",
    )


def attach_readonly(conn: Connection, path: Path | str, alias: str) -> None:
    """ATTACH another service's database file read-only under ``alias``.

    A missing file is attached as an empty in-memory schema-less database would be useless, so
    it is an error the caller should report as "producer not started yet".

    Raises:
        StorageError: the file does not exist yet, or cannot be opened (a read-only data
            directory says so).
    """
    if not alias.isidentifier():
        raise ValueError(f"bad alias {alias!r}")
    attached = {row[1] for row in conn.execute("PRAGMA database_list")}
    if alias in attached:
        return
    if not Path(path).exists():
        raise StorageError(
            f"database {path} does not exist yet",
            hint="start the service that owns it first (chatseek stack up)",
        )
    try:
        conn.execute(f"ATTACH DATABASE ? AS {alias}", (f"file:{path}?mode=ro",))
    except sqlean.OperationalError as exc:
        # Reading a WAL file writes its ``-shm`` beside it: a read-only data directory stops
        # the ATTACH of a file whose ``-shm`` a clean stop removed.
        raise _unopenable(Path(path), exc) from exc


# --- migrations ---


@dataclass(frozen=True)
class Migration:
    """One forward step of an owner's schema: ``number`` counts from 1 without gaps."""

    number: int
    name: str
    apply: Callable[[Connection], None] | str


def _ensure_migrations_table(conn: Connection) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations ("
        " owner TEXT NOT NULL, number INTEGER NOT NULL, name TEXT NOT NULL,"
        " applied_at INTEGER NOT NULL DEFAULT (unixepoch()), PRIMARY KEY (owner, number))"
    )


def schema_version(conn: Connection, owner: str) -> int:
    """The highest migration number applied for ``owner`` (0 for a new file)."""
    _ensure_migrations_table(conn)
    row = conn.execute(
        "SELECT COALESCE(MAX(number), 0) FROM _migrations WHERE owner = ?", (owner,)
    ).fetchone()
    return int(row[0])


def migrate(conn: Connection, owner: str, migrations: Sequence[Migration]) -> int:
    """Apply every pending migration of ``owner`` in order, each in its own transaction.

    Returns:
        The schema version after migrating.

    Raises:
        SchemaTooNew: the file records a migration this code does not know.
        ValueError: the migration list is not numbered 1..n.
    """
    numbers = [m.number for m in migrations]
    if numbers != list(range(1, len(migrations) + 1)):
        raise ValueError(f"migrations of {owner} must be numbered 1..n, got {numbers}")
    with transaction(conn):
        current = schema_version(conn, owner)
    known = len(migrations)
    if current > known:
        raise SchemaTooNew(
            f"{owner} database is at schema {current}, this code knows only {known}",
            hint="upgrade chatseek; a database is never downgraded",
            metadata={"owner": owner, "found": str(current), "known": str(known)},
        )
    for migration in migrations[current:]:
        with transaction(conn):
            if isinstance(migration.apply, str):
                for statement in _split_sql(migration.apply):
                    conn.execute(statement)
            else:
                migration.apply(conn)
            conn.execute(
                "INSERT INTO _migrations (owner, number, name) VALUES (?, ?, ?)",
                (owner, migration.number, migration.name),
            )
        log.info("migrated %s to %d (%s)", owner, migration.number, migration.name)
    return known


def _split_sql(script: str) -> list[str]:
    """Split a migration script into statements, keeping trigger bodies whole."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlean.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements


# Rows a statement of ``insert_rows`` carries: 50 and 200 appended feed events at the same cost
# (half of ``executemany``'s), and a wide row's values times this stay far below SQLite's
# 32,766 parameters a statement.
ROWS_PER_INSERT = 64


@functools.cache
def _values_sql(head: str, width: int, count: int) -> str:
    row = f"({', '.join('?' * width)})"
    return f"{head} VALUES {', '.join([row] * count)}"


def insert_rows(
    conn: Connection, head: str, rows: Sequence[Sequence[object]], *, per: int = ROWS_PER_INSERT
) -> None:
    """``INSERT`` ``rows`` in order, ``per`` rows to a statement: ``head`` is the statement up
    to ``VALUES`` (``"INSERT INTO t (a, b)"``), and every row has the same number of values.

    ``executemany`` runs the statement once per row, and SQLite does per statement what a small
    row's insert costs again: an ``AUTOINCREMENT`` table's counter is read and written, the
    statement is reset and its parameters cleared. The rows land as ``executemany`` would put
    them, and a refused row refuses its whole statement (the caller's transaction then rolls
    back, as with ``executemany``).

    Not for an FTS5 table: indexing 1M messages' rows this way took 10% more CPU than one
    statement a row (bench/PROFILES.md, "Many rows to an INSERT").
    """
    if not rows:
        return
    width = len(rows[0])
    whole = len(rows) - len(rows) % per
    if whole:
        sql = _values_sql(head, width, per)
        flat = list(itertools.chain.from_iterable(rows[:whole]))
        step = per * width
        for start in range(0, len(flat), step):
            conn.execute(sql, flat[start : start + step])
    if whole < len(rows):
        conn.executemany(_values_sql(head, width, 1), rows[whole:])


def rows(conn: Connection, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Run a query and return plain dicts (handy at the proto boundary)."""
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


class ThreadConnections:
    """One connection per worker thread to the same file, with the same ATTACHes.

    SQLite connections must not be shared across threads at once; WAL lets the readers of each
    thread run beside the one writer. Attachments whose files do not exist yet are retried on
    every ``get`` until they appear (the producer may start later).
    """

    def __init__(
        self,
        path: Path | str,
        *,
        vec: bool = False,
        readonly: bool = False,
        attach: dict[str, Path] | None = None,
        cache_kib: int = CACHE_SIZE_KIB,
    ) -> None:
        self._path = path
        self._vec = vec
        self._readonly = readonly
        self._cache_kib = cache_kib
        self._attach = dict(attach or {})
        self._local = threading.local()
        self._all: list[Connection] = []
        self._lock = threading.Lock()

    def get(self) -> Connection:
        """This thread's connection, opened on first use."""
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(
                self._path, vec=self._vec, readonly=self._readonly, cache_kib=self._cache_kib
            )
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        for alias, target in self._attach.items():
            if Path(target).exists():
                attach_readonly(conn, target, alias)
        return conn

    def attached(self, alias: str) -> bool:
        """Whether ``alias`` is attached on this thread's connection and readable as a producer.

        The owner creates its file before migrating it, so a file without its change feed
        (``_feed``) yet counts as not attached: there is nothing to consume from it so far.
        """
        conn = self.get()
        if alias not in {row[1] for row in conn.execute("PRAGMA database_list")}:
            return False
        found = conn.execute(
            f"SELECT 1 FROM {alias}.sqlite_master WHERE type = 'table' AND name = '_feed'"
        ).fetchone()
        return found is not None

    def close(self) -> None:
        """Close every connection this pool opened; a writable file is checkpointed first.

        The checkpoint's outcome is logged every time: SQLite's three numbers and the WAL's size
        before and after at INFO, a WARNING when readers kept it busy or it failed.

        Blocking (the checkpoint writes the WAL's pages into the file): call it off the loop.
        """
        with self._lock:
            if not self._readonly and str(self._path) != ":memory:":
                if self._all:
                    self._checkpoint(self._all[0])
                else:
                    log.info("nothing to checkpoint in %s on close: no connection", self._path)
            for conn in self._all:
                with contextlib.suppress(Exception):
                    conn.close()
            self._all.clear()

    def _checkpoint(self, conn: Connection) -> None:
        """Checkpoint on close and say how it went, every time (INFO; WARNING when it failed)."""
        wal = Path(f"{self._path}-wal")
        before = _size(wal)
        try:
            busy, frames, copied = _wal_checkpoint(conn, CHECKPOINT_BUSY_TIMEOUT_MS)
        except sqlean.Error as exc:
            log.warning("no checkpoint of %s on close: %s", self._path, exc)
            return
        wal_bytes = _size(wal)
        log.info(
            "checkpoint of %s on close: busy=%d log=%d checkpointed=%d; %s %s before, %s after",
            Path(self._path).name,
            busy,
            frames,
            copied,
            wal.name,
            "absent" if before is None else f"{before} B",
            "absent" if wal_bytes is None else f"{wal_bytes} B",
        )
        if busy:
            log.warning("no checkpoint of %s on close: readers kept its WAL busy", self._path)
        elif wal_bytes:
            log.warning(
                "checkpoint of %s on close reported success but left %d B in %s",
                self._path,
                wal_bytes,
                wal.name,
            )
