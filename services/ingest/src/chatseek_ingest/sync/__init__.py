"""Telegram sync: new messages of every source chat, then a re-read of the newest, in a budget.

Owns ``sync``, the sync lock every Telegram-writing pass takes, the chats' sync-state columns
(``last_msg_id``, ``history_complete``, ``unavailable``, ``migrated_to``, ...) and
``history_ranges``. Invariants: one pass at a time per data dir (``lock``); a batch, its chat's
sync state and history range commit in one transaction (``writes``); a flood wait in the middle
of a batch resumes after the last message received, and one too long to wait commits what came
before it; imported chats are never fetched; ``refresh_only`` never runs a chat's first sync
(``plan``). Modules: ``run`` (the chat loop), ``comments``, ``chat``, ``context``, ``report``,
``folders`` and ``state`` (chat-state writes shared with other passes).
"""

from __future__ import annotations

from chatseek_ingest.sync.comments import REREAD_THREADS
from chatseek_ingest.sync.folders import folder_members
from chatseek_ingest.sync.lock import LOCK_FILE, default_lock_path, held_sync_lock, sync_lock
from chatseek_ingest.sync.report import Progress, SyncProgress, SyncReport
from chatseek_ingest.sync.run import BATCH_SIZE, REREAD_NEWEST, sync
from chatseek_ingest.sync.state import check_identity, extend_history_range, remember_chat

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
    "held_sync_lock",
    "remember_chat",
    "sync",
    "sync_lock",
]
