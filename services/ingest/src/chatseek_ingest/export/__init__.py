"""Streaming reader of Telegram Desktop JSON exports (single chat or whole account).

Owns turning ``result.json`` / ``messages.json`` into ``ExportChat`` / ``ExportMessage`` /
``ExportWarning`` records in file order, in bounded memory: ijson's C parser builds the document
in 64 KiB steps and every complete message is handed out and dropped from the partial tree.
Invariants: a chat header precedes its messages; a media path never escapes the export folder;
a file cut mid-write yields its complete prefix then one ``truncated`` warning; anything else
malformed raises ``MalformedExport`` naming the file, the JSON path and the byte range. Modules:
``source`` (locating), ``reader`` (feeding), ``tree`` (walking), ``chat``/``message``/``media``/
``fields`` (normalising), ``nesting`` and ``rescan`` (the guards and second passes).
"""

from __future__ import annotations

from chatseek_ingest.export.nesting import MAX_NESTING
from chatseek_ingest.export.parser import CHUNK_BYTES
from chatseek_ingest.export.reader import MAX_PENDING_MESSAGES, iter_export
from chatseek_ingest.export.source import (
    EXPORT_FILE_NAMES,
    ExportSource,
    export_slug,
    open_export,
    resolve_media,
)
from chatseek_ingest.export.tree import ExportRecord

__all__ = [
    "CHUNK_BYTES",
    "EXPORT_FILE_NAMES",
    "MAX_NESTING",
    "MAX_PENDING_MESSAGES",
    "ExportRecord",
    "ExportSource",
    "export_slug",
    "iter_export",
    "open_export",
    "resolve_media",
]
