"""The writes of one sync run: its record, each batch, each re-read, comments, chat state.

A batch, its chat's sync state and history range commit in one transaction, so whatever was
committed before a stop is searchable and the next run resumes. Deletions only inside the id
range a re-read covered, and of comments only in a thread the re-read fetched whole.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chatseek_core import db
from chatseek_ingest import store
from chatseek_ingest.model import ExportChat, ExportMessage
from chatseek_ingest.sync.chat import SyncChat
from chatseek_ingest.sync.context import RunContext
from chatseek_ingest.sync.state import count_messages, extend_history_range, remember_chat
from chatseek_ingest.telegram import chat_record

__all__ = [
    "Discussion",
    "Thread",
    "begin_run",
    "commit_batch",
    "commit_reread",
    "end_run",
    "link_discussion",
    "mark_unavailable",
    "migrated_to",
    "resolve_failed",
    "store_comments",
    "store_folder",
    "store_supergroup",
    "stored_threads",
    "unlink",
]

log = logging.getLogger(__name__)

SYNC_RUN_KIND = "sync"

REFUSALS = {
    "ChannelPrivate": "the chat is private now, or this account was removed from it",
    "ChatAdminRequired": "reading it needs admin rights this account does not have",
    "ChatForbidden": "this account can no longer read the chat",
    "UserBannedInChannel": "this account is banned in the chat",
    "UnknownPeer": "this session has never seen the chat (is it in this account's chat list?)",
}


@dataclass
class Discussion:
    """A channel's discussion group, remembered for this run."""

    record: ExportChat


@dataclass
class Thread:
    """The comments fetched for one post; ``whole`` when they are its entire thread."""

    post_id: int
    records: list[ExportMessage]
    whole: bool = False


def begin_run(ctx: RunContext) -> int:
    """Record the start of a run; returns its ``run_id``."""
    with db.transaction(ctx.conn):
        store.ensure_account(ctx.conn, ctx.account)
        cur = ctx.conn.execute(
            "INSERT INTO sync_runs (account, kind, started_at) VALUES (?, ?, ?)",
            (ctx.account, SYNC_RUN_KIND, int(ctx.now())),
        )
        return int(cur.lastrowid or 0)


def end_run(ctx: RunContext, run_id: int, outcome: str) -> None:
    """Record how run ``run_id`` ended, with its report."""
    with db.transaction(ctx.conn):
        ctx.conn.execute(
            "UPDATE sync_runs SET ended_at = ?, outcome = ?, detail = ? WHERE run_id = ?",
            (int(ctx.now()), outcome, json.dumps(ctx.report.to_dict()), run_id),
        )


def resolve_failed(ctx: RunContext, source_id: str, reason: str) -> None:
    """Record (and warn) that a folder source could not be resolved this run."""
    ctx.report.warnings.append(f"source {source_id} could not be resolved: {reason}")
    with db.transaction(ctx.conn):
        ctx.conn.execute(
            "UPDATE sources SET resolve_error = ? WHERE account = ? AND source_id = ?",
            (reason, ctx.account, source_id),
        )


def store_folder(ctx: RunContext, source_id: str, members: Sequence[Any]) -> None:
    """Remember the chats a folder source lists now (imported chats excepted)."""
    with db.transaction(ctx.conn):
        ctx.conn.execute(
            "UPDATE sources SET resolve_error = NULL WHERE account = ? AND source_id = ?",
            (ctx.account, source_id),
        )
        imported = {
            int(r[0])
            for r in ctx.conn.execute(
                "SELECT chat_id FROM chats WHERE account = ? AND is_import = 1",
                (ctx.account,),
            )
        }
        for dialog in members:
            if dialog.id in imported:
                continue
            remember_chat(
                ctx.conn,
                ctx.account,
                chat_record(dialog.entity),
                source_id=source_id,
                access_hash=getattr(dialog.entity, "access_hash", None),
                listed=True,
            )


def commit_batch(
    ctx: RunContext,
    chat: SyncChat,
    record: ExportChat,
    records: list[ExportMessage],
    comments: list[Thread],
    start: int,
    caught_up: bool,
) -> None:
    """Store one batch of a chat with its comments, sync state and history range, at once."""
    account = ctx.account
    with db.transaction(ctx.conn):
        store.upsert_chat(ctx.conn, account, record, source_id=chat.source_id, is_import=False)
        stats = store.store_messages(ctx.conn, account, records)
        store_comments(ctx, chat, comments)
        top = records[-1].msg_id if records else start
        complete = 1 if caught_up else 0
        ctx.conn.execute(
            "UPDATE chats SET last_msg_id = MAX(last_msg_id, ?), last_fetched_at = ?,"
            " history_complete = MAX(history_complete, ?), unavailable = 0,"
            " unavailable_reason = NULL WHERE account = ? AND chat_id = ?",
            (top, int(ctx.now()), complete, account, chat.chat_id),
        )
        for message in records:
            if isinstance(message.service_extra.get("channel_id"), int) and (
                message.service_action == "migrate_to_supergroup"
            ):
                ctx.conn.execute(
                    "UPDATE chats SET migrated_to = ? WHERE account = ? AND chat_id = ?",
                    (message.service_extra["channel_id"], account, chat.chat_id),
                )
        count_messages(ctx.conn, account, chat.chat_id)
        if records:
            first = records[0].msg_id if start == 0 else start + 1
            extend_history_range(ctx.conn, account, chat.chat_id, first, top)
    ctx.report.new += stats.new
    ctx.report.updated += stats.updated
    ctx.current_count += len(records)
    if records:
        ctx.progress(f"{record.title or chat.chat_id}: {ctx.current_count} messages")


def mark_unavailable(ctx: RunContext, chat: SyncChat, reason: str) -> None:
    """Mark a chat Telegram refused (tried again next run) and say why in the report."""
    with db.transaction(ctx.conn):
        ctx.conn.execute(
            "UPDATE chats SET unavailable = 1, unavailable_reason = ?"
            " WHERE account = ? AND chat_id = ?",
            (reason, ctx.account, chat.chat_id),
        )
    ctx.report.unavailable.append({"chat_id": chat.chat_id, "title": chat.title, "reason": reason})
    ctx.report.warnings.append(
        f"account {ctx.account!r}: Telegram refused {chat.title!r} ({chat.chat_id}): "
        f"{REFUSALS.get(reason, reason)}; what was fetched before is stored, and the chat "
        "is tried again next run"
    )
    log.info("chat %d of %s is unavailable: %s", chat.chat_id, ctx.account, reason)


def commit_reread(
    ctx: RunContext,
    chat: SyncChat,
    record: ExportChat,
    records: list[ExportMessage],
    comments: list[Thread],
    low: int,
    top: int,
) -> None:
    """Store a re-read; delete the stored messages in ``[low, top]`` it did not return."""
    account = ctx.account
    returned = {r.msg_id for r in records}
    with db.transaction(ctx.conn):
        store.upsert_chat(ctx.conn, account, record, source_id=chat.source_id, is_import=False)
        stats = store.store_messages(ctx.conn, account, records)
        stored = [
            int(r[0])
            for r in ctx.conn.execute(
                "SELECT msg_id FROM messages WHERE account = ? AND chat_id = ?"
                " AND msg_id BETWEEN ? AND ? AND comment_post_id IS NULL",
                (account, chat.chat_id, low, top),
            )
        ]
        gone = sorted(set(stored) - returned)
        deleted = store.delete_messages(ctx.conn, account, chat.chat_id, gone)
        store_comments(ctx, chat, comments)
        count_messages(ctx.conn, account, chat.chat_id)
    ctx.report.new += stats.new
    ctx.report.updated += stats.updated
    ctx.report.deleted += deleted


def link_discussion(
    ctx: RunContext, chat: SyncChat, group: ExportChat, access_hash: int | None
) -> Discussion | None:
    """Remember a channel's discussion group; None when it is an imported chat."""
    row = ctx.conn.execute(
        "SELECT is_import, source_id FROM chats WHERE account = ? AND chat_id = ?",
        (ctx.account, group.chat_id),
    ).fetchone()
    if row is not None and row[0]:
        ctx.report.warnings.append(
            f"comments of {chat.title!r} were not synced: its discussion group is the "
            f"imported chat of {row[1]}"
        )
        return None
    with db.transaction(ctx.conn):
        remember_chat(
            ctx.conn, ctx.account, group, source_id=chat.source_id, access_hash=access_hash
        )
        ctx.conn.execute(
            "UPDATE chats SET linked_chat_id = ? WHERE account = ? AND chat_id = ?",
            (group.chat_id, ctx.account, chat.chat_id),
        )
    chat.linked_chat_id = group.chat_id
    return Discussion(record=group)


def unlink(ctx: RunContext, chat: SyncChat) -> None:
    """Forget a channel's discussion group (Telegram reports none now)."""
    with db.transaction(ctx.conn):
        ctx.conn.execute(
            "UPDATE chats SET linked_chat_id = NULL WHERE account = ? AND chat_id = ?",
            (ctx.account, chat.chat_id),
        )
    chat.linked_chat_id = None


def stored_threads(ctx: RunContext, group_id: int, channel_id: int) -> dict[int, tuple[int, int]]:
    """Per post of ``channel_id``: its stored comments' count and newest id."""
    rows = ctx.conn.execute(
        "SELECT comment_post_id, COUNT(*), MAX(msg_id) FROM messages WHERE account = ?"
        " AND chat_id = ? AND comment_channel_id = ? GROUP BY comment_post_id",
        (ctx.account, group_id, channel_id),
    ).fetchall()
    return {int(r[0]): (int(r[1]), int(r[2])) for r in rows}


def store_comments(ctx: RunContext, chat: SyncChat, comments: list[Thread]) -> None:
    """Store fetched comments; a thread fetched whole also loses the comments now gone."""
    group_id = chat.linked_chat_id
    if group_id is None or not comments:
        return
    flat = [m for thread in comments for m in thread.records]
    stats = store.store_messages(ctx.conn, ctx.account, flat)
    ctx.conn.executemany(
        "UPDATE messages SET comment_channel_id = ?, comment_post_id = ?"
        " WHERE account = ? AND chat_id = ? AND msg_id = ?",
        [
            (chat.chat_id, thread.post_id, ctx.account, group_id, m.msg_id)
            for thread in comments
            for m in thread.records
        ],
    )
    for thread in comments:
        if not thread.whole:
            continue
        kept = {m.msg_id for m in thread.records}
        stored = [
            int(r[0])
            for r in ctx.conn.execute(
                "SELECT msg_id FROM messages WHERE account = ? AND chat_id = ?"
                " AND comment_channel_id = ? AND comment_post_id = ?",
                (ctx.account, group_id, chat.chat_id, thread.post_id),
            )
        ]
        gone = sorted(set(stored) - kept)
        if gone:
            ctx.report.deleted += store.delete_messages(ctx.conn, ctx.account, group_id, gone)
    count_messages(ctx.conn, ctx.account, group_id)
    ctx.report.new += stats.new
    ctx.report.updated += stats.updated


def migrated_to(ctx: RunContext, chat: SyncChat) -> int | None:
    """The supergroup a legacy group was upgraded to, as stored."""
    row = ctx.conn.execute(
        "SELECT migrated_to FROM chats WHERE account = ? AND chat_id = ?",
        (ctx.account, chat.chat_id),
    ).fetchone()
    return row[0] if row is not None else None


def store_supergroup(ctx: RunContext, chat: SyncChat, entity: Any) -> None:
    """Remember the supergroup a legacy group was upgraded to, under the group's source."""
    with db.transaction(ctx.conn):
        remember_chat(
            ctx.conn,
            ctx.account,
            chat_record(entity),
            source_id=chat.source_id,
            access_hash=getattr(entity, "access_hash", None),
        )
