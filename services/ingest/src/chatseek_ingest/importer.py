"""Imports a Telegram Desktop export that the client streamed into a private folder.

Invariants:
* The export is read as a stream and stored in bounded batches, each batch one transaction with
  its feed events, so memory stays bounded and what is committed is already searchable.
* Importing the same export again updates rather than duplicates; unchanged messages are not
  re-announced.
* Imported chats belong to the source ``import:<slug>``, are marked imported (never fetched by a
  sync) and their history is marked complete once the export's last message of the chat is
  stored; a chat cut short by truncation or a malformed export is not, and the report's
  ``truncated`` warning or the error's ``partial_chat`` names it.
* A malformed export keeps what was read before the problem and says how far it got; so does
  an import whose reader process (``reading``) died.
* Media files included in the export are read for text right away; absent ones stay pending.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, TypeVar

from chatseek_core import db
from chatseek_core.errors import ChatseekError, MalformedExport
from chatseek_ingest import store
from chatseek_ingest.export import ExportSource, export_slug, open_export
from chatseek_ingest.export.arriving import Growth
from chatseek_ingest.model import ExportChat, ExportWarning
from chatseek_ingest.reading import ReaderFailed, read_prepared

__all__ = ["BATCH_MESSAGES", "ImportReport", "ImportedChat", "ReportWarning", "import_export"]

log = logging.getLogger(__name__)

BATCH_MESSAGES = 5000
PROGRESS_EVERY_S = 0.5

Progress = Callable[[tuple[int, int, str]], None]
E = TypeVar("E", bound=ChatseekError)


class ImportedChat(TypedDict):
    """A chat of an import's report."""

    id: int
    title: str
    type: str
    source: str


class ReportWarning(TypedDict):
    """An ``ExportWarning`` in an import's report."""

    kind: str
    message: str
    chat_id: int | None
    msg_id: int | None
    location: str


@dataclass
class ImportReport:
    """The closing report of one import (also its ``--json`` document)."""

    source: str
    chats: list[ImportedChat] = field(default_factory=list)
    messages_imported: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    service_messages: int = 0
    skipped: int = 0
    media: dict[str, int] = field(default_factory=dict)
    warnings: list[ReportWarning] = field(default_factory=list)
    truncated: bool = False
    media_text: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the report."""
        return {
            "source": self.source,
            "chats": self.chats,
            "messages_imported": self.messages_imported,
            "new": self.new,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "service_messages": self.service_messages,
            "skipped": self.skipped,
            "media": self.media,
            "media_text": self.media_text,
            "warnings": self.warnings,
            "truncated": self.truncated,
        }


class _Importer:
    def __init__(
        self,
        conn: db.Connection,
        account: str,
        source: ExportSource,
        source_id: str,
        chat_title: str | None,
        on_progress: Progress | None,
        on_commit: Callable[[], None] | None,
    ) -> None:
        self.conn = conn
        self.account = account
        self.source = source
        self.source_id = source_id
        self.chat_title = chat_title
        self.on_progress = on_progress
        self.on_commit = on_commit
        self.report = ImportReport(source=source_id)
        self.buffer: list[store.Prepared] = []
        self.chats: dict[int, ImportedChat] = {}
        self.last_progress = 0.0
        self.seen = 0
        self.titled_chat: int | None = None
        self.open_chat: int | None = None

    def chat(self, chat: ExportChat) -> None:
        self.flush()
        if self.chat_title and (not self.chats or chat.chat_id == self.titled_chat):
            self.titled_chat = chat.chat_id
            chat = dataclasses.replace(chat, title=self.chat_title)
        with db.transaction(self.conn):
            if self.open_chat != chat.chat_id:
                self.close_chat()
            store.upsert_chat(
                self.conn, self.account, chat, source_id=self.source_id, is_import=True
            )
        self.open_chat = chat.chat_id
        entry = self.chats.setdefault(
            chat.chat_id,
            {"id": chat.chat_id, "title": chat.title, "type": chat.type, "source": self.source_id},
        )
        entry["type"] = chat.type

    def messages(self, messages: Sequence[store.Prepared]) -> None:
        self.buffer.extend(messages)
        self.seen += len(messages)
        if len(self.buffer) >= BATCH_MESSAGES:
            self.flush()

    def close_chat(self) -> None:
        """Mark the chat being read complete: the export holds none of its messages past here."""
        if self.open_chat is not None:
            with db.transaction(self.conn):
                self.conn.execute(
                    "UPDATE chats SET history_complete = 1 WHERE account = ? AND chat_id = ?",
                    (self.account, self.open_chat),
                )
        self.open_chat = None

    def warning(self, warning: ExportWarning) -> None:
        if warning.kind == "truncated":
            self.report.truncated = True
            if warning.chat_id != self.open_chat:
                self.close_chat()
            self.open_chat = None
        if warning.kind == "skipped":
            self.report.skipped += 1
        self.report.warnings.append(
            {
                "kind": warning.kind,
                "message": warning.message,
                "chat_id": warning.chat_id,
                "msg_id": warning.msg_id,
                "location": warning.location,
            }
        )

    def flush(self) -> None:
        if not self.buffer:
            return
        batch, self.buffer = self.buffer, []
        with db.transaction(self.conn):
            stats = store.store_prepared(self.conn, self.account, batch)
        report = self.report
        report.new += stats.new
        report.updated += stats.updated
        report.unchanged += stats.unchanged
        for kind, count in stats.media.items():
            report.media[kind] = report.media.get(kind, 0) + count
        service = sum(map(store.is_service, batch))
        report.service_messages += service
        report.messages_imported += len(batch) - service
        if self.on_commit is not None:
            self.on_commit()
        now = time.monotonic()
        if self.on_progress is not None and now - self.last_progress >= PROGRESS_EVERY_S:
            self.last_progress = now
            self.on_progress((self.seen, 0, f"{len(self.chats)} chats"))

    def stopped(self, error: E) -> E:
        """``error`` completed with how far the import got (what is read so far is stored)."""
        self.flush()
        with db.transaction(self.conn):
            store.refresh_counts(self.conn, self.account, self.chats)
        report = self.report
        stored = report.new + report.updated + report.unchanged
        progress = f"{stored} messages of {len(self.chats)} chats were imported before it"
        metadata = {**error.metadata, "messages_stored": str(stored)}
        if self.open_chat is not None:
            progress += f"; chat {self.open_chat} only partly, so it is not marked complete"
            metadata["partial_chat"] = str(self.open_chat)
        log.warning(
            "import %s stopped at %s: %d messages of %d chats imported",
            self.source_id,
            error.metadata.get("location", "?"),
            stored,
            len(self.chats),
        )
        return type(error)(f"{error.message}; {progress}", hint=error.hint, metadata=metadata)


def import_export(
    conn: db.Connection,
    account: str,
    path: Path,
    *,
    folder_name: str | None = None,
    chat_title: str | None = None,
    on_progress: Progress | None = None,
    on_commit: Callable[[], None] | None = None,
    label: str | None = None,
    reader_process: bool | None = None,
    growth: Growth | None = None,
) -> ImportReport:
    """Import the export at ``path`` (a folder or its JSON file) into ``account``.

    Args:
        folder_name: the export folder's name on the user's machine, for the ``import:`` slug.
        chat_title: overrides the title of a single-chat export.
        on_progress: receives ``(messages read, 0, note)`` now and then.
        on_commit: called after every committed batch (nudges the consumers).
        label: how warnings and errors name the JSON file (the user's own path, when ``path``
            is the service's copy of an upload).
        reader_process: parse the export in a reader process beside this one (True), here
            (False), or pick by its size and the cores at hand (None; see ``reading``).
        growth: set when the JSON file is still arriving (an upload imported as it comes):
            its reads wait for the bytes not yet written.

    Raises:
        MalformedExport: the file is not an export; everything read before the problem is
            stored, and the error's ``messages_stored`` (and ``partial_chat``, a chat read only
            in part) say how far it got.
    """
    source = open_export(path)
    if label or growth is not None:
        source = dataclasses.replace(source, label=label or source.label, growth=growth)
    slug = export_slug(Path(folder_name) if folder_name else source.root, chat_title)
    source_id = f"import:{slug}"
    with db.transaction(conn):
        store.ensure_account(conn, account)
        store.ensure_source(conn, account, source_id, "import", folder_name or source.root.name)
    importer = _Importer(conn, account, source, source_id, chat_title, on_progress, on_commit)
    try:
        with closing(read_prepared(source, process=reader_process)) as records:
            for record in records:
                if isinstance(record, list):
                    importer.messages(record)
                elif isinstance(record, ExportChat):
                    importer.chat(record)
                else:
                    importer.warning(record)
    except MalformedExport as error:
        raise importer.stopped(error) from None
    except ReaderFailed as error:
        raise importer.stopped(error) from None
    importer.flush()
    importer.close_chat()
    with db.transaction(conn):
        store.refresh_counts(conn, account, importer.chats)
    importer.report.chats = list(importer.chats.values())
    log.info(
        "imported %s: %d chats, %d messages (%d new, %d updated)",
        source_id,
        len(importer.chats),
        importer.report.messages_imported,
        importer.report.new,
        importer.report.updated,
    )
    return importer.report
