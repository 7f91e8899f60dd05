"""An import read in a reader process against the same import read in process, over real files.

The reader process (``chatseek_ingest.reading``) parses and prepares the export while the
importing process writes; every stored row, every feed event, the report and any error must be
what an in-process read gives, and a reader that dies must leave a store an import again
completes.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Generator
from pathlib import Path

import pytest
from helpers_reading import ACCOUNT, MANY, children, import_once, rows, write_export

from chatseek_core import pipes
from chatseek_core.errors import MalformedExport
from chatseek_ingest import reading
from chatseek_ingest.export import open_export
from chatseek_ingest.importer import BATCH_MESSAGES, ImportReport, import_export
from chatseek_testing.telegram import ingest_db

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "exports"


@pytest.mark.parametrize("fixture", ["account", "personal_modern", "forum", "legacy_2020"])
def test_a_reader_process_stores_what_a_read_in_process_stores(
    tmp_path: Path, fixture: str
) -> None:
    here, here_rows = import_once(tmp_path / "here", FIXTURES / fixture, process=False)
    there, there_rows = import_once(tmp_path / "there", FIXTURES / fixture, process=True)
    assert isinstance(here, ImportReport) and isinstance(there, ImportReport)
    assert there.to_dict() == here.to_dict()
    assert there_rows == here_rows
    assert here_rows["messages"]


def test_many_batches_through_a_reader_process_store_and_announce_each_message_once(
    tmp_path: Path,
) -> None:
    export = write_export(tmp_path / "many.json", MANY)
    here, here_rows = import_once(tmp_path / "here", export, process=False)
    there, there_rows = import_once(tmp_path / "there", export, process=True)
    assert isinstance(there, ImportReport)
    assert there.new == MANY and there.messages_imported == MANY
    assert there_rows == here_rows
    assert len(there_rows["_feed"]) == MANY


def test_a_malformed_export_read_in_a_reader_process_keeps_what_came_before_it(
    tmp_path: Path,
) -> None:
    export = write_export(tmp_path / "broken.json", MANY, broken_at=BATCH_MESSAGES + 10)
    here, here_rows = import_once(tmp_path / "here", export, process=False)
    there, there_rows = import_once(tmp_path / "there", export, process=True)
    assert isinstance(here, MalformedExport) and isinstance(there, MalformedExport)
    assert (there.message, there.hint, there.metadata) == (here.message, here.hint, here.metadata)
    # The reader holds back the message before the damage (its end is not seen), either way.
    assert BATCH_MESSAGES < int(there.metadata["messages_stored"]) <= BATCH_MESSAGES + 10
    assert there_rows == here_rows


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc to find the reader")
def test_an_import_whose_reader_dies_keeps_its_commits_and_a_second_import_completes_it(
    tmp_path: Path,
) -> None:
    export = write_export(tmp_path / "many.json", MANY)
    killed: list[int] = []

    def kill_reader() -> None:
        if not killed:
            for pid in children():
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
        stored_rows = rows(conn)
    finally:
        conn.close()
    _, clean = import_once(tmp_path / "clean", export, process=False)
    for table in ("messages", "media", "senders", "chats"):
        assert stored_rows[table] == clean[table]
    # Each message announced once: the second import announced only what the first had not.
    assert sorted(r[3:5] for r in stored_rows["_feed"]) == sorted(r[3:5] for r in clean["_feed"])


def test_closing_the_records_early_stops_the_reader_process(tmp_path: Path) -> None:
    export = write_export(tmp_path / "many.json", MANY)
    before = set(children())
    records: Generator[reading.Record, None, None] = reading.read_prepared(
        open_export(export), process=True
    )
    first = next(records)
    assert not isinstance(first, list)  # the chat's header comes first
    assert isinstance(next(records), list)
    started = set(children()) - before
    assert started
    records.close()
    assert not set(children()) & started


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pipe sizes are Linux's")
def test_the_reader_process_writes_into_a_pipe_with_room_for_several_batches(
    tmp_path: Path,
) -> None:
    export = write_export(tmp_path / "many.json", MANY)
    before = set(children())
    records = reading.read_prepared(open_export(export), process=True)
    next(records)
    (reader,) = set(children()) - before
    ours = {os.readlink(link) for link in Path("/proc/self/fd").iterdir() if _exists(link)}
    shared = [
        link
        for link in Path(f"/proc/{reader}/fd").iterdir()
        if _exists(link) and os.readlink(link).startswith("pipe:") and os.readlink(link) in ours
    ]
    # Each pipe between the two (the records', and stderr where it is a pipe), opened again
    # through the reader's end: the same pipe, so the same room.
    rooms = []
    try:
        for link in shared:
            fd = os.open(link, os.O_WRONLY | os.O_NONBLOCK)
            rooms.append(pipes.capacity(fd))
            os.close(fd)
    finally:
        records.close()
    assert pipes.PIPE_BYTES in rooms


def _exists(link: Path) -> bool:
    try:
        os.readlink(link)
    except FileNotFoundError:  # an fd closed while the folder was read
        return False
    return True


def test_the_size_of_the_export_picks_where_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    export = open_export(write_export(tmp_path / "small.json", 10))
    monkeypatch.setattr(reading, "PROCESS_MIN_BYTES", export.size + 1)
    before = set(children())
    small = reading.read_prepared(export)
    next(small)
    assert set(children()) == before
    monkeypatch.setattr(reading, "PROCESS_MIN_BYTES", export.size)
    monkeypatch.setattr(reading, "_cores", lambda: 2)
    big = reading.read_prepared(export)
    next(big)
    assert set(children()) - before
    big.close()
    small.close()
