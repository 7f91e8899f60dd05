"""Media text extraction: reading PDF, DOCX and photos, and the resumable pass over ``media``.

Invariants:
* Whatever can be settled from the stored kind, file name, mime and size (no extractor, switched
  off, too large) is settled before anything is fetched or read.
* Reading is capped: ``Limits.max_chars`` of cleaned text per message (readers stop once past
  it), ``max_pages``, ``max_image_pixels``, ``timeout_s`` per file, and a DOCX zip is measured
  before it is opened. Untrusted files never raise out of ``read_file``: they become ``failed``.
* Each fetched copy lives in its own temporary directory, deleted whatever happens.
* Each file read commits its outcome at once through ``store.set_extracted``, so an
  interrupted pass keeps what it read and the next one resumes from the rows still pending.
  Rows settled without a file wait for the next file read, the end of the batch or a fetch
  that stops the pass, and commit with it: redoing them costs nothing.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import shutil
import tempfile
import time
import unicodedata
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any

from chatseek_core import db
from chatseek_core.db import Connection
from chatseek_core.errors import ChatseekError
from chatseek_ingest import store
from chatseek_ingest.extract_ocr import (
    MAX_IMAGE_PIXELS,
    ImageRefused,
    OcrError,
    ocr_engine,
    ocr_image,
)

if TYPE_CHECKING:  # docx is imported when a DOCX is read, not with this module
    from docx.blkcntnr import BlockItemContainer
    from docx.document import Document as DocxDocument

__all__ = [
    "BATCH_SIZE",
    "MAX_CHARS",
    "MAX_DOWNLOAD_MB",
    "MAX_PAGES",
    "STATES",
    "ExtractReport",
    "Extracted",
    "Fetch",
    "FileTooLarge",
    "Limits",
    "MediaRow",
    "UnsafeMediaPath",
    "clean_text",
    "decide",
    "document_format",
    "export_fetcher",
    "extract_pending",
    "read_file",
]

log = logging.getLogger(__name__)

MAX_CHARS = 4000
MAX_PAGES = 50
MAX_DOWNLOAD_MB = 50
FILE_TIMEOUT_S = 30.0
DOCX_MAX_ENTRIES = 2000
DOCX_MAX_UNCOMPRESSED_BYTES = 128 * 1024 * 1024
DOCX_MAX_RATIO = 200
DOCX_RATIO_FLOOR_BYTES = 1024 * 1024
# Rows selected per query. Each query sorts every pending row by date, so small batches made a
# pass over P pending rows cost P²/BATCH_SIZE.
BATCH_SIZE = 1000
# Rows looked up per query when a batch's outcomes are recorded (under SQLite's variable limit).
_LOOKUP_CHUNK = 500
SNIFF_BYTES = 1024
WORD_CUT_BACKOFF = 40
BYTES_PER_MB = 1024 * 1024

STATE_PENDING = "pending"
STATE_READ = "read"
STATE_NO_EXTRACTOR = "no-extractor"
STATE_FAILED = "failed"
STATE_TOO_LARGE = "too-large"
STATE_DISABLED = "disabled"
STATES = (
    STATE_PENDING,
    STATE_READ,
    STATE_NO_EXTRACTOR,
    STATE_FAILED,
    STATE_TOO_LARGE,
    STATE_DISABLED,
)

FORMAT_PDF = "pdf"
FORMAT_DOCX = "docx"
KIND_PHOTO = "photo"
KIND_DOCUMENT = "document"
PDF_MIMES = frozenset({"application/pdf", "application/x-pdf"})
DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
DOCX_MAIN_PART = "word/document.xml"

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"PK\x03\x04", "a zip archive"),
    (b"PK\x05\x06", "an empty zip archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old binary Office file (.doc/.xls)"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"{\\rtf", "an RTF document"),
    (b"Rar!", "a RAR archive"),
    (b"\x1f\x8b", "a gzip archive"),
)
_SPACE_RE = re.compile(r"\s+")
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co"})


# --- records ---


@dataclass(frozen=True)
class Limits:
    """What extraction may do: switches, then caps on size, length, pages, pixels and time.

    Attributes:
        enabled: master switch; off settles every readable kind as ``disabled``.
        ocr: read photos through OCR.
        documents: read PDF and DOCX attachments.
        max_download_mb: files larger than this (MiB, Telegram's reported or the local size)
            are settled ``too-large`` and never read.
        max_chars: cleaned characters kept per message; readers stop once past it.
        max_pages: PDF pages read at most.
        max_image_pixels: images with more pixels are refused before decoding.
        timeout_s: time allowed per file (OCR is killed, documents stop between pages).
        docx_max_entries: a DOCX zip with more entries is refused unopened.
        docx_max_uncompressed_bytes: a DOCX zip declaring more in total is refused unopened.
    """

    enabled: bool = True
    ocr: bool = True
    documents: bool = True
    max_download_mb: float = MAX_DOWNLOAD_MB
    max_chars: int = MAX_CHARS
    max_pages: int = MAX_PAGES
    max_image_pixels: int = MAX_IMAGE_PIXELS
    timeout_s: float = FILE_TIMEOUT_S
    docx_max_entries: int = DOCX_MAX_ENTRIES
    docx_max_uncompressed_bytes: int = DOCX_MAX_UNCOMPRESSED_BYTES

    @property
    def max_bytes(self) -> int:
        """``max_download_mb`` in bytes."""
        return int(self.max_download_mb * BYTES_PER_MB)


@dataclass(frozen=True)
class Extracted:
    """The outcome of reading one file.

    Attributes:
        state: one of ``read``, ``no-extractor``, ``failed``, ``too-large``, ``disabled``.
        text: cleaned, capped text when ``state == "read"`` (may be ``""``: a photo without
            text); None for every other state.
        error: why, for every state but ``read``.
        pages: PDF pages (or DOCX blocks, or images) actually gone through.
    """

    state: str
    text: str | None = None
    error: str | None = None
    pages: int = 0


@dataclass(frozen=True)
class MediaRow:
    """One ``media`` row joined with its message's identity.

    Attributes:
        extra: the row's JSON ``extra`` parsed (``{}`` when absent or unreadable);
            ``extra["export_path"]`` is the relative path of a file included in an export.
    """

    mid: int
    account: str
    chat_id: int
    msg_id: int
    kind: str
    file_name: str | None
    mime: str | None
    size: int | None
    extra: dict[str, Any] = field(default_factory=dict)


Fetch = Callable[[MediaRow, Path], Path | None]
"""``fetch(row, tmpdir)``: a local copy of the row's file (downloads go under ``tmpdir``), or
None when it cannot be fetched at all. Raise ``FileTooLarge`` when the source reports a size
above ``Limits.max_bytes`` (the row is settled ``too-large``, nothing downloaded), a
``ChatseekError`` to abort the pass (network down, flood wait); any other exception settles that
row as ``failed``."""


@dataclass
class ExtractReport:
    """What one ``extract_pending`` pass did.

    Attributes:
        counts: rows settled this pass, by resulting state.
        unfetchable: pending rows whose file nothing can fetch; they stay pending.
        requeued: rows put back to pending before the pass (retry, or a switch turned back on).
        remaining: pending rows another pass could still work on.
        stopped_by: ``"done"`` or ``"budget"``.
    """

    counts: dict[str, int] = field(default_factory=dict)
    unfetchable: int = 0
    requeued: int = 0
    remaining: int = 0
    stopped_by: str = "done"


class FileTooLarge(Exception):
    """Raised by a ``fetch`` that learns, before downloading, that the file is above the cap.

    Attributes:
        size: the file's size in bytes as the source reports it.
    """

    def __init__(self, size: int) -> None:
        super().__init__(f"the file is {size} bytes")
        self.size = size


class UnsafeMediaPath(ValueError):
    """A media path of an export points outside the export folder, or at no regular file."""


# --- deciding ---


def document_format(file_name: str | None, mime: str | None) -> str | None:
    """``"pdf"`` or ``"docx"`` when the file name (first) or the mime says so, else None."""
    suffix = PurePosixPath(file_name or "").suffix.lower()
    if suffix == ".pdf":
        return FORMAT_PDF
    if suffix == ".docx":
        return FORMAT_DOCX
    kind = (mime or "").split(";", 1)[0].strip().lower()
    if kind in PDF_MIMES:
        return FORMAT_PDF
    if kind == DOCX_MIME:
        return FORMAT_DOCX
    return None


def decide(
    kind: str,
    file_name: str | None,
    mime: str | None,
    size: int | None,
    limits: Limits,
    engine: Callable[[], str | None] = ocr_engine,
) -> Extracted | None:
    """Settle a media item from what is stored about it, without touching any file.

    Args:
        engine: which OCR engine this process would use (a pass asks once, not per photo).

    Returns:
        The outcome when it is already known (``no-extractor``, ``disabled``, ``too-large``),
        or None when the file has to be fetched and read.
    """
    if kind == KIND_PHOTO:
        switch, what = limits.ocr, "OCR"
    elif kind == KIND_DOCUMENT:
        fmt = document_format(file_name, mime)
        if fmt is None:
            return Extracted(STATE_NO_EXTRACTOR, error="only PDF and DOCX documents are read")
        switch, what = limits.documents, "document reading"
    else:
        return Extracted(STATE_NO_EXTRACTOR, error=f"nothing reads text out of {kind} media")
    if not limits.enabled:
        return Extracted(STATE_DISABLED, error="media extraction is switched off")
    if not switch:
        return Extracted(STATE_DISABLED, error=f"{what} is switched off")
    if kind == KIND_PHOTO and engine() is None:
        return Extracted(STATE_NO_EXTRACTOR, error="no OCR engine (Vision or Tesseract) here")
    if size is not None and size > limits.max_bytes:
        return Extracted(STATE_TOO_LARGE, error=_too_large(size, limits))
    return None


def _too_large(size: int, limits: Limits) -> str:
    return f"{size / BYTES_PER_MB:.1f} MiB is above the cap of {limits.max_download_mb:g} MiB"


# --- reading ---


def clean_text(raw: str) -> str:
    """Fold every run of whitespace to one space and drop control and format characters."""
    kept = "".join(
        " " if ch.isspace() else ch
        for ch in raw
        if ch.isspace() or unicodedata.category(ch) not in _DROPPED_CATEGORIES
    )
    return _SPACE_RE.sub(" ", kept).strip()


def _cap(text: str, max_chars: int) -> str:
    """At most ``max_chars`` characters, cut at a word boundary when one is close."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    if space >= max_chars - WORD_CUT_BACKOFF:
        cut = cut[:space]
    return cut.rstrip()


class _Collector:
    """Accumulates cleaned pieces until the character cap or the deadline is passed."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.parts: list[str] = []
        self.length = 0
        self.steps = 0
        self.deadline = time.monotonic() + limits.timeout_s
        self.timed_out = False

    def add(self, raw: str) -> None:
        self.steps += 1
        piece = clean_text(raw)
        if piece:
            self.parts.append(piece)
            self.length += len(piece) + 1

    def should_stop(self) -> bool:
        """Whether the cap or the deadline is passed (noting a passed deadline)."""
        if self.length > self.limits.max_chars:
            return True
        if time.monotonic() > self.deadline:
            self.timed_out = True
            return True
        return False

    def result(self) -> Extracted:
        text = _cap(" ".join(self.parts), self.limits.max_chars)
        if self.timed_out and not text:
            return Extracted(
                STATE_FAILED,
                error=f"nothing read within the time limit of {self.limits.timeout_s:g} s",
                pages=self.steps,
            )
        return Extracted(STATE_READ, text=text, pages=self.steps)


def _sniff(path: Path) -> str:
    """What the file's first bytes say it is, in words (``"a PDF"``, ``"a zip archive"``...)."""
    with path.open("rb") as fh:
        head = fh.read(SNIFF_BYTES)
    if not head:
        return "an empty file"
    if b"%PDF-" in head:
        return "a PDF"
    for magic, what in _SIGNATURES:
        if head.startswith(magic):
            return what
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "a WebP image"
    return "an unrecognised file"


def _read_pdf(path: Path, limits: Limits) -> Extracted:
    found = _sniff(path)
    if found != "a PDF":
        return Extracted(STATE_FAILED, error=f"not a PDF: the file is {found}")
    import pypdf

    reader = pypdf.PdfReader(path, strict=False)
    if reader.is_encrypted and not reader.decrypt(""):
        return Extracted(STATE_FAILED, error="the PDF is protected by a password")
    pages = reader.pages
    total = len(pages)
    if total == 0:
        return Extracted(STATE_FAILED, error="the PDF has no readable pages")
    collector = _Collector(limits)
    for index in range(min(total, limits.max_pages)):
        collector.add(pages[index].extract_text() or "")
        if collector.should_stop():
            break
    return collector.result()


def _check_docx_zip(path: Path, limits: Limits) -> str | None:
    """Why the DOCX zip must not be opened (too many entries, too big, a bomb), or None."""
    with zipfile.ZipFile(path) as archive:
        entries = archive.infolist()
        if len(entries) > limits.docx_max_entries:
            return f"zip bomb refused: {len(entries)} entries, the cap is {limits.docx_max_entries}"
        total = sum(entry.file_size for entry in entries)
        if total > limits.docx_max_uncompressed_bytes:
            return (
                f"zip bomb refused: {total} bytes uncompressed,"
                f" the cap is {limits.docx_max_uncompressed_bytes}"
            )
        for entry in entries:
            if entry.file_size < DOCX_RATIO_FLOOR_BYTES:
                continue
            ratio = entry.file_size / max(entry.compress_size, 1)
            if ratio > DOCX_MAX_RATIO:
                return f"zip bomb refused: an entry expands {ratio:.0f} times"
        if DOCX_MAIN_PART not in archive.namelist():
            return f"not a DOCX: the zip holds no {DOCX_MAIN_PART}"
    return None


def _docx_blocks(container: DocxDocument | BlockItemContainer) -> Iterator[str]:
    """Paragraph texts of a document or table cell in reading order, tables cell by cell."""
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    for block in container.iter_inner_content():
        if isinstance(block, Paragraph):
            yield block.text
        elif isinstance(block, Table):
            for row in block.rows:
                seen: set[int] = set()
                for cell in row.cells:
                    if id(cell._tc) in seen:
                        continue
                    seen.add(id(cell._tc))
                    yield from _docx_blocks(cell)


def _read_docx(path: Path, limits: Limits) -> Extracted:
    found = _sniff(path)
    if found != "a zip archive":
        return Extracted(STATE_FAILED, error=f"not a DOCX: the file is {found}")
    refused = _check_docx_zip(path, limits)
    if refused is not None:
        return Extracted(STATE_FAILED, error=refused)
    import docx

    document = docx.Document(str(path))
    collector = _Collector(limits)
    for text in _docx_blocks(document):
        collector.add(text)
        if collector.should_stop():
            break
    return collector.result()


def _read_photo(path: Path, limits: Limits) -> Extracted:
    raw = ocr_image(path, max_pixels=limits.max_image_pixels, timeout_s=limits.timeout_s)
    return Extracted(STATE_READ, text=_cap(clean_text(raw), limits.max_chars), pages=1)


def read_file(
    path: Path, *, kind: str, file_name: str | None, mime: str | None, limits: Limits
) -> Extracted:
    """Read the text out of a local media file.

    The stored facts decide first (see ``decide``); then a file above ``limits.max_bytes`` is
    settled ``too-large`` unread; then the file's own bytes must match its declared format.

    Args:
        path: the local copy.
        kind: the media kind (``photo``, ``document``, ...).
        file_name: the attachment's name, which decides the document format.
        mime: the attachment's mime type, used when the name does not decide.
        limits: switches and caps.

    Returns:
        The outcome; a corrupt, mislabelled, encrypted or oversized file is ``failed`` with the
        reason, never an exception.
    """
    decided = decide(kind, file_name, mime, None, limits)
    if decided is not None:
        return decided
    try:
        size = path.stat().st_size
    except OSError as exc:
        return Extracted(STATE_FAILED, error=f"the file cannot be opened: {exc.strerror}")
    if size > limits.max_bytes:
        return Extracted(STATE_TOO_LARGE, error=_too_large(size, limits))
    if size == 0:
        return Extracted(STATE_FAILED, error="the file is empty")
    fmt = KIND_PHOTO if kind == KIND_PHOTO else document_format(file_name, mime)
    try:
        if fmt == KIND_PHOTO:
            return _read_photo(path, limits)
        if fmt == FORMAT_PDF:
            return _read_pdf(path, limits)
        return _read_docx(path, limits)
    except (ImageRefused, OcrError) as exc:
        return Extracted(STATE_FAILED, error=str(exc))
    except Exception as exc:  # parsers of untrusted files raise anything at all
        log.debug("reading media failed", exc_info=True)
        return Extracted(STATE_FAILED, error=f"unreadable {fmt}: {type(exc).__name__}: {exc}")


# --- fetching from an export ---


def export_fetcher(root: Path) -> Fetch:
    """A ``fetch`` that reads media files from inside the export folder ``root`` only.

    The returned function gives the file at ``row.extra["export_path"]`` (nothing is copied),
    or None when the row names no file or the file is not there (not included in the export).

    Raises (from the returned function):
        UnsafeMediaPath: the path is absolute, climbs with ``..``, resolves (through symlinks)
            outside ``root``, or is not a regular file.
    """
    base = root.resolve()

    def fetch(row: MediaRow, tmpdir: Path) -> Path | None:
        rel = row.extra.get("export_path")
        if not isinstance(rel, str) or not rel.strip():
            return None
        posix, windows = PurePosixPath(rel), PureWindowsPath(rel)
        if posix.is_absolute() or windows.is_absolute() or windows.drive:
            raise UnsafeMediaPath("the export media path is absolute")
        if ".." in posix.parts or ".." in windows.parts:
            raise UnsafeMediaPath("the export media path climbs out with '..'")
        target = base / posix
        if not target.exists() and not target.is_symlink():
            return None
        resolved = target.resolve()
        if not resolved.is_relative_to(base):
            raise UnsafeMediaPath("the export media path resolves outside the export folder")
        if not resolved.is_file():
            raise UnsafeMediaPath("the export media path is not a regular file")
        return resolved

    return fetch


# --- the pass ---


_SELECT_PENDING = (
    "SELECT media.mid, msg.account, msg.chat_id, msg.msg_id, msg.date, media.kind,"
    " media.file_name, media.mime, media.size, media.extra"
    " FROM media JOIN messages AS msg ON msg.mid = media.mid"
    " WHERE media.extract_state = 'pending' AND (msg.date, media.mid) > (?, ?)"
    " ORDER BY msg.date, media.mid LIMIT ?"
)
_IN_SCOPE = " AND msg.account = ? AND msg.chat_id IN (SELECT value FROM json_each(?))"
# A scoped pass (an import's, over the chats it stored) walks the pending rows in mid order,
# the order the import stored them, along the pending index, each batch after the last mid: no
# batch sorts anything. By date it had to walk every message of each chat to find the few with
# pending media (0.47 s against 0.23 at 1M messages, 84k media rows); among every pending row,
# re-sorted for each batch, it spent 9 of its 11 s there.
_SELECT_PENDING_IN_SCOPE = (
    "SELECT media.mid, msg.account, msg.chat_id, msg.msg_id, msg.date, media.kind,"
    " media.file_name, media.mime, media.size, media.extra"
    " FROM media JOIN messages AS msg ON msg.mid = media.mid"
    " WHERE media.extract_state = 'pending' AND media.mid > ?"
    + _IN_SCOPE
    + " ORDER BY media.mid LIMIT ?"
)
_FIRST = (-(2**62), 0)


@dataclass(frozen=True, slots=True)
class Scope:
    """The chats of one account a pass is limited to (e.g. those an import just stored)."""

    account: str
    chat_ids: tuple[int, ...]

    def params(self) -> tuple[str, str]:
        return self.account, json.dumps(list(self.chat_ids))


def _parse_extra(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _batches(conn: Connection, size: int, scope: Scope | None) -> Iterator[list[Any]]:
    """Pending rows (``_SELECT_PENDING``'s columns), ``size`` at a time: oldest message first,
    or within a scope in the order they were stored.

    Each batch is selected after the previous one was worked through, past its last row, so
    rows settled meanwhile are not selected again and rows left pending are not either.
    """
    after = _FIRST
    while True:
        if scope is None:
            rows = conn.execute(_SELECT_PENDING, (*after, size)).fetchall()
        else:
            rows = conn.execute(
                _SELECT_PENDING_IN_SCOPE, (after[1], *scope.params(), size)
            ).fetchall()
        if not rows:
            return
        yield rows
        after = (int(rows[-1][4]), int(rows[-1][0]))


def _media_row(r: Sequence[Any], *, extra: bool = True) -> MediaRow:
    """Row ``r`` of ``_batches``; ``extra=False`` leaves ``extra`` unread (empty), for a row
    settled from its stored facts, which no fetch will see."""
    return MediaRow(
        mid=int(r[0]),
        account=str(r[1]),
        chat_id=int(r[2]),
        msg_id=int(r[3]),
        kind=str(r[5]),
        file_name=r[6],
        mime=r[7],
        size=None if r[8] is None else int(r[8]),
        extra=_parse_extra(r[9]) if extra else {},
    )


def _requeue(conn: Connection, limits: Limits, retry_failed: bool) -> int:
    """Put failed/no-extractor rows (on retry) and re-enabled ``disabled`` kinds back to pending."""
    moved = 0
    with db.transaction(conn):
        if retry_failed:
            moved += conn.execute(
                "UPDATE media SET extract_state = 'pending', extract_error = NULL"
                " WHERE extract_state IN ('failed', 'no-extractor')"
            ).rowcount
        kinds = [k for k, on in ((KIND_PHOTO, limits.ocr), (KIND_DOCUMENT, limits.documents)) if on]
        if limits.enabled and kinds:
            marks = ",".join("?" for _ in kinds)
            moved += conn.execute(
                "UPDATE media SET extract_state = 'pending', extract_error = NULL"
                f" WHERE extract_state = 'disabled' AND kind IN ({marks})",
                kinds,
            ).rowcount
    return moved


def _pending_count(conn: Connection, scope: Scope | None) -> int:
    if scope is None:
        row = conn.execute("SELECT COUNT(*) FROM media WHERE extract_state = 'pending'").fetchone()
    else:
        # Walks the pending rows (their partial index) and looks each one's message up:
        # 2.5× faster at 1M messages than a join, which the planner drives from messages.
        row = conn.execute(
            "SELECT COUNT(*) FROM media WHERE extract_state = 'pending' AND EXISTS"
            " (SELECT 1 FROM messages AS msg WHERE msg.mid = media.mid" + _IN_SCOPE + ")",
            scope.params(),
        ).fetchone()
    return int(row[0])


def _unchanged(conn: Connection, outcomes: list[tuple[MediaRow, Extracted]]) -> set[int]:
    """The mids of ``outcomes`` whose media row is still pending as it was when read."""
    read = {row.mid: (STATE_PENDING, row.kind, row.file_name, row.size) for row, _ in outcomes}
    mids = list(read)
    same: set[int] = set()
    for at in range(0, len(mids), _LOOKUP_CHUNK):
        part = mids[at : at + _LOOKUP_CHUNK]
        marks = ",".join("?" * len(part))
        for mid, *current in conn.execute(
            f"SELECT mid, extract_state, kind, file_name, size FROM media WHERE mid IN ({marks})",
            part,
        ):
            if tuple(current) == read[mid]:
                same.add(mid)
    return same


def _record_all(
    conn: Connection, outcomes: list[tuple[MediaRow, Extracted]], report: ExtractReport
) -> None:
    """Store ``outcomes`` in one transaction, each unless its row changed while it was read
    (left for the next pass), and count those stored in ``report``."""
    if not outcomes:
        return
    with db.transaction(conn):
        same = _unchanged(conn, outcomes)
        stored = [(row, outcome) for row, outcome in outcomes if row.mid in same]
        store.set_extracted_many(
            conn,
            [
                (row.mid, o.state, o.text if o.state == STATE_READ else None, o.error)
                for row, o in stored
            ],
        )
    for row, _ in outcomes:
        if row.mid not in same:
            log.debug("media %d changed while it was read; left for the next pass", row.mid)
    for row, outcome in stored:
        report.counts[outcome.state] = report.counts.get(outcome.state, 0) + 1
        if outcome.state == STATE_FAILED:
            log.info("media %d could not be read: %s", row.mid, outcome.error)


def _fetch_and_read(row: MediaRow, fetch: Fetch, limits: Limits, tmpdir: Path) -> Extracted | None:
    """Fetch and read one row; None when it cannot be fetched. ``ChatseekError`` propagates."""
    try:
        local = fetch(row, tmpdir)
    except ChatseekError:
        raise
    except FileTooLarge as exc:
        return Extracted(STATE_TOO_LARGE, error=_too_large(exc.size, limits))
    except Exception as exc:  # a failed download settles this row only
        return Extracted(STATE_FAILED, error=f"could not fetch the file: {exc}")
    if local is None:
        return None
    return read_file(local, kind=row.kind, file_name=row.file_name, mime=row.mime, limits=limits)


def _fetch_into(
    row: MediaRow, fetch: Fetch, limits: Limits, tmpdir: Path, downloads: bool
) -> Extracted | None:
    """``_fetch_and_read`` with the empty directory ``tmpdir``, emptied again afterwards
    unless ``fetch`` never ``downloads`` into it."""
    try:
        return _fetch_and_read(row, fetch, limits, tmpdir)
    finally:
        for child in list(tmpdir.iterdir()) if downloads else ():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)


def extract_pending(
    conn: Connection,
    *,
    fetch: Fetch,
    limits: Limits | None = None,
    budget_s: float | None = None,
    retry_failed: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    batch_size: int = BATCH_SIZE,
    work_dir: Path | None = None,
    clock: Callable[[], float] = time.monotonic,
    scope: Scope | None = None,
    downloads: bool = True,
) -> ExtractReport:
    """Read the text of every pending media row, oldest message first, resumably (within a
    ``scope``, in the order the rows were stored).

    Rows are settled from their stored facts when possible (nothing fetched), else fetched
    into an empty temporary directory, read, and recorded at once; settled rows are recorded
    in the same transaction as the next file read, or at the end of their batch.

    Args:
        conn: a connection to ``ingest.db`` (the pass opens its own transactions).
        fetch: gives a local copy of a row's file (see ``Fetch``).
        limits: switches and caps; defaults to ``Limits()``.
        budget_s: seconds after which no further file is started; None for no limit.
        retry_failed: first put ``failed`` and ``no-extractor`` rows back to pending.
        on_progress: called after each row with (rows gone through, pending at the start);
            without it the pending rows are not counted first.
        batch_size: rows selected per query.
        work_dir: where the pass's temporary directory goes (the system default when None).
        clock: seconds, monotonic; injectable for tests.
        scope: only rows of these chats (every pending row when None).
        downloads: whether ``fetch`` may write under its temporary directory; False for one
            that reads files where they lie (an export's), whose directory stays empty.

    Returns:
        Counts per resulting state, unfetchable rows, rows re-queued, rows still pending that
        another pass could work on, and why it stopped.

    Raises:
        ChatseekError: raised by ``fetch`` (the pass stops; what it recorded stays recorded),
            or a storage error.
    """
    limits = limits or Limits()
    started = clock()
    report = ExtractReport()
    report.requeued = _requeue(conn, limits, retry_failed)
    total = _pending_count(conn, scope) if on_progress is not None else 0
    done = 0
    engine = functools.cache(ocr_engine)
    # One temporary directory for the pass, emptied after each row: creating and removing a
    # directory per row cost a third of a 100k-message import's time, mostly for rows that an
    # export fetch never downloads.
    with tempfile.TemporaryDirectory(prefix="chatseek-media-", dir=work_dir) as pass_name:
        pass_dir = Path(pass_name)
        for batch in _batches(conn, batch_size, scope):
            settled: list[tuple[MediaRow, Extracted]] = []
            for r in batch:
                if budget_s is not None and clock() - started >= budget_s:
                    report.stopped_by = "budget"
                    break
                outcome = decide(r[5], r[6], r[7], r[8], limits, engine)
                if outcome is not None:
                    settled.append((_media_row(r, extra=False), outcome))
                else:
                    row = _media_row(r)
                    try:
                        outcome = _fetch_into(row, fetch, limits, pass_dir, downloads)
                    except ChatseekError:
                        _record_all(conn, settled, report)
                        raise
                    if outcome is None:
                        report.unfetchable += 1
                    else:
                        _record_all(conn, [*settled, (row, outcome)], report)
                        settled = []
                done += 1
                if on_progress is not None:
                    on_progress(done, total)
            _record_all(conn, settled, report)
            if report.stopped_by != "done":
                break
    report.remaining = max(_pending_count(conn, scope) - report.unfetchable, 0)
    log.info(
        "extract pass %s: %s, %d unfetchable, %d remaining",
        report.stopped_by,
        report.counts,
        report.unfetchable,
        report.remaining,
    )
    return report
