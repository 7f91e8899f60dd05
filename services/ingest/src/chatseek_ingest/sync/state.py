"""Chat-state writes shared by sync, sources and deletion passes, and the account's identity.

Every function here runs inside the caller's transaction, except ``check_identity`` (its own).
"""

from __future__ import annotations

from typing import Any

from telethon import utils

from chatseek_core import db
from chatseek_core.errors import WrongAccount
from chatseek_ingest import store
from chatseek_ingest.model import ExportChat

__all__ = ["check_identity", "count_messages", "extend_history_range", "remember_chat"]


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


def count_messages(conn: db.Connection, account: str, chat_id: int) -> None:
    """Recount a chat's stored messages (inside the caller's transaction)."""
    conn.execute(
        "UPDATE chats SET message_count = (SELECT COUNT(*) FROM messages m"
        " WHERE m.account = chats.account AND m.chat_id = chats.chat_id AND m.kind = 'message')"
        " WHERE account = ? AND chat_id = ?",
        (account, chat_id),
    )


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
