"""An export imported while it is still arriving, against the same export imported whole.

A big upload's JSON file is read as it comes (``export.arriving``): every read waits for bytes
not yet written, so the records, rows, feed and report must be what an import of the finished
file gives; an upload that breaks off must stop the import, keep its commits, and leave a store
an import again completes.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers_reading import ACCOUNT, MANY, children, import_once, message, rows, write_export

from chatseek_core import db
from chatseek_core.errors import InvalidArgument, MalformedExport
from chatseek_ingest.export.arriving import Arrival, ArrivalStopped, ArrivingFile
from chatseek_ingest.importer import BATCH_MESSAGES, ImportReport, import_export
from chatseek_ingest.upload import UploadChunk, UploadItem, UploadStart, import_upload
from chatseek_testing.telegram import ingest_db

PIECE = 7_919  # a prime, so pieces end anywhere: mid-token, mid-UTF-8 sequence, mid-message


def _arrive(source: bytes, target: Path, growth: Arrival, *, pause_every: int = 40) -> None:
    """Write ``source`` to ``target`` a piece at a time, telling ``growth`` after each."""
    with target.open("ab") as out:
        for n, at in enumerate(range(0, len(source), PIECE)):
            out.write(source[at : at + PIECE])
            out.flush()
            growth.grew(at + len(source[at : at + PIECE]))
            if n % pause_every == 0:
                time.sleep(0.002)
    growth.end()


def _arriving(source: bytes, target: Path) -> tuple[Arrival, threading.Thread]:
    target.write_bytes(b"")
    growth = Arrival()
    writer = threading.Thread(target=_arrive, args=(source, target, growth), daemon=True)
    writer.start()
    return growth, writer


# --- the file ---


def test_an_arriving_file_reads_what_the_whole_file_reads(tmp_path: Path) -> None:
    source = bytes(range(256)) * 400
    growth, writer = _arriving(source, tmp_path / "f")
    sizes = [1, 3, 65_536, 10, 0, 100_000, 5]
    with ArrivingFile(tmp_path / "f", growth) as f:
        got = [f.read(n) for n in sizes]
        assert f.seek(2) == 2 and f.tell() == 2
        again = f.read(4)
        rest = f.read()
    writer.join()
    with (tmp_path / "f").open("rb") as whole:
        expected = [whole.read(n) for n in sizes]
        whole.seek(2)
        assert again == whole.read(4)
        assert rest == whole.read()
    assert got == expected  # a regular file's reads are whole until its end
    assert [len(piece) for piece in got] == [1, 3, 65_536, 10, 0, 36_850, 0]


def test_a_read_past_the_end_returns_what_there_is_once_the_file_has_ended(
    tmp_path: Path,
) -> None:
    growth, writer = _arriving(b"{}" * 10, tmp_path / "f")
    with ArrivingFile(tmp_path / "f", growth) as f:
        assert f.read(1000) == b"{}" * 10
        assert f.read(1) == b""
    writer.join()


def test_a_file_that_stops_arriving_fails_the_waiting_read(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    growth = Arrival()
    growth.grew(3)
    threading.Timer(0.05, growth.stop).start()
    with ArrivingFile(tmp_path / "f", growth) as f:
        assert f.read(3) == b"abc"
        with pytest.raises(ArrivalStopped):
            f.read(1)


def test_a_file_stopped_after_its_end_reads_to_its_end(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    growth = Arrival()
    growth.grew(3)
    growth.end()
    growth.stop()
    with ArrivingFile(tmp_path / "f", growth) as f:
        assert f.read() == b"abc"


# --- an import of an arriving export ---


def _header_last(path: Path, count: int) -> Path:
    """A chat whose name, type and id follow its messages, so the reader must look them up
    with a second pass over the file (past ``MAX_PENDING_MESSAGES``)."""
    with path.open("w", encoding="utf-8") as out:
        out.write('{"messages": [\n')
        out.write(",\n".join(json.dumps(message(m), ensure_ascii=False) for m in range(1, count)))
        out.write('\n], "name": "Late", "type": "private_group", "id": 77}\n')
    return path


@pytest.mark.parametrize("process", [False, True], ids=["in-process", "reader-process"])
@pytest.mark.parametrize("shape", ["plain", "header-last"])
def test_an_export_imported_as_it_arrives_stores_what_the_whole_export_stores(
    tmp_path: Path, process: bool, shape: str
) -> None:
    make = write_export if shape == "plain" else _header_last
    (tmp_path / "whole" / "export").mkdir(parents=True)
    export = make(tmp_path / "whole" / "export" / "result.json", MANY)
    whole, whole_rows = import_once(tmp_path / "whole", export, process=False)
    folder = tmp_path / "arriving" / "export"  # the same folder name: the same source
    folder.mkdir(parents=True)
    growth, writer = _arriving(export.read_bytes(), folder / "result.json")
    conn = ingest_db(tmp_path / "arriving" / "ingest.db")
    try:
        report = import_export(
            conn, ACCOUNT, folder / "result.json", reader_process=process, growth=growth
        )
        got = rows(conn)
    finally:
        conn.close()
    writer.join()
    assert isinstance(whole, ImportReport)
    assert report.to_dict() == whole.to_dict()
    assert got == whole_rows
    assert len(got["messages"]) >= MANY - 1


# --- an upload imported as it arrives ---


class _Connections:
    """One ingest.db connection per thread, as the service's pool gives."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._local = threading.local()
        self._all: list[db.Connection] = []
        ingest_db(path).close()

    def get(self) -> db.Connection:
        conn: db.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = db.connect(self._path)
            self._all.append(conn)
        return conn

    def close(self) -> None:
        for conn in self._all:
            conn.close()


def _chunks(data: bytes, path: str, size: int = 64 * 1024) -> Iterator[UploadChunk]:
    for at in range(0, max(len(data), 1), size):
        yield UploadChunk(path, data[at : at + size], at + size >= len(data))


async def _upload(
    root: Path,
    items: AsyncIterator[UploadItem],
    *,
    early_bytes: int | None,
    on_commit: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    connections = _Connections(root / "ingest.db")
    report: dict[str, Any] = {}
    try:
        async for event in import_upload(
            items,
            data_dir=root,
            connect=connections.get,
            account=lambda _: ACCOUNT,
            on_commit=on_commit,
            early_bytes=early_bytes,
        ):
            if isinstance(event, dict):
                report = event
    finally:
        connections.close()
    return report


def _start(size: int) -> UploadStart:
    return UploadStart(ACCOUNT, "result.json", "/home/ana/export/result.json", "export", "", size)


async def _until(flag: threading.Event, what: str) -> None:
    for _ in range(2000):
        if flag.is_set():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _stored(root: Path) -> int:
    return len(_snapshot(root)["messages"])


def _snapshot(root: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = db.connect(root / "ingest.db")
    try:
        return rows(conn)
    finally:
        conn.close()


async def test_a_big_upload_is_imported_while_it_arrives(tmp_path: Path) -> None:
    data = write_export(tmp_path / "result.json", MANY).read_bytes()
    committed = threading.Event()
    seen_before_end: list[int] = []

    async def items() -> AsyncIterator[UploadItem]:
        yield _start(len(data))
        for chunk in _chunks(data, "result.json"):
            if chunk.last:
                # The reader must have stored a batch before the upload's end arrives.
                await _until(committed, "a commit before the upload ended")
                seen_before_end.append(_stored(tmp_path / "early"))
            yield chunk

    (tmp_path / "early").mkdir()
    early = await _upload(
        tmp_path / "early", items(), early_bytes=len(data), on_commit=committed.set
    )

    async def whole_items() -> AsyncIterator[UploadItem]:
        yield _start(len(data))
        for chunk in _chunks(data, "result.json"):
            yield chunk

    (tmp_path / "whole").mkdir()
    whole = await _upload(tmp_path / "whole", whole_items(), early_bytes=None)
    assert seen_before_end and BATCH_MESSAGES <= seen_before_end[0] < MANY
    assert early == whole
    assert early["new"] == MANY
    assert _snapshot(tmp_path / "early") == _snapshot(tmp_path / "whole")

    assert not list((tmp_path / "early" / "tmp").iterdir())  # the work folder is gone


async def test_an_upload_that_breaks_off_stops_its_import_and_a_second_upload_completes_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "export").mkdir()  # the folder name the uploads give, so the same source
    export = write_export(tmp_path / "export" / "result.json", MANY)
    data = export.read_bytes()
    committed = threading.Event()
    before = set(children())

    async def broken() -> AsyncIterator[UploadItem]:
        yield _start(len(data))
        for n, chunk in enumerate(_chunks(data, "result.json")):
            if n * 64 * 1024 > len(data) * 2 // 3:
                await _until(committed, "a commit before the upload broke off")
                yield UploadChunk("../outside.json", b"{}", True)  # refused: the stream fails
            yield chunk

    with pytest.raises(InvalidArgument):
        await _upload(tmp_path, broken(), early_bytes=1, on_commit=committed.set)
    assert not set(children()) - before  # the reader process is gone
    stored = _stored(tmp_path)
    assert BATCH_MESSAGES <= stored < MANY
    assert not list((tmp_path / "tmp").iterdir())

    async def again() -> AsyncIterator[UploadItem]:
        yield _start(len(data))
        for chunk in _chunks(data, "result.json"):
            yield chunk

    report = await _upload(tmp_path, again(), early_bytes=1)
    assert (report["new"], report["unchanged"]) == (MANY - stored, stored)
    _, clean = import_once(tmp_path / "clean", export, process=False)
    got = _snapshot(tmp_path)
    for table in ("messages", "media", "senders", "chats"):
        assert got[table] == clean[table]


async def test_an_import_that_fails_while_the_upload_arrives_says_why(tmp_path: Path) -> None:
    bad = b'{"name": "X", "type": "personal_chat", "id": 5, "messages": [ ]]] '

    async def items() -> AsyncIterator[UploadItem]:
        yield _start(10 * 2**20)
        yield UploadChunk("result.json", bad, False)
        # The upload goes on and never ends its JSON: only an import error told while it
        # arrives can end the call before this runs out.
        for _ in range(2000):
            yield UploadChunk("result.json", b" " * 1024, False)
            await asyncio.sleep(0.005)
        raise AssertionError("the import's error was not told while the upload arrived")

    with pytest.raises(MalformedExport):
        await _upload(tmp_path, items(), early_bytes=1)


@pytest.mark.parametrize("early_bytes", [None, 1], ids=["whole", "as-it-arrives"])
async def test_a_chunk_after_its_files_last_chunk_is_refused(
    tmp_path: Path, early_bytes: int | None
) -> None:
    data = write_export(tmp_path / "result.json", 20).read_bytes()

    async def items() -> AsyncIterator[UploadItem]:
        yield _start(len(data))
        yield UploadChunk("result.json", data, True)
        yield UploadChunk("result.json", b" ", True)

    with pytest.raises(InvalidArgument, match="after its last"):
        await _upload(tmp_path, items(), early_bytes=early_bytes)
