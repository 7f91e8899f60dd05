"""The stored sync state of a source chat, as one run reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from telethon import utils

from chatseek_ingest.model import ExportChat
from chatseek_ingest.sync.context import RunContext

__all__ = ["CHAT_SQL", "SyncChat", "load_chat", "sync_chat_of"]

CHAT_SQL = (
    "SELECT c.chat_id, c.type, c.title, c.username, c.access_hash, c.source_id,"
    " c.history_complete, c.last_msg_id, c.migrated_to, c.linked_chat_id, s.since, s.comments,"
    " c.last_fetched_at"
    " FROM chats c JOIN sources s ON s.account = c.account AND s.source_id = c.source_id"
    " WHERE c.account = ? AND c.is_import = 0 AND s.kind IN ('chat', 'folder')"
)


@dataclass
class SyncChat:
    """A source chat's stored sync state (``CHAT_SQL``'s columns)."""

    chat_id: int
    type: str
    title: str
    username: str | None
    access_hash: int | None
    source_id: str
    history_complete: bool
    last_msg_id: int
    migrated_to: int | None
    linked_chat_id: int | None
    since: int | None
    comments: bool

    def record(self) -> ExportChat:
        return ExportChat(
            chat_id=self.chat_id,
            raw_id=utils.resolve_id(self.chat_id)[0],
            type=self.type,
            title=self.title,
            username=self.username,
            export_type="",
        )


def sync_chat_of(row: Any) -> SyncChat:
    """The ``SyncChat`` of a ``CHAT_SQL`` row."""
    return SyncChat(
        chat_id=int(row[0]),
        type=str(row[1]),
        title=str(row[2]),
        username=row[3],
        access_hash=row[4],
        source_id=str(row[5]),
        history_complete=bool(row[6]),
        last_msg_id=int(row[7]),
        migrated_to=row[8],
        linked_chat_id=row[9],
        since=row[10],
        comments=bool(row[11]),
    )


def load_chat(ctx: RunContext, chat_id: int) -> SyncChat | None:
    """The stored sync state of one synced chat, or None."""
    row = ctx.conn.execute(CHAT_SQL + " AND c.chat_id = ?", (ctx.account, chat_id))
    found = row.fetchone()
    return sync_chat_of(found) if found is not None else None
