"""Adding sources and listing them with their chats.

An imported chat is never taken over by ``add_source``; a chat that already belongs to another
source stays with it.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

from chatseek_core import db
from chatseek_core.aio import to_thread
from chatseek_core.errors import (
    FailedPrecondition,
)
from chatseek_ingest import store
from chatseek_ingest.sources.resolve import (
    Resolved,
    resolve_target,
)
from chatseek_ingest.sync import remember_chat
from chatseek_ingest.telegram import (
    FloodPolicy,
    TelegramClientLike,
)

__all__ = ["AddedChat", "AddedSource", "SourceInfo", "add_source", "list_sources"]

log = logging.getLogger(__name__)


class AddedChat(TypedDict):
    """A chat ``add_source`` stored."""

    id: int
    title: str
    type: str
    username: str | None


@dataclass
class AddedSource:
    """What ``add_source`` stored (also its JSON document)."""

    source: str
    kind: str
    title: str
    chats: list[AddedChat]
    hint: str
    skipped_imports: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape: ``{source, kind, title, chats, hint, skipped_imports}``."""
        return asdict(self)


def _imported(conn: db.Connection, account: str) -> dict[int, str]:
    return {
        int(r[0]): str(r[1])
        for r in conn.execute(
            "SELECT chat_id, source_id FROM chats WHERE account = ? AND is_import = 1",
            (account,),
        )
    }


def _save_source(
    conn: db.Connection, account: str, resolved: Resolved, since: int | None, comments: bool
) -> AddedSource:
    with db.transaction(conn):
        store.ensure_account(conn, account)
        imported = _imported(conn, account)
        if resolved.kind == "chat":
            only = resolved.chats[0].record
            owner = imported.get(only.chat_id)
            if owner is not None:
                raise FailedPrecondition(
                    f"{only.title!r} is an imported chat ({owner}); it is not taken over",
                    hint=f"to sync it from Telegram instead, run `chatseek sources rm {owner}` "
                    "first",
                    metadata={"source_id": owner, "chat_id": str(only.chat_id)},
                )
        store.ensure_source(conn, account, resolved.source_id, resolved.kind, resolved.target)
        conn.execute(
            "UPDATE sources SET target = ?, since = ?, comments = ?, resolve_error = NULL"
            " WHERE account = ? AND source_id = ?",
            (resolved.target, since, int(comments), account, resolved.source_id),
        )
        kept = []
        skipped = []
        for chat in resolved.chats:
            if chat.record.chat_id in imported:
                skipped.append(chat.record.chat_id)
                continue
            remember_chat(
                conn,
                account,
                chat.record,
                source_id=resolved.source_id,
                access_hash=chat.access_hash,
                listed=True,
            )
            kept.append(chat.record)
    hint = "run `chatseek sync` to fetch its messages"
    if skipped:
        hint += f"; {len(skipped)} imported chats in this folder stay with their import"
    log.info("source %s added to %s with %d chats", resolved.source_id, account, len(kept))
    return AddedSource(
        source=resolved.source_id,
        kind=resolved.kind,
        title=resolved.title,
        chats=[
            {"id": r.chat_id, "title": r.title, "type": r.type, "username": r.username}
            for r in kept
        ],
        hint=hint,
        skipped_imports=skipped,
    )


async def add_source(
    conn: db.Connection,
    client: TelegramClientLike,
    account: str,
    target: str,
    *,
    since: int | None = None,
    comments: bool = False,
    policy: FloodPolicy | None = None,
) -> AddedSource:
    """Resolve ``target`` and store it as a source of ``account`` with its chats.

    Adding a source again updates its ``since`` (unix seconds, ``None``/0 = whole history) and
    ``comments``. A chat that already belongs to another source stays with it.

    Raises:
        FailedPrecondition: the target is a chat an import brought in (named in the error).
        InvalidArgument, ChatNotFound, AmbiguousName, FloodWait: see ``resolve_target``.
    """
    resolved = await resolve_target(client, target, policy=policy)
    return await to_thread(_save_source, conn, account, resolved, since or None, comments)


@dataclass
class SourceInfo:
    """A source with its chats, as ``list_sources`` reports it.

    ``configured`` is False for a source id only the chats still carry (its row is gone).
    """

    source_id: str
    kind: str
    target: str
    since: int | None
    comments: bool
    resolve_error: str | None
    configured: bool
    chats: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of a source."""
        return asdict(self)


def list_sources(conn: db.Connection, account: str) -> list[SourceInfo]:
    """Every source of ``account`` with its chats: configured ones first, then the rest."""
    out: dict[str, SourceInfo] = {}
    for row in conn.execute(
        "SELECT source_id, kind, target, since, comments, resolve_error FROM sources"
        " WHERE account = ? ORDER BY kind = 'import', added_at, source_id",
        (account,),
    ):
        out[row[0]] = SourceInfo(
            source_id=row[0],
            kind=row[1],
            target=row[2],
            since=row[3],
            comments=bool(row[4]),
            resolve_error=row[5],
            configured=True,
        )
    for row in conn.execute(
        "SELECT chat_id, title, type, username, message_count, last_fetched_at, unavailable,"
        " unavailable_reason, history_complete, source_id, is_import FROM chats"
        " WHERE account = ? ORDER BY title COLLATE NOCASE, chat_id",
        (account,),
    ):
        source_id = row[9] or ""
        info = out.get(source_id)
        if info is None:
            kind = "import" if row[10] else source_id.partition(":")[0] or "chat"
            info = out[source_id] = SourceInfo(
                source_id=source_id,
                kind=kind,
                target="",
                since=None,
                comments=False,
                resolve_error=None,
                configured=False,
            )
        info.chats.append(
            {
                "id": row[0],
                "title": row[1],
                "type": row[2],
                "username": row[3],
                "message_count": row[4],
                "last_sync_at": row[5],
                "unavailable": bool(row[6]),
                "unavailable_reason": row[7],
                "history_complete": bool(row[8]),
            }
        )
    return list(out.values())
