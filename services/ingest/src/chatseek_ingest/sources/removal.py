"""Removing a source and deleting its chats, under the sync lock.

Chats are deleted only through ``store.delete_chat``, so everything derived follows through the
feed. A chat of a folder source, or a discussion group that came in through its channel, is not
removed on its own.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from chatseek_core import db
from chatseek_core.errors import (
    ChatNotFound,
    FailedPrecondition,
)
from chatseek_ingest import store
from chatseek_ingest.sources.resolve import (
    CANDIDATES_SHOWN,
    FOLDER_PREFIX,
    INT_RE,
    TME_RE,
    USERNAME_RE,
    Candidate,
    pick,
)
from chatseek_ingest.sync import default_lock_path, sync_lock
from chatseek_ingest.telegram import (
    CHANNEL_ID_OFFSET,
)

__all__ = ["RemovedSource", "remove_source"]

log = logging.getLogger(__name__)


@dataclass
class RemovedSource:
    """What ``remove_source`` deleted (also its JSON document)."""

    source_id: str
    removed_chat_ids: list[int]
    messages_deleted: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape: ``{source_id, removed_chat_ids, messages_deleted}``."""
        return asdict(self)


def _named_chat(target: str) -> tuple[int | None, str | None]:
    """The chat id or username a target names directly, else ``(None, None)``."""
    link = TME_RE.match(target)
    if link is not None:
        parts = [p for p in link.group("path").split("/") if p]
        if len(parts) > 1 and parts[0] == "c" and parts[1].isdigit():
            return -(CHANNEL_ID_OFFSET + int(parts[1])), None
        if parts and USERNAME_RE.match(parts[0]):
            return None, parts[0]
    if target.startswith("@") and USERNAME_RE.match(target[1:]):
        return None, target[1:]
    if INT_RE.match(target):
        return int(target), None
    return None, None


def _match_source(conn: db.Connection, account: str, target: str) -> str:
    sources = {
        str(r[0]): (str(r[1]), str(r[2]))
        for r in conn.execute(
            "SELECT source_id, kind, target FROM sources WHERE account = ?", (account,)
        )
    }
    for (source_id,) in conn.execute(
        "SELECT DISTINCT source_id FROM chats WHERE account = ? AND source_id IS NOT NULL",
        (account,),
    ):
        sources.setdefault(str(source_id), (str(source_id).partition(":")[0], ""))
    text = target.strip()
    folded = {s.casefold(): s for s in sources}
    if text in sources or text.casefold() in folded:
        return text if text in sources else folded[text.casefold()]
    name = text[len(FOLDER_PREFIX) :] if text.lower().startswith(FOLDER_PREFIX) else text
    folder_hit = folded.get(f"{FOLDER_PREFIX}{name.strip()}".casefold())
    if folder_hit is not None and sources[folder_hit][0] == "folder":
        return folder_hit
    chat_id, username = _named_chat(text)
    if chat_id is not None or username is not None:
        return _source_of_chat(conn, account, sources, text, chat_id, username)
    labels = _source_labels(conn, account, sources)
    candidates = [Candidate("source", label, None, sid, sid) for sid, label in labels]
    return str(pick(text, candidates, "source").ref)


def _source_of_chat(
    conn: db.Connection,
    account: str,
    sources: dict[str, tuple[str, str]],
    text: str,
    chat_id: int | None,
    username: str | None,
) -> str:
    row = conn.execute(
        "SELECT chat_id, title, source_id FROM chats WHERE account = ?"
        " AND (chat_id = ? OR lower(username) = lower(?))",
        (account, chat_id, username),
    ).fetchone()
    if row is None or row[2] is None:
        raise ChatNotFound(
            f"no stored chat is {text!r}",
            hint="run `chatseek sources ls` to see the sources and their chats",
            candidates=sorted(sources)[:CANDIDATES_SHOWN],
            metadata={"target": text},
        )
    found_id, title, source_id = int(row[0]), str(row[1]), str(row[2])
    kind = sources.get(source_id, ("", ""))[0]
    if kind == "folder":
        raise FailedPrecondition(
            f"{title!r} comes in through {source_id} and cannot be removed on its own",
            hint=f"remove {source_id}, or take the chat out of the folder in Telegram and run "
            "`chatseek sources prune`",
            metadata={"source_id": source_id, "chat_id": str(found_id)},
        )
    channel = conn.execute(
        "SELECT title FROM chats WHERE account = ? AND linked_chat_id = ? AND source_id = ?",
        (account, found_id, source_id),
    ).fetchone()
    if channel is not None and sources.get(source_id, ("", ""))[1] != str(found_id):
        raise FailedPrecondition(
            f"{title!r} is the discussion group of {channel[0]!r} and comes in through it",
            hint=f"remove the channel's source ({source_id}) instead",
            metadata={"source_id": source_id, "chat_id": str(found_id)},
        )
    return source_id


def _source_labels(
    conn: db.Connection, account: str, sources: dict[str, tuple[str, str]]
) -> list[tuple[str, str]]:
    titles = {
        int(r[0]): str(r[1])
        for r in conn.execute("SELECT chat_id, title FROM chats WHERE account = ?", (account,))
    }
    labels = []
    for source_id, (kind, target) in sorted(sources.items()):
        label = source_id.partition(":")[2]
        if kind == "chat" and INT_RE.match(target) and int(target) in titles:
            label = titles[int(target)]
        labels.append((source_id, label))
    return labels


def remove_source(
    conn: db.Connection, account: str, target: str, *, lock_path: Path | None = None
) -> RemovedSource:
    """Remove a source and delete its chats (announced on the feed, so derived data follows).

    ``target`` is a source id (``folder:<name>``, ``chat:@name``, ``chat:-100…``,
    ``import:<slug>``), a folder name, a chat id, @username, ``t.me`` link or a fuzzy title.

    Raises:
        SyncRunning: a sync (or another deletion pass) is running.
        FailedPrecondition: the chat belongs to a folder source, or is a channel's discussion
            group that came in through the channel.
        ChatNotFound, AmbiguousName: the target names no source, or several.
    """
    source_id = _match_source(conn, account, target)
    path = lock_path if lock_path is not None else default_lock_path(conn)
    with sync_lock(path), db.transaction(conn):
        chat_ids = [
            int(r[0])
            for r in conn.execute(
                "SELECT chat_id FROM chats WHERE account = ? AND source_id = ? ORDER BY chat_id",
                (account, source_id),
            )
        ]
        deleted = sum(store.delete_chat(conn, account, chat_id) for chat_id in chat_ids)
        conn.execute(
            "DELETE FROM sources WHERE account = ? AND source_id = ?", (account, source_id)
        )
    log.info(
        "source %s of %s removed: %d chats, %d messages",
        source_id,
        account,
        len(chat_ids),
        deleted,
    )
    return RemovedSource(source_id=source_id, removed_chat_ids=chat_ids, messages_deleted=deleted)
