"""An uploaded export: received into a work folder under ``<data>/tmp``, imported, removed.

Owns the work folders of ``<data>/tmp`` (an import's uploaded copy of the export, an
extraction's media) and the upload's file handling. Invariants: an upload path is relative and
never climbs out of its work folder; a name stays within what a file system allows; the folder
is removed however the import ends (a SIGKILL's leftovers go at the next start).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from io import BufferedWriter
from pathlib import Path, PurePosixPath
from typing import Any, cast

from chatseek_core import db
from chatseek_core.aio import stream_progress, to_thread
from chatseek_core.errors import InvalidArgument
from chatseek_ingest.importer import import_export
from chatseek_ingest.media import read_export_media

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


async def _receive(
    items: AsyncIterator[UploadItem], workdir: Path, started: list[UploadStart]
) -> AsyncIterator[Progress]:
    """Write the uploaded files under ``workdir``; the start item is appended to ``started``.

    Raises:
        InvalidArgument: a chunk before the start, an item of neither kind, an unsafe path.
    """
    start: UploadStart | None = None
    received = 0
    reported = 0
    handles: dict[str, BufferedWriter] = {}
    async for item in items:
        if isinstance(item, UploadStart):
            start = item
            continue
        if item is None or start is None:
            raise InvalidArgument(
                "an import stream starts with ImportStart, then file chunks",
                metadata={"field": "item"},
            )
        rel = _safe_relative(item.path)
        handle = handles.get(item.path)
        if handle is None:
            handle = handles[item.path] = await to_thread(_open_upload, workdir / rel)
        await to_thread(handle.write, item.data)
        received += len(item.data)
        if item.last:
            await to_thread(handle.close)
            del handles[item.path]
        if received - reported >= UPLOAD_PROGRESS_BYTES:
            reported = received
            yield ("upload", received, start.json_size, "bytes")
    for handle in handles.values():
        await to_thread(handle.close)
    if start is None:
        raise InvalidArgument("the import stream was empty", metadata={"field": "start"})
    started.append(start)


def _import_folder(
    connect: Callable[[], db.Connection],
    workdir: Path,
    start: UploadStart,
    account: str,
    on_commit: Callable[[], None],
    on_progress: Callable[[tuple[int, int, str]], None],
) -> dict[str, Any]:
    """Import the export received into ``workdir``, then read its media; returns the report."""
    json_name = start.json_name or DEFAULT_JSON_NAME
    json_path = workdir / _safe_relative(json_name)
    label = start.json_path or str(PurePosixPath(start.folder_name or ".") / json_name)
    report = import_export(
        connect(),
        account,
        json_path,
        folder_name=start.folder_name or None,
        chat_title=start.chat_title or None,
        on_progress=on_progress,
        on_commit=on_commit,
        label=label,
    )
    media = read_export_media(connect(), workdir, account, [int(c["id"]) for c in report.chats])
    report.media_text = media
    return report.to_dict()


async def import_upload(
    items: AsyncIterator[UploadItem],
    *,
    data_dir: Path,
    connect: Callable[[], db.Connection],
    account: Callable[[str], str],
    on_commit: Callable[[], None],
) -> AsyncIterator[Progress | dict[str, Any]]:
    """Receive an uploaded export, import it and remove the copy; stream progress, then the report.

    Args:
        items: the upload: an ``UploadStart``, then the chunks of its files.
        data_dir: the data folder; the copy goes to a fresh work folder under ``<data>/tmp``.
        connect: the calling thread's connection to ``ingest.db``.
        account: the account to import into, given the start's (possibly empty) account.
        on_commit: called after every committed batch (from the import's thread).

    Yields:
        ``Progress`` tuples, then the import report (``ImportReport.to_dict()``).

    Raises:
        InvalidArgument: a malformed upload stream or an unsafe path.
        MalformedExport: from the import, after storing what came before the problem.
    """
    async with _work_folder(data_dir) as workdir:
        started: list[UploadStart] = []
        async for progress in _receive(items, workdir, started):
            yield progress
        start = started[0]
        async for kind, value in stream_progress(
            _import_folder, connect, workdir, start, account(start.account), on_commit
        ):
            if kind == "progress":
                done, total, note = cast(tuple[int, int, str], value)
                yield ("import", done, total, note)
            else:
                yield cast(dict[str, Any], value)
