"""The streaming pass: the JSON file fed chunk by chunk to the push parser, in bounded memory.

Invariants: a file cut mid-write yields its complete prefix then one ``truncated`` warning (a
NUL byte or a premature end is a cut); a JSON syntax error raises ``MalformedExport`` after the
complete messages before it; arrays or objects nested past ``MAX_NESTING`` abort the pass.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import ijson

from chatseek_core.errors import InvalidArgument, MalformedExport, NotFound, StorageError
from chatseek_ingest.export.nesting import MAX_NESTING, Nesting
from chatseek_ingest.export.parser import (
    CHUNK_BYTES,
    JSON_SPACE,
    PARSE_ERRORS,
    JsonFile,
    pipeline,
    skip_bom,
)
from chatseek_ingest.export.source import ExportSource, malformed
from chatseek_ingest.export.tree import ExportRecord, PartialTree
from chatseek_ingest.model import ExportChat, ExportMessage

__all__ = ["MAX_PENDING_MESSAGES", "iter_export"]

log = logging.getLogger(__name__)

MAX_PENDING_MESSAGES = 10_000


def iter_export(
    source: ExportSource, *, max_pending: int = MAX_PENDING_MESSAGES
) -> Iterator[ExportRecord]:
    """Stream the records of an export in file order.

    Each chat yields its ``ExportChat`` first, then its messages (and warnings about them) in
    file order, then the next chat follows. A supergroup whose history shows a forum topic
    action is yielded again with ``type="forum"`` just before that message.

    Args:
        source: from ``open_export``.
        max_pending: messages held while a chat's header has not been read yet (keys after
            ``messages``); past it the header is looked up by a second streaming pass.

    Raises:
        InvalidArgument: ``max_pending`` below 1.
        NotFound: the JSON file vanished; StorageError: it cannot be read.
        MalformedExport: not JSON, invalid UTF-8, a top level of neither export shape, a
            message without an integer id or not an object, a chat without an integer id and
            a type, a ``chats``/``list``/``messages`` of the wrong JSON type. Raised lazily, at
            the point of the stream where the problem is met.
    """
    if max_pending < 1:
        raise InvalidArgument("max_pending must be at least 1", metadata={"max_pending": "1"})
    return _Reader(source, max_pending).run()


class _Reader:
    """One streaming pass over an export; ``run()`` is the record generator."""

    def __init__(self, source: ExportSource, max_pending: int) -> None:
        self._src = source
        self._label = source.label or str(source.json_path)
        root: dict[str, Any] = {}
        self._done = ijson.sendable_list()
        make_map = itertools.chain([root], iter(dict, None)).__next__
        # The first map the builder creates is the document root, so the partial tree stays
        # reachable from here while the C parser fills it in.
        self._feed = pipeline(self._done, "", make_map)
        self._fed = 0
        self._chunk = (0, 0)
        self._nesting = Nesting()
        real = os.path.realpath(source.root)
        self._tree = PartialTree(root, self._label, source.open_json, real, max_pending)
        self._chats = 0
        self._messages = 0
        self._warnings = 0

    def run(self) -> Iterator[ExportRecord]:
        try:
            f = self._src.open_json()
        except FileNotFoundError:
            raise NotFound(f"{self._label}: no such file", metadata={"file": self._label}) from None
        except OSError as exc:
            raise StorageError(
                f"{self._label}: cannot open ({exc.strerror})", metadata={"file": self._label}
            ) from None
        truncated_at: int | None = None
        with closing(f):
            self._fed = self._check_start(f)
            while True:
                chunk = f.read(CHUNK_BYTES)
                if not chunk:
                    break
                nul = chunk.find(b"\x00")
                if nul != -1:
                    # JSON never holds a raw NUL: a crash mid-write left zero-filled blocks.
                    chunk = chunk[:nul]
                    truncated_at = self._fed + nul
                if chunk:
                    deep = self._nesting.too_deep_at(chunk)
                    if deep is not None:
                        if deep:
                            yield from self._send(chunk[:deep])
                        raise malformed(
                            self._label,
                            self._tree.where(bool(self._done)),
                            f"arrays or objects nested deeper than {MAX_NESTING} levels "
                            f"(at byte {self._fed})",
                            offset=self._fed,
                        )
                    yield from self._send(chunk)
                if truncated_at is not None:
                    break
            if truncated_at is None:
                try:
                    self._feed.close()
                except PARSE_ERRORS:
                    # Every byte fed was accepted, so only the end is missing: premature EOF or
                    # a token (string, escape, number, UTF-8 sequence) cut in half.
                    truncated_at = self._fed
        if truncated_at is None:
            yield from self._counted(self._tree.advance(True, self._fed))
        else:
            yield from self._counted(self._tree.finish_truncated(truncated_at))
        log.info(
            "export %s read: %d chats, %d messages, %d warnings%s",
            self._label,
            self._chats,
            self._messages,
            self._warnings,
            "" if truncated_at is None else " (truncated)",
        )

    def _send(self, chunk: bytes) -> Iterator[ExportRecord]:
        """Feed ``chunk``; hand out what it completes (before a syntax error, what preceded it)."""
        self._chunk = (self._fed, self._fed + len(chunk))
        try:
            self._feed.send(chunk)
        except PARSE_ERRORS as exc:
            error = self._syntax_error(exc)
            # What the parser built before the problem is complete: hand it out first.
            yield from self._counted(self._tree.advance(False, self._fed))
            raise error from None
        self._fed += len(chunk)
        yield from self._counted(self._tree.advance(False, self._fed))

    def _counted(self, records: Iterator[ExportRecord]) -> Iterator[ExportRecord]:
        for record in records:
            if type(record) is ExportMessage:
                self._messages += 1
            elif type(record) is ExportChat:
                self._chats += 1
            else:
                self._warnings += 1
            yield record

    def _check_start(self, f: JsonFile) -> int:
        start = skip_bom(f)
        head = f.read(CHUNK_BYTES).lstrip(JSON_SPACE)
        f.seek(start)
        if head.startswith(b"{"):
            return start
        if not head:
            problem = "the file is empty"
        elif head.startswith(b"["):
            problem = "the top level is an array"
        else:
            problem = "the file is not JSON"
        raise malformed(self._label, "top level", problem, offset=start)

    def _syntax_error(self, exc: Exception) -> MalformedExport:
        lines = str(exc).strip().strip("b'\"").splitlines() or ["invalid JSON"]
        detail = lines[0].split("\\n")[0].strip().rstrip(".")
        if "UTF8" in detail or isinstance(exc, UnicodeDecodeError):
            detail = "invalid UTF-8 bytes"
        start, end = self._chunk
        return malformed(
            self._label,
            self._tree.where(bool(self._done)),
            f"{detail} (in bytes {start}-{end})",
            offset=start,
        )
