"""Pruning folder sources: deleting the stored chats a folder no longer lists.

Deletes nothing when a folder source fails to resolve; keeps a chat another source lists, a
channel's discussion group and the legacy group a staying supergroup came from; never
considers imported chats.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from chatseek_core import db
from chatseek_core.aio import to_thread
from chatseek_core.errors import (
    FailedPrecondition,
)
from chatseek_ingest import store
from chatseek_ingest.sources.resolve import (
    FOLDER_PREFIX,
    INT_RE,
    fetch_dialogs,
    flood_policy,
)
from chatseek_ingest.sync import default_lock_path, folder_members, sync_lock
from chatseek_ingest.telegram import (
    FloodPolicy,
    TelegramClientLike,
    folder_title,
    get_folders,
)

__all__ = ["KeptChat", "PruneSourcesReport", "PrunedChat", "prune_sources"]

log = logging.getLogger(__name__)


class PrunedChat(TypedDict):
    """A chat ``prune_sources`` removed (or would remove)."""

    chat_id: int
    title: str
    source_id: str


class KeptChat(PrunedChat):
    """A chat ``prune_sources`` kept, with why."""

    reason: str


@dataclass
class PruneSourcesReport:
    """What ``prune_sources`` removed (or would remove) and what it kept, with why."""

    dry_run: bool
    removed: list[PrunedChat] = field(default_factory=list)
    kept: list[KeptChat] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """``{would_remove | removed: [{chat_id, title, source_id}], kept: [...], dry_run}``."""
        key = "would_remove" if self.dry_run else "removed"
        return {key: self.removed, "kept": self.kept, "dry_run": self.dry_run}


@dataclass
class _Row:
    chat_id: int
    title: str
    source_id: str
    linked_chat_id: int | None
    migrated_to: int | None


async def prune_sources(
    conn: db.Connection,
    client: TelegramClientLike,
    account: str,
    *,
    dry_run: bool = True,
    policy: FloodPolicy | None = None,
    lock_path: Path | None = None,
) -> PruneSourcesReport:
    """Delete the stored chats a folder source no longer lists.

    Kept, and said why: a chat another source lists (it moves to that source), the discussion
    group of a channel that stays, and the legacy group a staying supergroup was upgraded from.
    Imported chats are never considered.

    Raises:
        FailedPrecondition: a folder source could not be resolved; nothing was deleted.
        SyncRunning: a sync is running (only when deleting).
        FloodWait: Telegram asked for a longer wait than the policy sleeps through.
    """
    flood = flood_policy(policy)
    rows = await to_thread(
        lambda: conn.execute(
            "SELECT source_id, kind, target FROM sources WHERE account = ?"
            " AND kind IN ('chat', 'folder') ORDER BY source_id",
            (account,),
        ).fetchall()
    )
    report = PruneSourcesReport(dry_run=dry_run)
    folder_sources = [(str(r[0]), str(r[2])) for r in rows if r[1] == "folder"]
    if not folder_sources:
        return report
    listed_by: dict[int, str] = {
        int(r[2]): str(r[0]) for r in rows if r[1] == "chat" and INT_RE.match(str(r[2]))
    }
    members = await _folder_members(client, flood, folder_sources, listed_by)
    chats = await to_thread(_prune_rows, conn, account)
    removing, kept = _plan_prune(chats, members, listed_by)
    report.removed = [
        {"chat_id": c.chat_id, "title": c.title, "source_id": c.source_id} for c in removing
    ]
    report.kept = [
        {"chat_id": c.chat_id, "title": c.title, "source_id": c.source_id, "reason": why}
        for c, why, _ in kept
    ]
    if dry_run or not (removing or kept):
        return report
    path = lock_path if lock_path is not None else await to_thread(default_lock_path, conn)
    await to_thread(_apply_prune, conn, account, path, removing, kept)
    log.info("pruned %d chats of %s's folder sources", len(removing), account)
    return report


async def _folder_members(
    client: TelegramClientLike,
    flood: FloodPolicy,
    folder_sources: list[tuple[str, str]],
    listed_by: dict[int, str],
) -> dict[str, set[int]]:
    """The chat ids each folder source lists now; ``listed_by`` learns who lists each chat.

    Raises:
        FailedPrecondition: a folder source could not be resolved.
    """
    all_dialogs = await fetch_dialogs(client, flood)
    filters = await flood.call(lambda: get_folders(client))
    by_title = {folder_title(f).casefold(): f for f in filters}
    members: dict[str, set[int]] = {}
    failed = []
    for source_id, target in folder_sources:
        folder = by_title.get(target.removeprefix(FOLDER_PREFIX).casefold())
        if folder is None:
            failed.append(source_id)
            continue
        members[source_id] = {d.id for d in folder_members(folder, all_dialogs)}
        for chat_id in members[source_id]:
            listed_by.setdefault(chat_id, source_id)
    if failed:
        raise FailedPrecondition(
            f"{len(failed)} folder sources could not be resolved ({', '.join(failed)}); "
            "nothing was pruned",
            hint="check that the folder still exists in Telegram, or remove its source",
            metadata={"sources": ",".join(failed)},
        )
    return members


def _prune_rows(conn: db.Connection, account: str) -> list[_Row]:
    return [
        _Row(int(r[0]), str(r[1]), str(r[2]), r[3], r[4])
        for r in conn.execute(
            "SELECT chat_id, title, source_id, linked_chat_id, migrated_to FROM chats"
            " WHERE account = ? AND is_import = 0 AND source_id IS NOT NULL ORDER BY chat_id",
            (account,),
        )
    ]


def _plan_prune(
    chats: list[_Row], members: dict[str, set[int]], listed_by: dict[int, str]
) -> tuple[list[_Row], list[tuple[_Row, str, str | None]]]:
    """Split the chats folders no longer list into ``(removed, kept as (row, why, move to))``."""
    stale = [c for c in chats if c.source_id in members and c.chat_id not in members[c.source_id]]
    kept: list[tuple[_Row, str, str | None]] = []
    removing: dict[int, _Row] = {}
    for chat in stale:
        other = listed_by.get(chat.chat_id)
        if other is not None and other != chat.source_id:
            kept.append((chat, f"listed by {other}", other))
        else:
            removing[chat.chat_id] = chat
    changed = True
    while changed:
        changed = False
        staying = [c for c in chats if c.chat_id not in removing]
        for stay in staying:
            linked = stay.linked_chat_id
            if linked is not None and linked in removing:
                kept.append((removing.pop(linked), f"discussion group of {stay.title!r}", None))
                changed = True
        for chat in list(removing.values()):
            if (
                chat.migrated_to is not None
                and chat.migrated_to not in removing
                and any(s.chat_id == chat.migrated_to for s in staying)
            ):
                kept.append(
                    (removing.pop(chat.chat_id), "history of the supergroup it became", None)
                )
                changed = True
    return list(removing.values()), kept


def _apply_prune(
    conn: db.Connection,
    account: str,
    path: Path | None,
    removing: list[_Row],
    kept: list[tuple[_Row, str, str | None]],
) -> None:
    with sync_lock(path), db.transaction(conn):
        for chat in removing:
            store.delete_chat(conn, account, chat.chat_id)
        for chat, _, move_to in kept:
            if move_to is not None:
                conn.execute(
                    "UPDATE chats SET source_id = ? WHERE account = ? AND chat_id = ?",
                    (move_to, account, chat.chat_id),
                )
