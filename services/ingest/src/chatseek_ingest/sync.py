"""Telegram sync: new messages of every source chat, then a re-read of the newest, in a budget.

Owns ``sync``, the sync lock every Telegram-writing pass takes, the chats' sync-state columns
(``last_msg_id``, ``history_complete``, ``unavailable``, ``migrated_to``, ...) and
``history_ranges``. Invariants: one pass at a time per data dir (an in-process lock plus a
non-blocking ``flock`` on ``<data dir>/sync.lock``; a second is refused with ``SyncRunning``);
a batch, its chat's sync state and history range commit in one transaction, so whatever was
committed before a stop is searchable and the next run resumes; a flood wait in the middle of
a batch resumes after the last message received, and one too long to wait commits what came
before it; deletions only inside the id range a re-read covered, and of comments only in a
thread the re-read fetched whole; imported chats are never fetched; ``refresh_only`` never
runs a chat's first sync.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from telethon import errors, utils
from telethon.tl import types

from chatseek_core import db
from chatseek_core.aio import to_thread
from chatseek_core.errors import FloodWait, SyncRunning, WrongAccount
from chatseek_ingest import store
from chatseek_ingest.model import ExportChat, ExportMessage
from chatseek_ingest.telegram import (
    FLOOD_SLEEP_THRESHOLD_S,
    Fetched,
    FloodPolicy,
    TelegramClientLike,
    chat_record,
    collect,
    fetch_messages,
    folder_title,
    get_folders,
    get_linked_chat,
    input_peer,
    to_records,
    unavailable_reason,
)

__all__ = [
    "BATCH_SIZE",
    "LOCK_FILE",
    "REREAD_NEWEST",
    "REREAD_THREADS",
    "Progress",
    "SyncProgress",
    "SyncReport",
    "check_identity",
    "default_lock_path",
    "extend_history_range",
    "folder_members",
    "remember_chat",
    "sync",
    "held_sync_lock",
    "sync_lock",
]

log = logging.getLogger(__name__)

BATCH_SIZE = 500
REREAD_NEWEST = 200
# A re-read fetches whole comment threads of at most this many of its newest posts with
# comments: one request each, every run.
REREAD_THREADS = 20
LOCK_FILE = "sync.lock"
LOCK_FILE_MODE = 0o600
SYNC_RUN_KIND = "sync"


@dataclass(frozen=True)
class SyncProgress:
    """One progress event of a sync; nothing in it quotes message text.

    Attributes:
        chats_done: chats brought up to date so far; ``chats_total``: chats in this run.
        note: one short line for a log.
        chat: the title of the chat being fetched now ("" between chats).
        chat_messages: messages of that chat stored so far in this run.
        messages: messages (and comments) stored so far in this run, for a rate.
        wait_s: a flood wait being slept through now, in seconds from this event; 0 when none.
        account: the account being synced.
    """

    chats_done: int
    chats_total: int
    note: str
    chat: str = ""
    chat_messages: int = 0
    messages: int = 0
    wait_s: float = 0.0
    account: str = ""


Progress = Callable[[SyncProgress], None]
"""Receives a ``SyncProgress`` after every committed batch and around every flood wait."""

_PROCESS_LOCKS: dict[str, threading.Lock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


# --- the lock ---


def default_lock_path(conn: db.Connection) -> Path | None:
    """``<directory of the main database file>/sync.lock``; ``None`` for an in-memory one."""
    for row in conn.execute("PRAGMA database_list"):
        if row[1] == "main":
            return Path(row[2]).parent / LOCK_FILE if row[2] else None
    return None


@contextlib.contextmanager
def sync_lock(path: Path | None) -> Iterator[None]:
    """Hold the sync lock for the block (an in-process lock, then ``flock`` on ``path``).

    Raises:
        SyncRunning: another sync or deletion pass holds it, in this process or another.
    """
    key = str(path.resolve()) if path is not None else ":memory:"
    with _PROCESS_LOCKS_GUARD:
        lock = _PROCESS_LOCKS.setdefault(key, threading.Lock())
    if not lock.acquire(blocking=False):
        raise _running()
    fd: int | None = None
    try:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, LOCK_FILE_MODE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise _running() from None
        yield
    finally:
        if fd is not None:
            os.close(fd)
        lock.release()


@contextlib.asynccontextmanager
async def held_sync_lock(path: Path | None) -> AsyncIterator[None]:
    """``sync_lock`` for a pass on the event loop: taken and released in a thread.

    Raises:
        SyncRunning: another sync or deletion pass holds it, in this process or another.
    """
    stack = contextlib.ExitStack()
    await to_thread(stack.enter_context, sync_lock(path))
    try:
        yield
    finally:
        await to_thread(stack.close)


def _running() -> SyncRunning:
    return SyncRunning(
        "another sync is running",
        hint="wait for it to finish (or let it run out its budget), then try again",
    )


# --- shared chat-state writes ---


def remember_chat(
    conn: db.Connection,
    account: str,
    record: ExportChat,
    *,
    source_id: str | None,
    access_hash: int | None,
    listed: bool = False,
) -> None:
    """Upsert a Telegram chat and its access hash (inside the caller's transaction).

    A chat keeps the source it came in through, except that a source listing it (``listed``)
    takes over a discussion group that came in only through its channel's source.
    """
    store.upsert_chat(conn, account, record, source_id=source_id, is_import=False)
    if access_hash is not None:
        conn.execute(
            "UPDATE chats SET access_hash = ? WHERE account = ? AND chat_id = ?",
            (access_hash, account, record.chat_id),
        )
    if listed and source_id is not None:
        conn.execute(
            "UPDATE chats SET source_id = ? WHERE account = ? AND chat_id = ? AND is_import = 0"
            " AND source_id IS NOT ? AND EXISTS (SELECT 1 FROM chats channel"
            "  WHERE channel.account = chats.account AND channel.linked_chat_id = chats.chat_id"
            "  AND channel.source_id = chats.source_id)",
            (source_id, account, record.chat_id, source_id),
        )


def extend_history_range(
    conn: db.Connection, account: str, chat_id: int, first: int, last: int
) -> None:
    """Record that every message of ``[first, last]`` is stored, merging touching ranges."""
    rows = conn.execute(
        "SELECT first_msg_id, last_msg_id FROM history_ranges WHERE account = ? AND chat_id = ?"
        " AND last_msg_id >= ? AND first_msg_id <= ?",
        (account, chat_id, first - 1, last + 1),
    ).fetchall()
    low = min([first, *(r[0] for r in rows)])
    high = max([last, *(r[1] for r in rows)])
    conn.executemany(
        "DELETE FROM history_ranges WHERE account = ? AND chat_id = ? AND first_msg_id = ?",
        [(account, chat_id, r[0]) for r in rows],
    )
    conn.execute(
        "INSERT INTO history_ranges (account, chat_id, first_msg_id, last_msg_id)"
        " VALUES (?, ?, ?, ?)",
        (account, chat_id, low, high),
    )


def _count_messages(conn: db.Connection, account: str, chat_id: int) -> None:
    conn.execute(
        "UPDATE chats SET message_count = (SELECT COUNT(*) FROM messages m"
        " WHERE m.account = chats.account AND m.chat_id = chats.chat_id AND m.kind = 'message')"
        " WHERE account = ? AND chat_id = ?",
        (account, chat_id),
    )


def folder_members(folder: Any, dialogs: Sequence[Any]) -> list[Any]:
    """The dialogs a folder lists now: its explicit chats plus those its flags include.

    Exclusions apply to both; ``exclude_archived`` / ``exclude_muted`` only to flag matches,
    as Telegram does; ``exclude_read`` is ignored (it changes with every read).
    """
    by_id = {d.id: d for d in dialogs}
    me = next((d.id for d in dialogs if getattr(d.entity, "is_self", False)), None)

    def ids(peers: Sequence[Any] | None) -> set[int]:
        out = set()
        for peer in peers or []:
            if isinstance(peer, types.InputPeerSelf):
                if me is not None:
                    out.add(me)
                continue
            with contextlib.suppress(TypeError):
                out.add(utils.get_peer_id(peer))
        return out

    explicit = ids(getattr(folder, "pinned_peers", None)) | ids(folder.include_peers)
    excluded = ids(getattr(folder, "exclude_peers", None))
    members = [by_id[i] for i in explicit if i in by_id and i not in excluded]
    chosen = {d.id for d in members}
    for dialog in dialogs:
        if dialog.id in chosen or dialog.id in excluded or not _flag_match(folder, dialog):
            continue
        if getattr(folder, "exclude_archived", False) and dialog.archived:
            continue
        if getattr(folder, "exclude_muted", False) and _muted(dialog):
            continue
        members.append(dialog)
        chosen.add(dialog.id)
    return members


def _flag_match(folder: Any, dialog: Any) -> bool:
    entity = dialog.entity
    if isinstance(entity, types.User):
        if entity.bot:
            return bool(getattr(folder, "bots", False))
        if entity.contact:
            return bool(getattr(folder, "contacts", False))
        return bool(getattr(folder, "non_contacts", False)) and not entity.is_self
    if isinstance(entity, types.Channel) and entity.broadcast:
        return bool(getattr(folder, "broadcasts", False))
    return bool(getattr(folder, "groups", False))


def _muted(dialog: Any) -> bool:
    settings = getattr(dialog.dialog, "notify_settings", None)
    until = getattr(settings, "mute_until", None)
    return until is not None and until > datetime.now(UTC)


def check_identity(conn: db.Connection, account: str, me: Any) -> None:
    """Make sure the session of ``account`` signs in as that account's Telegram user.

    The first signed-in pass records the user (id and name) on the account; every later one
    must sign in as the same user, and no two accounts may share one.

    Raises:
        WrongAccount: the session belongs to another user than the one recorded, or to the
            user of another account (a session file copied or put under the wrong name).
    """
    user_id = int(me.id)
    name = utils.get_display_name(me) or str(user_id)
    hint = (
        f"sign in again with `chatseek auth --account {account}`, or put that account's own "
        "session file in place"
    )
    with db.transaction(conn):
        store.ensure_account(conn, account)
        row = conn.execute(
            "SELECT user_id, display_name FROM accounts WHERE account = ?", (account,)
        ).fetchone()
        if row[0] is not None and int(row[0]) != user_id:
            raise WrongAccount(
                f"the session file of account {account!r} signs in as Telegram user {user_id} "
                f"({name}), but account {account!r} is user {row[0]} ({row[1] or '?'})",
                hint=hint,
                metadata={"account": account, "user_id": str(user_id)},
            )
        other = conn.execute(
            "SELECT account FROM accounts WHERE user_id = ? AND account != ?", (user_id, account)
        ).fetchone()
        if other is not None:
            raise WrongAccount(
                f"the session file of account {account!r} signs in as Telegram user {user_id} "
                f"({name}), who is account {other[0]!r}",
                hint=hint,
                metadata={"account": account, "user_id": str(user_id)},
            )
        conn.execute(
            "UPDATE accounts SET user_id = ?, display_name = ? WHERE account = ?",
            (user_id, name, account),
        )


# --- the report ---


@dataclass
class SyncReport:
    """What one sync did (also its JSON document).

    Attributes:
        new: messages (and comments) stored for the first time.
        updated: stored messages whose content changed (edits, reactions).
        deleted: stored messages a re-read showed to be gone.
        chats_done: chats fetched up to date (and re-read) in this run.
        chats_remaining: chats left for a later run (stopped before, or skipped by a refresh).
        unavailable: ``{chat_id, title, reason}`` of each chat Telegram refused this run.
        flood_wait_s: the wait Telegram asked for when a flood wait stopped the run, else 0.
        stopped_by: ``"budget"`` or ``"flood_wait"`` when the run stopped early, else ``None``.
        takeout: ``"used"`` when the run fetched through a takeout session, ``"declined"`` when
            one was asked for and Telegram did not start it (the run went on without), else
            ``None``.
        warnings: one sentence each, never message text.
    """

    new: int = 0
    updated: int = 0
    deleted: int = 0
    chats_done: int = 0
    chats_remaining: int = 0
    unavailable: list[dict[str, Any]] = field(default_factory=list)
    flood_wait_s: float = 0.0
    stopped_by: str | None = None
    takeout: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the report."""
        return asdict(self)


# --- the run ---


@dataclass
class _Chat:
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


@dataclass
class _Discussion:
    record: ExportChat


@dataclass
class _Thread:
    """The comments fetched for one post; ``whole`` when they are its entire thread."""

    post_id: int
    records: list[ExportMessage]
    whole: bool = False


_REFUSALS = {
    "ChannelPrivate": "the chat is private now, or this account was removed from it",
    "ChatAdminRequired": "reading it needs admin rights this account does not have",
    "ChatForbidden": "this account can no longer read the chat",
    "UserBannedInChannel": "this account is banned in the chat",
    "UnknownPeer": "this session has never seen the chat (is it in this account's chat list?)",
}


class _BudgetSpent(Exception):
    """The run's budget ran out between two batches."""


_CHAT_SQL = (
    "SELECT c.chat_id, c.type, c.title, c.username, c.access_hash, c.source_id,"
    " c.history_complete, c.last_msg_id, c.migrated_to, c.linked_chat_id, s.since, s.comments,"
    " c.last_fetched_at"
    " FROM chats c JOIN sources s ON s.account = c.account AND s.source_id = c.source_id"
    " WHERE c.account = ? AND c.is_import = 0 AND s.kind IN ('chat', 'folder')"
)


def _chat(row: Any) -> _Chat:
    return _Chat(
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


class _SyncRun:
    def __init__(
        self,
        conn: db.Connection,
        client: TelegramClientLike,
        account: str,
        *,
        budget_s: float | None,
        refresh_only: bool,
        chat_ids: Sequence[int] | None,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
        now: Callable[[], float],
        on_progress: Progress | None,
        batch_size: int,
        reread: int,
        flood_threshold_s: float,
    ) -> None:
        self.conn = conn
        self.client = client
        self.account = account
        self.refresh_only = refresh_only
        self.chat_ids = set(chat_ids) if chat_ids else None
        self.clock = clock
        self.now = now
        self.on_progress = on_progress
        self.batch_size = batch_size
        self.reread = reread
        self.deadline = clock() + budget_s if budget_s and budget_s > 0 else None
        self.policy = FloodPolicy(
            threshold_s=flood_threshold_s,
            sleep=sleep,
            clock=clock,
            deadline=self.deadline,
            on_wait=self._waiting,
        )
        self.report = SyncReport()
        self.current = ""
        self.current_count = 0
        self.total = 0
        self.dialogs: list[Any] | None = None
        self.self_id: int | None = None
        self.discussions: dict[int, _Discussion | None] = {}
        self.queued: set[int] = set()

    # --- bookkeeping ---

    def _over_budget(self) -> bool:
        return self.deadline is not None and self.clock() >= self.deadline

    def _progress(self, note: str, *, wait_s: float = 0.0) -> None:
        if self.on_progress is not None:
            self.on_progress(
                SyncProgress(
                    chats_done=self.report.chats_done,
                    chats_total=self.total,
                    note=note,
                    chat=self.current,
                    chat_messages=self.current_count,
                    messages=self.report.new,
                    wait_s=wait_s,
                    account=self.account,
                )
            )

    def _waiting(self, seconds: float) -> None:
        where = f" ({self.current})" if self.current else ""
        if seconds > 0:
            self._progress(f"Telegram asked to wait {seconds:.0f} s{where}", wait_s=seconds)
        else:
            self._progress(f"flood wait over{where}")

    def _begin(self) -> int:
        with db.transaction(self.conn):
            store.ensure_account(self.conn, self.account)
            cur = self.conn.execute(
                "INSERT INTO sync_runs (account, kind, started_at) VALUES (?, ?, ?)",
                (self.account, SYNC_RUN_KIND, int(self.now())),
            )
            return int(cur.lastrowid or 0)

    def _end(self, run_id: int, outcome: str) -> None:
        with db.transaction(self.conn):
            self.conn.execute(
                "UPDATE sync_runs SET ended_at = ?, outcome = ?, detail = ? WHERE run_id = ?",
                (int(self.now()), outcome, json.dumps(self.report.to_dict()), run_id),
            )

    async def execute(self) -> SyncReport:
        run_id = await to_thread(self._begin)
        outcome = "error"
        try:
            await self._run()
            outcome = self.report.stopped_by or "complete"
        finally:
            await to_thread(self._end, run_id, outcome)
        log.info(
            "sync of %s: %d new, %d updated, %d deleted, %d chats done, %d remaining (%s)",
            self.account,
            self.report.new,
            self.report.updated,
            self.report.deleted,
            self.report.chats_done,
            self.report.chats_remaining,
            outcome,
        )
        return self.report

    async def _run(self) -> None:
        try:
            me = await self.policy.call(self.client.get_me)
            self.self_id = int(me.id)
            await to_thread(check_identity, self.conn, self.account, me)
            listed = await self._resolve_sources()
        except FloodWait as exc:
            self._stop("flood_wait", exc)
            return
        work, skipped = await to_thread(self._work_list, listed)
        self.total = len(work)
        self.report.chats_remaining = skipped
        queue = deque(work)
        self.queued = {c.chat_id for c in work}
        while queue:
            chat = queue.popleft()
            self.current = chat.title or str(chat.chat_id)
            self.current_count = 0
            try:
                if self._over_budget():
                    raise _BudgetSpent
                follow = await self._sync_chat(chat)
            except _BudgetSpent:
                self.report.stopped_by = "budget"
                self.report.chats_remaining += len(queue) + 1
                return
            except FloodWait as exc:
                self._stop("flood_wait", exc, chat)
                self.report.chats_remaining += len(queue) + 1
                return
            except Exception as exc:
                reason = unavailable_reason(exc)
                if reason is None:
                    raise
                await to_thread(self._mark_unavailable, chat, reason)
                continue
            self.report.chats_done += 1
            self._progress(f"{self.current}: up to date")
            self.current = ""
            if follow is not None:
                queue.append(follow)
                self.queued.add(follow.chat_id)
                self.total += 1

    def _stop(self, reason: str, exc: FloodWait, chat: _Chat | None = None) -> None:
        self.report.stopped_by = reason
        self.report.flood_wait_s = float(exc.retry_after_s or 0.0)
        where = f" while fetching {chat.title!r} ({chat.chat_id})" if chat is not None else ""
        self.report.warnings.append(
            f"account {self.account!r}: Telegram asked to wait {self.report.flood_wait_s:.0f} s"
            f"{where}, longer than this run may wait; what was fetched is stored and the next "
            "run continues where this one stopped"
        )

    # --- sources and the work list ---

    async def _load_dialogs(self) -> list[Any]:
        if self.dialogs is None:
            self.dialogs = await self.policy.call(lambda: collect(self.client.iter_dialogs()))
        return self.dialogs

    async def _resolve_sources(self) -> dict[str, set[int] | None]:
        """Re-resolve folder sources (folders change); returns the chat ids each source lists.

        ``None`` for a folder that could not be resolved this run: its stored chats are synced
        as they are, and the source records why.
        """
        rows = await to_thread(
            lambda: self.conn.execute(
                "SELECT source_id, kind, target FROM sources WHERE account = ?"
                " AND kind IN ('chat', 'folder') ORDER BY source_id",
                (self.account,),
            ).fetchall()
        )
        listed: dict[str, set[int] | None] = {}
        folders = []
        for source_id, kind, target in rows:
            if kind == "chat":
                listed[source_id] = {int(target)} if _is_int(target) else None
            else:
                folders.append((source_id, str(target)))
        if not folders:
            return listed
        dialogs = await self._load_dialogs()
        filters = await self.policy.call(lambda: get_folders(self.client))
        by_title = {folder_title(f).casefold(): f for f in filters}
        for source_id, target in folders:
            name = target.removeprefix("folder:")
            folder = by_title.get(name.casefold())
            if folder is None:
                listed[source_id] = None
                await to_thread(self._resolve_failed, source_id, f"no folder named {name!r}")
                continue
            members = folder_members(folder, dialogs)
            listed[source_id] = {d.id for d in members}
            await to_thread(self._store_folder, source_id, members)
        return listed

    def _resolve_failed(self, source_id: str, reason: str) -> None:
        self.report.warnings.append(f"source {source_id} could not be resolved: {reason}")
        with db.transaction(self.conn):
            self.conn.execute(
                "UPDATE sources SET resolve_error = ? WHERE account = ? AND source_id = ?",
                (reason, self.account, source_id),
            )

    def _store_folder(self, source_id: str, members: Sequence[Any]) -> None:
        with db.transaction(self.conn):
            self.conn.execute(
                "UPDATE sources SET resolve_error = NULL WHERE account = ? AND source_id = ?",
                (self.account, source_id),
            )
            imported = {
                int(r[0])
                for r in self.conn.execute(
                    "SELECT chat_id FROM chats WHERE account = ? AND is_import = 1",
                    (self.account,),
                )
            }
            for dialog in members:
                if dialog.id in imported:
                    continue
                remember_chat(
                    self.conn,
                    self.account,
                    chat_record(dialog.entity),
                    source_id=source_id,
                    access_hash=getattr(dialog.entity, "access_hash", None),
                    listed=True,
                )

    def _work_list(self, listed: dict[str, set[int] | None]) -> tuple[list[_Chat], int]:
        rows = self.conn.execute(
            _CHAT_SQL + " ORDER BY c.last_fetched_at IS NOT NULL, c.last_fetched_at, c.chat_id",
            (self.account,),
        ).fetchall()
        chats = [_chat(r) for r in rows]
        discussion = {c.linked_chat_id for c in chats if c.linked_chat_id is not None}
        by_id = {c.chat_id: c for c in chats}
        everywhere = set().union(*(ids for ids in listed.values() if ids is not None))
        wanted: set[int] = set()
        for chat in chats:
            unknown = chat.source_id in listed and listed[chat.source_id] is None
            if chat.chat_id in everywhere or (unknown and chat.chat_id not in discussion):
                wanted.add(chat.chat_id)
        frontier = list(wanted)
        while frontier:
            target = by_id[frontier.pop()].migrated_to
            if target is not None and target in by_id and target not in wanted:
                wanted.add(target)
                frontier.append(target)
        work = []
        skipped = 0
        for chat in chats:
            if chat.chat_id not in wanted:
                continue
            if self.chat_ids is not None and chat.chat_id not in self.chat_ids:
                continue
            if chat.migrated_to is not None and chat.history_complete:
                continue
            if self.refresh_only and not chat.history_complete:
                skipped += 1
                continue
            work.append(chat)
        if skipped:
            self.report.warnings.append(
                f"{skipped} chats have not finished their first sync; run a full sync for them"
            )
        if self.chat_ids is not None:
            missing = self.chat_ids - {c.chat_id for c in chats if c.chat_id in wanted}
            for chat_id in sorted(missing):
                self.report.warnings.append(f"chat {chat_id} is not a chat of any synced source")
        return work, skipped

    def _load_chat(self, chat_id: int) -> _Chat | None:
        row = self.conn.execute(_CHAT_SQL + " AND c.chat_id = ?", (self.account, chat_id))
        found = row.fetchone()
        return _chat(found) if found is not None else None

    # --- one chat ---

    async def _peer(self, chat: _Chat) -> Any:
        if chat.type == "saved":
            return input_peer(chat.chat_id, None, is_self=True)
        if chat.access_hash is not None or chat.type == "group":
            return input_peer(chat.chat_id, chat.access_hash)
        for dialog in await self._load_dialogs():
            if dialog.id == chat.chat_id:
                return dialog.input_entity
        return chat.chat_id

    async def _fetch(
        self, peer: Any, limit: int | None, *, reverse: bool = False, **kwargs: Any
    ) -> Fetched:
        """One resumable ``iter_messages`` (see ``fetch_messages``) under the flood policy."""
        return await fetch_messages(
            self.client, self.policy, peer, limit, reverse=reverse, **kwargs
        )

    async def _self_id(self) -> int:
        if self.self_id is None:
            me = await self.policy.call(self.client.get_me)
            self.self_id = int(me.id)
        return self.self_id

    async def _sync_chat(self, chat: _Chat) -> _Chat | None:
        peer = await self._peer(chat)
        record = chat.record()
        self_id = await self._self_id() if chat.type in ("private", "saved", "bot") else None
        cursor = chat.last_msg_id
        first = True
        while True:
            if not first and self._over_budget():
                raise _BudgetSpent
            first = False
            start = cursor
            offset_date = None
            if cursor == 0 and chat.since:
                offset_date = datetime.fromtimestamp(chat.since, UTC)
            fetched = await self._fetch(
                peer, self.batch_size, min_id=start, reverse=True, offset_date=offset_date
            )
            messages = fetched.messages
            record = _fresh_record(record, messages)
            records = [to_records(m, record, self_id=self_id) for m in messages]
            comments, cut, stop = await self._batch_comments(chat, peer, messages)
            kept = records[:cut]
            caught_up = (
                fetched.stop is None and cut == len(messages) and len(messages) < self.batch_size
            )
            await to_thread(self._commit_batch, chat, record, kept, comments, start, caught_up)
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

    def _commit_batch(
        self,
        chat: _Chat,
        record: ExportChat,
        records: list[ExportMessage],
        comments: list[_Thread],
        start: int,
        caught_up: bool,
    ) -> None:
        account = self.account
        with db.transaction(self.conn):
            store.upsert_chat(self.conn, account, record, source_id=chat.source_id, is_import=False)
            stats = store.store_messages(self.conn, account, records)
            self._store_comments(chat, comments)
            top = records[-1].msg_id if records else start
            complete = 1 if caught_up else 0
            self.conn.execute(
                "UPDATE chats SET last_msg_id = MAX(last_msg_id, ?), last_fetched_at = ?,"
                " history_complete = MAX(history_complete, ?), unavailable = 0,"
                " unavailable_reason = NULL WHERE account = ? AND chat_id = ?",
                (top, int(self.now()), complete, account, chat.chat_id),
            )
            for message in records:
                if isinstance(message.service_extra.get("channel_id"), int) and (
                    message.service_action == "migrate_to_supergroup"
                ):
                    self.conn.execute(
                        "UPDATE chats SET migrated_to = ? WHERE account = ? AND chat_id = ?",
                        (message.service_extra["channel_id"], account, chat.chat_id),
                    )
            _count_messages(self.conn, account, chat.chat_id)
            if records:
                first = records[0].msg_id if start == 0 else start + 1
                extend_history_range(self.conn, account, chat.chat_id, first, top)
        self.report.new += stats.new
        self.report.updated += stats.updated
        self.current_count += len(records)
        if records:
            self._progress(f"{record.title or chat.chat_id}: {self.current_count} messages")

    def _mark_unavailable(self, chat: _Chat, reason: str) -> None:
        with db.transaction(self.conn):
            self.conn.execute(
                "UPDATE chats SET unavailable = 1, unavailable_reason = ?"
                " WHERE account = ? AND chat_id = ?",
                (reason, self.account, chat.chat_id),
            )
        self.report.unavailable.append(
            {"chat_id": chat.chat_id, "title": chat.title, "reason": reason}
        )
        self.report.warnings.append(
            f"account {self.account!r}: Telegram refused {chat.title!r} ({chat.chat_id}): "
            f"{_REFUSALS.get(reason, reason)}; what was fetched before is stored, and the chat "
            "is tried again next run"
        )
        log.info("chat %d of %s is unavailable: %s", chat.chat_id, self.account, reason)

    # --- re-read ---

    async def _reread_chat(
        self, chat: _Chat, record: ExportChat, peer: Any, top: int, self_id: int | None
    ) -> None:
        """Re-read the newest messages up to ``top``: edits, reactions, deletions in range."""
        if self.reread <= 0 or top <= 0:
            return
        fetched = await self._fetch(peer, self.reread, max_id=top + 1)
        messages = fetched.messages
        if not messages:
            if fetched.stop is not None:
                raise fetched.stop
            return
        record = _fresh_record(record, messages)
        records = [to_records(m, record, self_id=self_id) for m in messages]
        comments, _, stop = await self._batch_comments(chat, peer, messages, whole=True)
        low = min(m.id for m in messages)
        await to_thread(self._commit_reread, chat, record, records, comments, low, top)
        if stop is not None:
            raise stop
        if fetched.stop is not None:
            raise fetched.stop

    def _commit_reread(
        self,
        chat: _Chat,
        record: ExportChat,
        records: list[ExportMessage],
        comments: list[_Thread],
        low: int,
        top: int,
    ) -> None:
        account = self.account
        returned = {r.msg_id for r in records}
        with db.transaction(self.conn):
            store.upsert_chat(self.conn, account, record, source_id=chat.source_id, is_import=False)
            stats = store.store_messages(self.conn, account, records)
            stored = [
                int(r[0])
                for r in self.conn.execute(
                    "SELECT msg_id FROM messages WHERE account = ? AND chat_id = ?"
                    " AND msg_id BETWEEN ? AND ? AND comment_post_id IS NULL",
                    (account, chat.chat_id, low, top),
                )
            ]
            gone = sorted(set(stored) - returned)
            deleted = store.delete_messages(self.conn, account, chat.chat_id, gone)
            self._store_comments(chat, comments)
            _count_messages(self.conn, account, chat.chat_id)
        self.report.new += stats.new
        self.report.updated += stats.updated
        self.report.deleted += deleted

    # --- comments ---

    async def _discussion(self, chat: _Chat, peer: Any) -> _Discussion | None:
        if chat.chat_id in self.discussions:
            return self.discussions[chat.chat_id]
        found: _Discussion | None = None
        try:
            linked = await self.policy.call(lambda: get_linked_chat(self.client, peer))
        except Exception as exc:
            reason = unavailable_reason(exc)
            if reason is None:
                raise
            linked = None
            self.report.warnings.append(
                f"the discussion group of {chat.title!r} could not be read ({reason}); "
                "its comments were skipped"
            )
        if isinstance(linked, types.Channel):
            group = chat_record(linked)
            found = await to_thread(self._link_discussion, chat, group, linked.access_hash)
        elif linked is not None:
            self.report.warnings.append(
                f"the discussion group of {chat.title!r} cannot be opened by this account; "
                "its comments were skipped"
            )
        elif chat.linked_chat_id is not None:
            await to_thread(self._unlink, chat)
        self.discussions[chat.chat_id] = found
        return found

    def _link_discussion(
        self, chat: _Chat, group: ExportChat, access_hash: int | None
    ) -> _Discussion | None:
        row = self.conn.execute(
            "SELECT is_import, source_id FROM chats WHERE account = ? AND chat_id = ?",
            (self.account, group.chat_id),
        ).fetchone()
        if row is not None and row[0]:
            self.report.warnings.append(
                f"comments of {chat.title!r} were not synced: its discussion group is the "
                f"imported chat of {row[1]}"
            )
            return None
        with db.transaction(self.conn):
            remember_chat(
                self.conn, self.account, group, source_id=chat.source_id, access_hash=access_hash
            )
            self.conn.execute(
                "UPDATE chats SET linked_chat_id = ? WHERE account = ? AND chat_id = ?",
                (group.chat_id, self.account, chat.chat_id),
            )
        chat.linked_chat_id = group.chat_id
        return _Discussion(record=group)

    def _unlink(self, chat: _Chat) -> None:
        with db.transaction(self.conn):
            self.conn.execute(
                "UPDATE chats SET linked_chat_id = NULL WHERE account = ? AND chat_id = ?",
                (self.account, chat.chat_id),
            )
        chat.linked_chat_id = None

    def _stored_threads(self, group_id: int, channel_id: int) -> dict[int, tuple[int, int]]:
        rows = self.conn.execute(
            "SELECT comment_post_id, COUNT(*), MAX(msg_id) FROM messages WHERE account = ?"
            " AND chat_id = ? AND comment_channel_id = ? GROUP BY comment_post_id",
            (self.account, group_id, channel_id),
        ).fetchall()
        return {int(r[0]): (int(r[1]), int(r[2])) for r in rows}

    async def _batch_comments(
        self, chat: _Chat, peer: Any, messages: Sequence[Any], *, whole: bool = False
    ) -> tuple[list[_Thread], int, BaseException | None]:
        """Fetch the comments of ``messages`` (posts) that Telegram reports comments on.

        By default only the comments after the newest stored one, and only of threads whose
        reply count grew; with ``whole`` (a re-read) every thread of the posts that have or
        had comments, whole, so that edits and deletions in them are seen.

        Returns the comments per post, how many of ``messages`` may be committed (every one
        whose thread was fetched), and the stop (budget, flood wait, refusal) that cut it short.
        """
        if not chat.comments or chat.type != "channel":
            return [], len(messages), None
        candidates = [
            (i, m)
            for i, m in enumerate(messages)
            if isinstance(m, types.Message) and m.replies is not None and m.replies.comments
        ]
        if whole:
            candidates = candidates[:REREAD_THREADS]
        if not candidates:
            return [], len(messages), None
        disc = await self._discussion(chat, peer)
        if disc is None:
            return [], len(messages), None
        stored = await to_thread(self._stored_threads, disc.record.chat_id, chat.chat_id)
        out: list[_Thread] = []
        fetched = 0
        for index, post in candidates:
            count, newest = stored.get(post.id, (0, 0))
            if whole:
                if post.replies.replies <= 0 and count == 0:
                    continue
                newest = 0
            elif post.replies.replies <= count:
                continue
            if fetched and self._over_budget():
                return out, index, _BudgetSpent()
            thread = await self._fetch(peer, None, reverse=True, reply_to=post.id, min_id=newest)
            fetched += 1
            group_id = disc.record.chat_id
            records = [
                to_records(m, disc.record)
                for m in thread.messages
                if utils.get_peer_id(m.peer_id) == group_id
            ]
            out.append(_Thread(post.id, records, whole=whole and thread.stop is None))
            if thread.stop is not None:
                return out, index, thread.stop
        return out, len(messages), None

    def _store_comments(self, chat: _Chat, comments: list[_Thread]) -> None:
        """Store fetched comments; a thread fetched whole also loses the comments now gone."""
        group_id = chat.linked_chat_id
        if group_id is None or not comments:
            return
        flat = [m for thread in comments for m in thread.records]
        stats = store.store_messages(self.conn, self.account, flat)
        self.conn.executemany(
            "UPDATE messages SET comment_channel_id = ?, comment_post_id = ?"
            " WHERE account = ? AND chat_id = ? AND msg_id = ?",
            [
                (chat.chat_id, thread.post_id, self.account, group_id, m.msg_id)
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
                for r in self.conn.execute(
                    "SELECT msg_id FROM messages WHERE account = ? AND chat_id = ?"
                    " AND comment_channel_id = ? AND comment_post_id = ?",
                    (self.account, group_id, chat.chat_id, thread.post_id),
                )
            ]
            gone = sorted(set(stored) - kept)
            if gone:
                self.report.deleted += store.delete_messages(
                    self.conn, self.account, group_id, gone
                )
        _count_messages(self.conn, self.account, group_id)
        self.report.new += stats.new
        self.report.updated += stats.updated

    # --- migration ---

    async def _follow_migration(self, chat: _Chat) -> _Chat | None:
        target = await to_thread(
            lambda: self.conn.execute(
                "SELECT migrated_to FROM chats WHERE account = ? AND chat_id = ?",
                (self.account, chat.chat_id),
            ).fetchone()
        )
        migrated_to = target[0] if target is not None else None
        if migrated_to is None or migrated_to in self.queued:
            return None
        follow = await to_thread(self._load_chat, migrated_to)
        if follow is None:
            entity = await self.policy.call(
                lambda: self.client.get_entity(types.PeerChannel(utils.resolve_id(migrated_to)[0]))
            )
            await to_thread(self._store_supergroup, chat, entity)
            follow = await to_thread(self._load_chat, migrated_to)
        if follow is None:
            return None
        self.report.warnings.append(
            f"{chat.title!r} was upgraded to a supergroup; following it to {follow.chat_id}"
        )
        return follow

    def _store_supergroup(self, chat: _Chat, entity: Any) -> None:
        with db.transaction(self.conn):
            remember_chat(
                self.conn,
                self.account,
                chat_record(entity),
                source_id=chat.source_id,
                access_hash=getattr(entity, "access_hash", None),
            )


def _is_int(value: str) -> bool:
    return value.lstrip("-").isdigit()


def _fresh_record(record: ExportChat, messages: Sequence[Any]) -> ExportChat:
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
            run = _SyncRun(
                conn,
                used,
                account,
                budget_s=budget_s,
                refresh_only=refresh_only,
                chat_ids=chat_ids,
                clock=clock,
                sleep=sleep,
                now=now,
                on_progress=on_progress,
                batch_size=batch_size,
                reread=reread,
                flood_threshold_s=flood_threshold_s,
            )
            if takeout:
                run.report.takeout = "declined" if declined else "used"
            if declined is not None:
                run.report.warnings.append(declined)
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
