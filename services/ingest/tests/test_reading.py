"""An import read in a reader process against the same import read in process, over real files.

The reader process (``chatseek_ingest.reading``) parses and prepares the export while the
importing process writes; every stored row, every feed event, the report and any error must be
what an in-process read gives, and a reader that dies must leave a store an import again
completes.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from chatseek_core import db
from chatseek_core.errors import MalformedExport
from chatseek_ingest import reading
from chatseek_ingest.export import open_export
from chatseek_ingest.importer import BATCH_MESSAGES, ImportReport, import_export
from chatseek_testing.exports import export_message
from chatseek_testing.telegram import ingest_db

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "exports"
ACCOUNT = "me"
BASE_UNIX = 1_704_103_200
# Enough for several commits, so that a reader can die between them.
MANY = 3 * BATCH_MESSAGES + 123
TABLES = ("accounts", "sources", "chats", "senders", "messages", "media", "_feed")


def _message(mid: int) -> dict[str, Any]:
    text = f"сообщение {mid}: renting a flat near the beach, price {mid % 997} EUR"
    extra: dict[str, Any] = {}
    if mid % 7 == 0:
        extra["reply_to_message_id"] = mid - 3
    if mid % 11 == 0:
        extra["edited"] = "2024-01-02T10:00:00"
        extra["edited_unixtime"] = str(BASE_UNIX + 60 * mid + 30)
    return export_message(mid, text, unix=BASE_UNIX + 60 * mid, sender=1000 + mid % 40, **extra)


def _write(path: Path, count: int, *, broken_at: int | None = None) -> Path:
    """A supergroup export of ``count`` messages; ``broken_at`` puts bad JSON after that one."""
    with path.open("w", encoding="utf-8") as out:
        out.write('{"name": "Big", "type": "public_supergroup", "id": 42, "messages": [\n')
        for mid in range(1, count + 1):
            out.write(json.dumps(_message(mid), ensure_ascii=False, indent=1))
            if mid == broken_at:
                out.write(", ]]] not json {\n")
            out.write(",\n" if mid < count else "\n]}\n")
    return path


def _rows(conn: db.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, without the columns that record when it was written."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for table in TABLES:
        columns = [
            str(r[1])
            for r in conn.execute(f"PRAGMA table_info({table})")
            if r[1] != "at" and not str(r[1]).endswith("_at")
        ]
        out[table] = [
            tuple(r)
            for r in conn.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY 1, 2, 3")
        ]
    return out


def _import(
    root: Path, export: Path, *, process: bool, **kwargs: Any
) -> tuple[ImportReport | MalformedExport, dict[str, list[tuple[Any, ...]]]]:
    conn = ingest_db(root / "ingest.db")
    try:
        try:
            outcome: ImportReport | MalformedExport = import_export(
                conn, ACCOUNT, export, reader_process=process, **kwargs
            )
        except MalformedExport as error:
            outcome = error
        return outcome, _rows(conn)
    finally:
        conn.close()


@pytest.mark.parametrize("fixture", ["account", "personal_modern", "forum", "legacy_2020"])
def test_a_reader_process_stores_what_a_read_in_process_stores(
    tmp_path: Path, fixture: str
) -> None:
    here, here_rows = _import(tmp_path / "here", FIXTURES / fixture, process=False)
    there, there_rows = _import(tmp_path / "there", FIXTURES / fixture, process=True)
    assert isinstance(here, ImportReport) and isinstance(there, ImportReport)
    assert there.to_dict() == here.to_dict()
    assert there_rows == here_rows
    assert here_rows["messages"]


def test_many_batches_through_a_reader_process_store_and_announce_each_message_once(
    tmp_path: Path,
) -> None:
    export = _write(tmp_path / "many.json", MANY)
    here, here_rows = _import(tmp_path / "here", export, process=False)
    there, there_rows = _import(tmp_path / "there", export, process=True)
    assert isinstance(there, ImportReport)
    assert there.new == MANY and there.messages_imported == MANY
    assert there_rows == here_rows
    assert len(there_rows["_feed"]) == MANY


def test_a_malformed_export_read_in_a_reader_process_keeps_what_came_before_it(
    tmp_path: Path,
) -> None:
    export = _write(tmp_path / "broken.json", MANY, broken_at=BATCH_MESSAGES + 10)
    here, here_rows = _import(tmp_path / "here", export, process=False)
    there, there_rows = _import(tmp_path / "there", export, process=True)
    assert isinstance(here, MalformedExport) and isinstance(there, MalformedExport)
    assert (there.message, there.hint, there.metadata) == (here.message, here.hint, here.metadata)
    # The reader holds back the message before the damage (its end is not seen), either way.
    assert BATCH_MESSAGES < int(there.metadata["messages_stored"]) <= BATCH_MESSAGES + 10
    assert there_rows == here_rows


def _children() -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(pid) for pid in text]
    return found


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc to find the reader")
def test_an_import_whose_reader_dies_keeps_its_commits_and_a_second_import_completes_it(
    tmp_path: Path,
) -> None:
    export = _write(tmp_path / "many.json", MANY)
    killed: list[int] = []

    def kill_reader() -> None:
        if not killed:
            for pid in _children():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    conn = ingest_db(tmp_path / "ingest.db")
    try:
        with pytest.raises(reading.ReaderFailed) as stopped:
            import_export(conn, ACCOUNT, export, reader_process=True, on_commit=kill_reader)
        assert killed
        error = stopped.value
        assert "import the export again" in error.hint
        stored = int(error.metadata["messages_stored"])
        assert BATCH_MESSAGES <= stored < MANY
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == stored
        assert conn.execute("SELECT COUNT(*) FROM _feed").fetchone()[0] == stored
        again = import_export(conn, ACCOUNT, export, reader_process=True)
        assert (again.new, again.unchanged) == (MANY - stored, stored)
        rows = _rows(conn)
    finally:
        conn.close()
    _, clean = _import(tmp_path / "clean", export, process=False)
    for table in ("messages", "media", "senders", "chats"):
        assert rows[table] == clean[table]
    # Each message announced once: the second import announced only what the first had not.
    assert sorted(r[3:5] for r in rows["_feed"]) == sorted(r[3:5] for r in clean["_feed"])


def test_closing_the_records_early_stops_the_reader_process(tmp_path: Path) -> None:
    export = _write(tmp_path / "many.json", MANY)
    before = set(_children())
    records: Generator[reading.Record, None, None] = reading.read_prepared(
        open_export(export), process=True
    )
    first = next(records)
    assert not isinstance(first, list)  # the chat's header comes first
    assert isinstance(next(records), list)
    started = set(_children()) - before
    assert started
    records.close()
    assert not set(_children()) & started


def test_the_size_of_the_export_picks_where_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    export = open_export(_write(tmp_path / "small.json", 10))
    monkeypatch.setattr(reading, "PROCESS_MIN_BYTES", export.size + 1)
    before = set(_children())
    small = reading.read_prepared(export)
    next(small)
    assert set(_children()) == before
    monkeypatch.setattr(reading, "PROCESS_MIN_BYTES", export.size)
    monkeypatch.setattr(reading, "_cores", lambda: 2)
    big = reading.read_prepared(export)
    next(big)
    assert set(_children()) - before
    big.close()
    small.close()
