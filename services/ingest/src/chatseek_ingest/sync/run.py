"""One sync run: every chat of the work list brought up to date, then re-read, in a budget.

Per chat: batches after the stored ``last_msg_id``, oldest first, each committed with its
comments; a chat already complete is then re-read over its newest messages; a legacy group
upgraded to a supergroup is followed. A flood wait too long to wait, or the budget, stops the
run between batches; a chat Telegram refuses is marked unavailable and the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from telethon import errors, utils
from telethon.tl import types

import chatseek_ingest.sync.writes as writes
from chatseek_core import db
from chatseek_core.aio import to_thread
from chatseek_core.errors import FloodWait
from chatseek_ingest.model import ExportChat
from chatseek_ingest.sync.chat import SyncChat, load_chat
from chatseek_ingest.sync.comments import Comments
from chatseek_ingest.sync.context import BudgetSpent, RunContext
from chatseek_ingest.sync.lock import default_lock_path, held_sync_lock
from chatseek_ingest.sync.plan import resolve_sources, work_list
from chatseek_ingest.sync.report import Progress, SyncReport
from chatseek_ingest.sync.state import check_identity
from chatseek_ingest.telegram import (
    FLOOD_SLEEP_THRESHOLD_S,
    TelegramClientLike,
    chat_record,
    input_peer,
    to_records,
    unavailable_reason,
)

__all__ = ["BATCH_SIZE", "REREAD_NEWEST", "sync"]

log = logging.getLogger(__name__)

BATCH_SIZE = 500
REREAD_NEWEST = 200


async def sync(
    conn: db.Connection,
    client: TelegramClientLike,
    account: str,
    *,
    budget_s: float | None = None,
    refresh_only: bool = False,
    chat_ids: Sequence[int] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    now: Callable[[], float] = time.time,
    on_progress: Progress | None = None,
    batch_size: int = BATCH_SIZE,
    reread: int = REREAD_NEWEST,
    flood_threshold_s: float = FLOOD_SLEEP_THRESHOLD_S,
    lock_path: Path | None = None,
    takeout: bool = False,
) -> SyncReport:
    """Fetch what is new in every source chat of ``account``, then re-read the newest.

    Chats go never-synced first, then least recently synced. Per chat: batches of
    ``batch_size`` messages after the stored ``last_msg_id``, oldest first (a first sync starts
    at the beginning of the chat, or at the source's ``since`` day); ``history_complete`` is set
    once everything from there to the newest message is stored. A chat whose history was
    already complete is then re-read over its newest ``reread`` messages: edits and reactions
    update, and stored messages inside the re-read id range that Telegram did not return are
    deleted. Channels of a source with comments also fetch the new comments of each post
    Telegram reports comments on. Chats Telegram refuses are marked unavailable (and tried
    again next run); a legacy group upgraded to a supergroup is followed.

    Args:
        budget_s: seconds the run may take; it stops between batches. ``None``/0 = no limit.
        refresh_only: skip chats whose first sync has not finished (a search's refresh).
        chat_ids: restrict the run to these marked chat ids.
        clock: monotonic seconds, for the budget and flood waits.
        sleep: awaited to sleep through a flood wait.
        now: unix seconds, for ``last_fetched_at`` and the run record.
        on_progress: receives ``(chats done, chats to do, note)`` after every batch.
        batch_size: messages per batch.
        reread: how many of the newest messages a re-read covers.
        flood_threshold_s: longest flood wait slept through; a longer one stops the run.
        lock_path: the lock file; by default ``sync.lock`` beside the database file.
        takeout: fetch through a takeout (data export) session, finished when the run ends
            (successfully unless it raised). When Telegram does not start one (the user has
            not allowed it in the app), the run goes on with ordinary requests and its report
            says ``takeout: "declined"`` with a warning naming the account.

    Raises:
        SyncRunning: another sync or deletion pass is running.
        WrongAccount: the session signs in as another user than the account's.
    """
    path = lock_path if lock_path is not None else await to_thread(default_lock_path, conn)
    async with held_sync_lock(path):
        async with contextlib.AsyncExitStack() as stack:
            used, declined = client, None
            if takeout:
                used, declined = await _enter_takeout(stack, client, account)
            ctx = RunContext(
                conn,
                used,
                account,
                budget_s=budget_s,
                clock=clock,
                sleep=sleep,
                now=now,
                on_progress=on_progress,
                flood_threshold_s=flood_threshold_s,
            )
            if takeout:
                ctx.report.takeout = "declined" if declined else "used"
            if declined is not None:
                ctx.report.warnings.append(declined)
            run = _SyncRun(
                ctx,
                refresh_only=refresh_only,
                chat_ids=chat_ids,
                batch_size=batch_size,
                reread=reread,
            )
            return await run.execute()


async def _enter_takeout(
    stack: contextlib.AsyncExitStack, client: TelegramClientLike, account: str
) -> tuple[TelegramClientLike, str | None]:
    """The takeout client (finished when ``stack`` closes), or ``client`` and why not."""
    try:
        takeout_client = await stack.enter_async_context(
            client.takeout(finalize=True, users=True, chats=True, megagroups=True, channels=True)
        )
    except errors.TakeoutInitDelayError as exc:
        return client, (
            f"account {account!r}: Telegram did not start a data export (takeout) session and "
            f"asks to wait {exc.seconds} s; allow the export request in the Telegram app, then "
            "run `chatseek sync --takeout` again; this run used ordinary requests"
        )
    return takeout_client, None


class _SyncRun:
    """The chat loop of one run over ``ctx``."""

    def __init__(
        self,
        ctx: RunContext,
        *,
        refresh_only: bool,
        chat_ids: Sequence[int] | None,
        batch_size: int,
        reread: int,
    ) -> None:
        self._ctx = ctx
        self._comments = Comments(ctx)
        self.refresh_only = refresh_only
        self.chat_ids = set(chat_ids) if chat_ids else None
        self.batch_size = batch_size
        self.reread = reread
        self.queued: set[int] = set()

    async def execute(self) -> SyncReport:
        run_id = await to_thread(writes.begin_run, self._ctx)
        outcome = "error"
        try:
            await self._run()
            outcome = self._ctx.report.stopped_by or "complete"
        finally:
            await to_thread(writes.end_run, self._ctx, run_id, outcome)
        log.info(
            "sync of %s: %d new, %d updated, %d deleted, %d chats done, %d remaining (%s)",
            self._ctx.account,
            self._ctx.report.new,
            self._ctx.report.updated,
            self._ctx.report.deleted,
            self._ctx.report.chats_done,
            self._ctx.report.chats_remaining,
            outcome,
        )
        return self._ctx.report

    async def _run(self) -> None:
        try:
            me = await self._ctx.policy.call(self._ctx.client.get_me)
            self._ctx.self_id = int(me.id)
            await to_thread(check_identity, self._ctx.conn, self._ctx.account, me)
            listed = await resolve_sources(self._ctx)
        except FloodWait as exc:
            self._stop("flood_wait", exc)
            return
        work, skipped = await to_thread(
            work_list, self._ctx, listed, self.chat_ids, self.refresh_only
        )
        self._ctx.total = len(work)
        self._ctx.report.chats_remaining = skipped
        queue = deque(work)
        self.queued = {c.chat_id for c in work}
        while queue:
            chat = queue.popleft()
            self._ctx.current = chat.title or str(chat.chat_id)
            self._ctx.current_count = 0
            try:
                if self._ctx.over_budget():
                    raise BudgetSpent
                follow = await self._sync_chat(chat)
            except BudgetSpent:
                self._ctx.report.stopped_by = "budget"
                self._ctx.report.chats_remaining += len(queue) + 1
                return
            except FloodWait as exc:
                self._stop("flood_wait", exc, chat)
                self._ctx.report.chats_remaining += len(queue) + 1
                return
            except Exception as exc:
                reason = unavailable_reason(exc)
                if reason is None:
                    raise
                await to_thread(writes.mark_unavailable, self._ctx, chat, reason)
                continue
            self._ctx.report.chats_done += 1
            self._ctx.progress(f"{self._ctx.current}: up to date")
            self._ctx.current = ""
            if follow is not None:
                queue.append(follow)
                self.queued.add(follow.chat_id)
                self._ctx.total += 1

    def _stop(self, reason: str, exc: FloodWait, chat: SyncChat | None = None) -> None:
        report = self._ctx.report
        report.stopped_by = reason
        report.flood_wait_s = float(exc.retry_after_s or 0.0)
        where = f" while fetching {chat.title!r} ({chat.chat_id})" if chat is not None else ""
        report.warnings.append(
            f"account {self._ctx.account!r}: Telegram asked to wait {report.flood_wait_s:.0f} s"
            f"{where}, longer than this run may wait; what was fetched is stored and the next "
            "run continues where this one stopped"
        )

    async def _peer(self, chat: SyncChat) -> Any:
        if chat.type == "saved":
            return input_peer(chat.chat_id, None, is_self=True)
        if chat.access_hash is not None or chat.type == "group":
            return input_peer(chat.chat_id, chat.access_hash)
        for dialog in await self._ctx.load_dialogs():
            if dialog.id == chat.chat_id:
                return dialog.input_entity
        return chat.chat_id

    async def _sync_chat(self, chat: SyncChat) -> SyncChat | None:
        peer = await self._peer(chat)
        record = chat.record()
        self_id = await self._ctx.me_id() if chat.type in ("private", "saved", "bot") else None
        cursor = chat.last_msg_id
        first = True
        while True:
            if not first and self._ctx.over_budget():
                raise BudgetSpent
            first = False
            start = cursor
            offset_date = None
            if cursor == 0 and chat.since:
                offset_date = datetime.fromtimestamp(chat.since, UTC)
            fetched = await self._ctx.fetch(
                peer, self.batch_size, min_id=start, reverse=True, offset_date=offset_date
            )
            messages = fetched.messages
            record = fresh_record(record, messages)
            records = [to_records(m, record, self_id=self_id) for m in messages]
            comments, cut, stop = await self._comments.fetch(chat, peer, messages)
            kept = records[:cut]
            caught_up = (
                fetched.stop is None and cut == len(messages) and len(messages) < self.batch_size
            )
            await to_thread(
                writes.commit_batch, self._ctx, chat, record, kept, comments, start, caught_up
            )
            if kept:
                cursor = kept[-1].msg_id
            if stop is not None:
                raise stop
            if fetched.stop is not None:
                raise fetched.stop
            if caught_up:
                break
        if chat.history_complete:
            await self._reread_chat(chat, record, peer, cursor, self_id)
        return await self._follow_migration(chat)

    async def _reread_chat(
        self, chat: SyncChat, record: ExportChat, peer: Any, top: int, self_id: int | None
    ) -> None:
        """Re-read the newest messages up to ``top``: edits, reactions, deletions in range."""
        if self.reread <= 0 or top <= 0:
            return
        fetched = await self._ctx.fetch(peer, self.reread, max_id=top + 1)
        messages = fetched.messages
        if not messages:
            if fetched.stop is not None:
                raise fetched.stop
            return
        record = fresh_record(record, messages)
        records = [to_records(m, record, self_id=self_id) for m in messages]
        comments, _, stop = await self._comments.fetch(chat, peer, messages, whole=True)
        low = min(m.id for m in messages)
        await to_thread(writes.commit_reread, self._ctx, chat, record, records, comments, low, top)
        if stop is not None:
            raise stop
        if fetched.stop is not None:
            raise fetched.stop

    async def _follow_migration(self, chat: SyncChat) -> SyncChat | None:
        migrated_to = await to_thread(writes.migrated_to, self._ctx, chat)
        if migrated_to is None or migrated_to in self.queued:
            return None
        follow = await to_thread(load_chat, self._ctx, migrated_to)
        if follow is None:
            entity = await self._ctx.policy.call(
                lambda: self._ctx.client.get_entity(
                    types.PeerChannel(utils.resolve_id(migrated_to)[0])
                )
            )
            await to_thread(writes.store_supergroup, self._ctx, chat, entity)
            follow = await to_thread(load_chat, self._ctx, migrated_to)
        if follow is None:
            return None
        self._ctx.report.warnings.append(
            f"{chat.title!r} was upgraded to a supergroup; following it to {follow.chat_id}"
        )
        return follow


def fresh_record(record: ExportChat, messages: Sequence[Any]) -> ExportChat:
    """The chat's record refreshed from the entity Telegram sent with its messages."""
    for message in reversed(messages):
        entity = getattr(message, "chat", None)
        if entity is None or utils.get_peer_id(entity) != record.chat_id:
            continue
        with contextlib.suppress(TypeError):
            fresh = chat_record(entity)
            if record.type == "forum" and fresh.type == "supergroup":
                return record
            return fresh
    return record
