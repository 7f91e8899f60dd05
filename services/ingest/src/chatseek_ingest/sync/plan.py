"""Which chats a sync run fetches, in which order: sources resolved, then the work list.

Imported chats are never fetched; ``refresh_only`` never runs a chat's first sync; a chat of a
folder that could not be resolved this run is synced as stored.
"""

from __future__ import annotations

from chatseek_core.aio import to_thread
from chatseek_ingest.sync.chat import CHAT_SQL, SyncChat, sync_chat_of
from chatseek_ingest.sync.context import RunContext
from chatseek_ingest.sync.folders import folder_members
from chatseek_ingest.sync.writes import resolve_failed, store_folder
from chatseek_ingest.telegram import folder_title, get_folders

__all__ = ["resolve_sources", "work_list"]


async def resolve_sources(ctx: RunContext) -> dict[str, set[int] | None]:
    """Re-resolve folder sources (folders change); returns the chat ids each source lists.

    ``None`` for a folder that could not be resolved this run: its stored chats are synced
    as they are, and the source records why.
    """
    rows = await to_thread(
        lambda: ctx.conn.execute(
            "SELECT source_id, kind, target FROM sources WHERE account = ?"
            " AND kind IN ('chat', 'folder') ORDER BY source_id",
            (ctx.account,),
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
    dialogs = await ctx.load_dialogs()
    filters = await ctx.policy.call(lambda: get_folders(ctx.client))
    by_title = {folder_title(f).casefold(): f for f in filters}
    for source_id, target in folders:
        name = target.removeprefix("folder:")
        folder = by_title.get(name.casefold())
        if folder is None:
            listed[source_id] = None
            await to_thread(resolve_failed, ctx, source_id, f"no folder named {name!r}")
            continue
        members = folder_members(folder, dialogs)
        listed[source_id] = {d.id for d in members}
        await to_thread(store_folder, ctx, source_id, members)
    return listed


def work_list(
    ctx: RunContext,
    listed: dict[str, set[int] | None],
    chat_ids: set[int] | None,
    refresh_only: bool,
) -> tuple[list[SyncChat], int]:
    """The chats this run syncs, never-synced first, and how many a refresh skips.

    A chat is wanted when a source lists it now (or its folder could not be resolved and it is
    no discussion group), and so is the supergroup a wanted group was upgraded to.
    """
    rows = ctx.conn.execute(
        CHAT_SQL + " ORDER BY c.last_fetched_at IS NOT NULL, c.last_fetched_at, c.chat_id",
        (ctx.account,),
    ).fetchall()
    chats = [sync_chat_of(r) for r in rows]
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
        if chat_ids is not None and chat.chat_id not in chat_ids:
            continue
        if chat.migrated_to is not None and chat.history_complete:
            continue
        if refresh_only and not chat.history_complete:
            skipped += 1
            continue
        work.append(chat)
    if skipped:
        ctx.report.warnings.append(
            f"{skipped} chats have not finished their first sync; run a full sync for them"
        )
    if chat_ids is not None:
        missing = chat_ids - {c.chat_id for c in chats if c.chat_id in wanted}
        for chat_id in sorted(missing):
            ctx.report.warnings.append(f"chat {chat_id} is not a chat of any synced source")
    return work, skipped


def _is_int(value: str) -> bool:
    return value.lstrip("-").isdigit()
