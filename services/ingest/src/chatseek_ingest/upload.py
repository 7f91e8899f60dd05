"""An uploaded export: received into a work folder under ``<data>/tmp``, imported, removed.

Owns the work folders of ``<data>/tmp`` (an import's uploaded copy of the export, an
extraction's media) and the upload's file handling. Invariants: an upload path is relative and
never climbs out of its work folder; a name stays within what a file system allows; the folder
is removed however the import ends (a SIGKILL's leftovers go at the next start).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from io import BufferedWriter
from pathlib import Path, PurePosixPath
from typing import Any, cast

from chatseek_core import db, memory
from chatseek_core.aio import progress_stream, to_thread
from chatseek_core.errors import InvalidArgument
from chatseek_ingest.export.arriving import Arrival, Growth
from chatseek_ingest.importer import ImportReport, import_export
from chatseek_ingest.media import read_export_media
from chatseek_ingest.reading import PROCESS_MIN_BYTES, worth_a_process

__all__ = [
    "TMP_DIR",
    "Progress",
    "UploadChunk",
    "UploadItem",
    "UploadStart",
    "discard_stale_work",
    "import_upload",
]

log = logging.getLogger(__name__)

UPLOAD_PROGRESS_BYTES = 8 * 1024 * 1024
TMP_DIR = "tmp"
# File systems refuse longer names (NAME_MAX); the whole path stays well inside PATH_MAX.
MAX_NAME_BYTES = 255
MAX_UPLOAD_PATH_BYTES = 1024
# Work folders under <data>/tmp: an import's uploaded copy of the export, an extraction's media.
WORK_PREFIXES = ("import-", "chatseek-media-")
DEFAULT_JSON_NAME = "result.json"


@dataclass(frozen=True, slots=True)
class UploadStart:
    """What an upload says before its files (``ImportStart``); empty strings mean unset."""

    account: str
    json_name: str
    json_path: str
    folder_name: str
    chat_title: str
    json_size: int


@dataclass(frozen=True, slots=True)
class UploadChunk:
    """A piece of one uploaded file; ``last`` closes it."""

    path: str
    data: bytes
    last: bool


UploadItem = UploadStart | UploadChunk | None
"""One item of an upload stream; ``None`` for an item of neither kind."""

Progress = tuple[str, int, int, str]
"""``(stage, done, total, note)``: ``upload`` in bytes, then ``import`` in messages."""


def discard_stale_work(data_dir: Path) -> int:
    """Delete the work folders a killed ingest left under ``<data>/tmp``; returns how many.

    A SIGKILL skips an import's ``finally``, leaving a whole copy of the uploaded export behind.
    Call before serving: ingest is the only process writing this data dir, so none is in use.
    """
    root = data_dir / TMP_DIR
    if not root.is_dir():
        return 0
    stale = [p for p in root.iterdir() if p.is_dir() and p.name.startswith(WORK_PREFIXES)]
    for folder in stale:
        shutil.rmtree(folder, ignore_errors=True)
    if stale:
        log.info("removed %d work folders left by a stopped import or extraction", len(stale))
    return len(stale)


def _open_upload(target: Path) -> BufferedWriter:
    """The work-folder file an uploaded export file is appended to (its folder created)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    return open(target, "ab")  # noqa: SIM115 - closed by the caller when its last chunk came


def _safe_relative(path: str) -> PurePosixPath:
    rel = PurePosixPath(path)
    if not path or rel.is_absolute() or ".." in rel.parts or "\\" in path:
        raise InvalidArgument(
            f"upload path {path!r} must be relative and stay inside the export",
            metadata={"field": "chunk.path"},
        )
    if len(path.encode()) > MAX_UPLOAD_PATH_BYTES or any(
        len(part.encode()) > MAX_NAME_BYTES for part in rel.parts
    ):
        raise InvalidArgument(
            "an upload path or one of its names is longer than a file system allows",
            metadata={"field": "chunk.path"},
        )
    return rel


@contextlib.asynccontextmanager
async def _work_folder(data_dir: Path) -> AsyncIterator[Path]:
    tmp_root = data_dir / TMP_DIR
    await to_thread(tmp_root.mkdir, parents=True, exist_ok=True)
    workdir = Path(await to_thread(tempfile.mkdtemp, prefix="import-", dir=tmp_root))
    try:
        yield workdir
    finally:
        await to_thread(shutil.rmtree, workdir, True)


class _Files:
    """The uploaded files being written under a work folder, by upload path."""

    def __init__(self, workdir: Path) -> None:
        self._workdir = workdir
        self._open: dict[str, BufferedWriter] = {}
        self._sizes: dict[str, int] = {}
        self._whole: set[str] = set()

    async def write(self, chunk: UploadChunk) -> int:
        """Append ``chunk`` to its file (flushed); returns the bytes that file holds now.

        Raises:
            InvalidArgument: an unsafe path, or a chunk after its file's last one.
        """
        rel = _safe_relative(chunk.path)
        if chunk.path in self._whole:
            raise InvalidArgument(
                f"upload file {chunk.path!r} has a chunk after its last one",
                hint="send each file's chunks in order, marking only the final one last",
                metadata={"field": "chunk.last"},
            )
        handle = self._open.get(chunk.path)
        if handle is None:
            handle = self._open[chunk.path] = await to_thread(_open_upload, self._workdir / rel)
        await to_thread(_write_flushed, handle, chunk.data)
        size = self._sizes[chunk.path] = self._sizes.get(chunk.path, 0) + len(chunk.data)
        if chunk.last:
            await to_thread(handle.close)
            del self._open[chunk.path]
            self._whole.add(chunk.path)
        return size

    async def close(self) -> None:
        for handle in self._open.values():
            await to_thread(handle.close)
        self._open.clear()


def _write_flushed(handle: BufferedWriter, data: bytes) -> None:
    handle.write(data)
    handle.flush()


class _Job:
    """One upload's import, given its start: where its JSON file is and how it is named."""

    def __init__(
        self,
        start: UploadStart,
        workdir: Path,
        connect: Callable[[], db.Connection],
        account: str,
        on_commit: Callable[[], None],
        on_progress: Callable[[object], None],
    ) -> None:
        self.start = start
        self.json_name = start.json_name or DEFAULT_JSON_NAME
        self.json_path = workdir / _safe_relative(self.json_name)
        self.workdir = workdir
        self.connect = connect
        self.account = account
        self.on_commit = on_commit
        self.on_progress = on_progress

    def is_json(self, chunk: UploadChunk) -> bool:
        return PurePosixPath(chunk.path) == PurePosixPath(self.json_name)

    def run(self, growth: Growth | None) -> ImportReport:
        """Import the JSON file (still arriving when ``growth`` is set; then in a reader
        process) and return the report."""
        start = self.start
        label = start.json_path or str(PurePosixPath(start.folder_name or ".") / self.json_name)
        try:
            return import_export(
                self.connect(),
                self.account,
                self.json_path,
                folder_name=start.folder_name or None,
                chat_title=start.chat_title or None,
                on_progress=lambda p: self.on_progress(("import", *p)),
                on_commit=self.on_commit,
                label=label,
                reader_process=True if growth is not None else None,
                growth=growth,
            )
        finally:
            memory.release()

    def read_media(self, chats: list[int]) -> dict[str, int]:
        try:
            return read_export_media(self.connect(), self.workdir, self.account, chats)
        finally:
            memory.release()


async def _receive_and_import(
    items: AsyncIterator[UploadItem],
    workdir: Path,
    connect: Callable[[], db.Connection],
    account: Callable[[str], str],
    on_commit: Callable[[], None],
    early_bytes: int | None,
    on_progress: Callable[[object], None],
) -> dict[str, Any]:
    """Write the upload under ``workdir`` and import it; returns the import report.

    A JSON file declared at least ``early_bytes`` big is imported as it arrives: its import
    starts with its first chunk, beside the rest of the upload. Otherwise the import starts
    once the upload is whole.

    Raises:
        InvalidArgument: a chunk before the start, an item of neither kind, an unsafe path, a
            chunk after its file's last one, an empty stream.
    """
    files = _Files(workdir)
    job: _Job | None = None
    growth: Arrival | None = None
    early: asyncio.Future[ImportReport] | None = None
    received = reported = 0
    try:
        async for item in items:
            if isinstance(item, UploadStart):
                job = _Job(item, workdir, connect, account(item.account), on_commit, on_progress)
                continue
            if item is None or job is None:
                raise InvalidArgument(
                    "an import stream starts with ImportStart, then file chunks",
                    metadata={"field": "item"},
                )
            size = await files.write(item)
            if job.is_json(item):
                if early is None and early_bytes is not None:
                    if job.start.json_size >= early_bytes:
                        growth = Arrival()
                        early = asyncio.ensure_future(to_thread(job.run, growth))
                if growth is not None:
                    growth.grew(size)
                    if item.last:
                        growth.end()
            if early is not None and early.done() and early.exception() is not None:
                early.result()  # the import failed before the upload ended: say why now
            received += len(item.data)
            if received - reported >= UPLOAD_PROGRESS_BYTES:
                reported = received
                on_progress(("upload", received, job.start.json_size, "bytes"))
        await files.close()
        if job is None:
            raise InvalidArgument("the import stream was empty", metadata={"field": "start"})
    except BaseException:
        if growth is not None:
            growth.stop()
        if early is not None:
            await asyncio.wait([early])  # the reader stops; its commits stay
            if not early.cancelled():
                early.exception()  # retrieved: the upload's own error is the one to tell
        raise
    if growth is not None:
        growth.end()  # the stream has ended, so the JSON file is as whole as it will be
    # A call cancelled now leaves the import to its end (its commits are whole batches).
    report = await asyncio.shield(early) if early is not None else await to_thread(job.run, None)
    report.media_text = await to_thread(job.read_media, [int(c["id"]) for c in report.chats])
    return report.to_dict()


async def import_upload(
    items: AsyncIterator[UploadItem],
    *,
    data_dir: Path,
    connect: Callable[[], db.Connection],
    account: Callable[[str], str],
    on_commit: Callable[[], None],
    early_bytes: int | None = None,
) -> AsyncIterator[Progress | dict[str, Any]]:
    """Receive an uploaded export, import it and remove the copy; stream progress, then the report.

    A big export's JSON file is imported as it arrives, by a reader process that waits for the
    bytes not yet received (``export.arriving``). Should the upload then break off, the import
    stops: what it committed stays, as after a malformed export, and importing the export again
    completes the store.

    Args:
        items: the upload: an ``UploadStart``, then the chunks of its files.
        data_dir: the data folder; the copy goes to a fresh work folder under ``<data>/tmp``.
        connect: the calling thread's connection to ``ingest.db``.
        account: the account to import into, given the start's (possibly empty) account.
        on_commit: called after every committed batch (from the import's thread).
        early_bytes: import a JSON file declared at least this big as it arrives; None picks
            ``reading.PROCESS_MIN_BYTES`` on a machine with a core to spare, else never.

    Yields:
        ``Progress`` tuples, then the import report (``ImportReport.to_dict()``).

    Raises:
        InvalidArgument: a malformed upload stream or an unsafe path.
        MalformedExport: from the import, after storing what came before the problem.
    """
    if early_bytes is None and worth_a_process(PROCESS_MIN_BYTES):
        early_bytes = PROCESS_MIN_BYTES
    async with _work_folder(data_dir) as workdir:

        def work(on_progress: Callable[[object], None]) -> Awaitable[dict[str, Any]]:
            return _receive_and_import(
                items, workdir, connect, account, on_commit, early_bytes, on_progress
            )

        async for kind, value in progress_stream(work, cancel=True):
            if kind == "progress":
                yield cast(Progress, value)
            else:
                yield cast(dict[str, Any], value)
