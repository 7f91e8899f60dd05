"""Prune-deleted: ask Telegram about every stored message and drop what it no longer has.

Owns ``prune_deleted`` and the ``chats.prune_cursor`` column. Invariants: messages are checked
oldest first in batches of ``PRUNE_BATCH`` ids (one request each); a batch's deletions and the
advanced cursor commit in one transaction, so a run stopped by its budget or a flood wait keeps
every finished batch and the next run resumes from the cursor; only a message Telegram returns
as missing is deleted (through ``store.delete_messages``), a chat Telegram refuses is left as it
is; a channel is followed to its stored discussion group; imported chats are never touched.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chatseek_core import db
from chatseek_core.aio import to_thread
from chatseek_core.errors import ChatNotFound, FailedPrecondition, FloodWait
from chatseek_ingest import store
from chatseek_ingest.sync import default_lock_path, held_sync_lock
from chatseek_ingest.telegram import (
    FLOOD_SLEEP_THRESHOLD_S,
    FloodPolicy,
    TelegramClientLike,
    input_peer,
    unavailable_reason,
)

__all__ = ["PRUNE_BATCH", "PruneReport", "prune_deleted"]

log = logging.getLogger(__name__)

Progress = Callable[[tuple[int, int, str]], None]
"""Receives ``(chats done, chats to do, note)``."""

PRUNE_BATCH = 100
RUN_KIND = "prune-deleted"


@dataclass
class PruneReport:
    """What one prune-deleted run did (also its JSON document).

    Attributes:
        checked: stored messages Telegram was asked about.
        deleted: of those, the ones it no longer has (now deleted here too).
        chats_done: chats checked to the end (their cursor starts over next time).
        chats_remaining: chats left for a later run.
        flood_wait_s: the wait Telegram asked for when a flood wait stopped the run, else 0.
        stopped_by: ``"budget"`` or ``"flood_wait"`` when the run stopped early, else ``None``.
        warnings: one sentence each (chats Telegram refused, left as they are).
    """

    checked: int = 0
    deleted: int = 0
    chats_done: int = 0
    chats_remaining: int = 0
    flood_wait_s: float = 0.0
    stopped_by: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the report."""
        return asdict(self)


@dataclass(frozen=True)
class _Chat:
    chat_id: int
    title: str
    type: str
    access_hash: int | None


def _chats(conn: db.Connection, account: str, chat_id: int | None) -> list[_Chat]:
    select = "SELECT chat_id, title, type, access_hash, is_import, linked_chat_id FROM chats"
    if chat_id is None:
        rows = conn.execute(
            select + " WHERE account = ? AND is_import = 0 AND message_count > 0"
            " ORDER BY prune_cursor = 0, chat_id",
            (account,),
        ).fetchall()
        return [_Chat(int(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows]
    row = conn.execute(select + " WHERE account = ? AND chat_id = ?", (account, chat_id)).fetchone()
    if row is None:
        raise ChatNotFound(
            f"no stored chat {chat_id}",
            hint="run `chatseek sources ls` to see the stored chats",
            metadata={"chat_id": str(chat_id)},
        )
    if row[4]:
        raise FailedPrecondition(
            f"{row[1]!r} is an imported chat; Telegram cannot be asked about it",
            hint="imported history is kept as the export had it",
            metadata={"chat_id": str(chat_id)},
        )
    out = [_Chat(int(row[0]), str(row[1]), str(row[2]), row[3])]
    if row[5] is not None:
        group = conn.execute(
            select + " WHERE account = ? AND chat_id = ? AND is_import = 0", (account, row[5])
        ).fetchone()
        if group is not None:
            out.append(_Chat(int(group[0]), str(group[1]), str(group[2]), group[3]))
    return out


def _next_ids(conn: db.Connection, account: str, chat_id: int, limit: int) -> list[int]:
    cursor = conn.execute(
        "SELECT prune_cursor FROM chats WHERE account = ? AND chat_id = ?", (account, chat_id)
    ).fetchone()
    start = int(cursor[0]) if cursor is not None else 0
    return [
        int(r[0])
        for r in conn.execute(
            "SELECT msg_id FROM messages WHERE account = ? AND chat_id = ? AND msg_id > ?"
            " ORDER BY msg_id LIMIT ?",
            (account, chat_id, start, limit),
        )
    ]


def _commit(conn: db.Connection, account: str, chat_id: int, gone: list[int], cursor: int) -> int:
    with db.transaction(conn):
        deleted = store.delete_messages(conn, account, chat_id, gone)
        conn.execute(
            "UPDATE chats SET prune_cursor = ?, message_count = (SELECT COUNT(*) FROM messages m"
            "  WHERE m.account = chats.account AND m.chat_id = chats.chat_id"
            "  AND m.kind = 'message') WHERE account = ? AND chat_id = ?",
            (cursor, account, chat_id),
        )
    return deleted


async def _ask(
    policy: FloodPolicy, client: TelegramClientLike, peer: Any, ids: list[int]
) -> list[Any]:
    """One ``get_messages`` request for ``ids`` under the flood policy."""
    return list(await policy.call(lambda: client.get_messages(peer, ids=ids)))


class _BudgetSpent(Exception):
    """The run's budget ran out between two batches."""


async def prune_deleted(
    conn: db.Connection,
    client: TelegramClientLike,
    account: str,
    chat_id: int | None = None,
    *,
    budget_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    on_progress: Progress | None = None,
    batch_size: int = PRUNE_BATCH,
    flood_threshold_s: float = FLOOD_SLEEP_THRESHOLD_S,
    lock_path: Path | None = None,
) -> PruneReport:
    """Delete the stored messages Telegram no longer has, oldest first, resuming per chat.

    Every stored (non-imported) chat is checked, chats with a cursor first; with ``chat_id``
    only that chat and, for a channel, its stored discussion group. A chat checked to its end
    has its cursor reset, so the next run starts it over.

    Args:
        budget_s: seconds the run may take; it stops between batches. ``None``/0 = no limit.
        clock: monotonic seconds, for the budget and flood waits.
        sleep: awaited to sleep through a flood wait.
        on_progress: receives ``(chats done, chats to do, note)`` after every batch.
        batch_size: message ids per request.
        flood_threshold_s: longest flood wait slept through; a longer one stops the run.
        lock_path: the sync lock file; by default ``sync.lock`` beside the database file.

    Raises:
        SyncRunning: a sync or another deletion pass is running.
        ChatNotFound: ``chat_id`` is not stored.
        FailedPrecondition: ``chat_id`` is an imported chat.
    """
    deadline = clock() + budget_s if budget_s and budget_s > 0 else None
    policy = FloodPolicy(threshold_s=flood_threshold_s, sleep=sleep, clock=clock, deadline=deadline)
    report = PruneReport()
    path = lock_path if lock_path is not None else await to_thread(default_lock_path, conn)
    async with held_sync_lock(path):
        chats = await to_thread(_chats, conn, account, chat_id)
        for index, chat in enumerate(chats):
            try:
                await _prune_chat(
                    conn, client, account, chat, policy, report, deadline, clock, batch_size
                )
            except _BudgetSpent:
                report.stopped_by = "budget"
                report.chats_remaining = len(chats) - index
                break
            except FloodWait as exc:
                report.stopped_by = "flood_wait"
                report.flood_wait_s = float(exc.retry_after_s or 0.0)
                report.chats_remaining = len(chats) - index
                report.warnings.append(
                    f"Telegram asked to wait {report.flood_wait_s:.0f} s; the next run "
                    "continues from where this one stopped"
                )
                break
            except Exception as exc:
                reason = unavailable_reason(exc)
                if reason is None:
                    raise
                report.warnings.append(
                    f"{chat.title!r} ({chat.chat_id}) was left as it is: Telegram refused it "
                    f"({reason})"
                )
                continue
            report.chats_done += 1
            if on_progress is not None:
                on_progress((report.chats_done, len(chats), f"{chat.title or chat.chat_id}"))
    log.info(
        "prune-deleted of %s: %d checked, %d deleted, %d chats done, %d remaining",
        account,
        report.checked,
        report.deleted,
        report.chats_done,
        report.chats_remaining,
    )
    return report


async def _prune_chat(
    conn: db.Connection,
    client: TelegramClientLike,
    account: str,
    chat: _Chat,
    policy: FloodPolicy,
    report: PruneReport,
    deadline: float | None,
    clock: Callable[[], float],
    batch_size: int,
) -> None:
    peer = input_peer(chat.chat_id, chat.access_hash, is_self=chat.type == "saved")
    while True:
        ids = await to_thread(_next_ids, conn, account, chat.chat_id, batch_size)
        if not ids:
            await to_thread(_commit, conn, account, chat.chat_id, [], 0)
            return
        if deadline is not None and clock() >= deadline:
            raise _BudgetSpent
        found = await _ask(policy, client, peer, ids)
        gone = [msg_id for msg_id, message in zip(ids, found, strict=True) if message is None]
        report.checked += len(ids)
        report.deleted += await to_thread(_commit, conn, account, chat.chat_id, gone, ids[-1])
