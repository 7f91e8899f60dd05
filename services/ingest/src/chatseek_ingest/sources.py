"""Sources: resolving what a user names into Telegram chats or folders, and keeping them.

Owns the ``sources`` rows of ``ingest.db`` and which chats belong to which source. A target is a
marked chat id, ``@username``, a ``t.me`` link (``t.me/<name>``, ``t.me/c/<id>/<msg>``),
``folder:<name>`` or a chat / folder title (exact, then substring, then a difflib ratio).
Invariants: an imported chat is never taken over by ``add_source`` nor offered by
``prune_sources``; chats are deleted only through ``store.delete_chat`` under the sync lock, so
everything derived follows through the feed; ``prune_sources`` deletes nothing when a folder
source fails to resolve, and keeps a channel's discussion group.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from telethon import errors

from chatseek_core import db
from chatseek_core.aio import to_thread
from chatseek_core.errors import (
    AmbiguousName,
    ChatNotFound,
    FailedPrecondition,
    InvalidArgument,
)
from chatseek_core.text import normalise
from chatseek_ingest import store
from chatseek_ingest.model import ExportChat
from chatseek_ingest.sync import default_lock_path, folder_members, remember_chat, sync_lock
from chatseek_ingest.telegram import (
    CHANNEL_ID_OFFSET,
    FloodPolicy,
    TelegramClientLike,
    chat_record,
    collect,
    folder_title,
    get_folders,
)

__all__ = [
    "AddedSource",
    "DialogMatch",
    "PruneSourcesReport",
    "RemovedSource",
    "Resolved",
    "ResolvedChat",
    "SourceInfo",
    "add_source",
    "dialogs",
    "list_sources",
    "prune_sources",
    "remove_source",
    "resolve_target",
]

log = logging.getLogger(__name__)

FUZZY_CUTOFF = 0.6
FUZZY_TIE = 0.05
CANDIDATES_SHOWN = 20
DIALOGS_LIMIT = 20
SUBSTRING_BASE = 0.7
SUBSTRING_SPAN = 0.3
FUZZY_WEIGHT = 0.7
FOLDER_PREFIX = "folder:"
IMPORT_PREFIX = "import:"
_TME = re.compile(r"^(?:https?://)?(?:www\.)?(?:t|telegram)\.me/(?P<path>[^?#]+)", re.IGNORECASE)
_USERNAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{2,31}$")
_INT = re.compile(r"^-?\d+$")
_NOT_FOUND_ERRORS: tuple[type[Exception], ...] = (
    ValueError,
    errors.UsernameNotOccupiedError,
    errors.UsernameInvalidError,
)


# --- resolution ---


@dataclass(frozen=True)
class ResolvedChat:
    """One Telegram chat a target stands for."""

    record: ExportChat
    access_hash: int | None


@dataclass(frozen=True)
class Resolved:
    """What a target resolved to.

    Attributes:
        kind: ``"chat"`` or ``"folder"``.
        source_id: the source's id (``chat:@name``, ``chat:-100…``, ``folder:<title>``).
        target: the canonical target a later sync re-resolves (a marked id or ``folder:<title>``).
        title: the chat's or the folder's title.
        chats: the chats it stands for now.
    """

    kind: str
    source_id: str
    target: str
    title: str
    chats: tuple[ResolvedChat, ...]


@dataclass(frozen=True)
class _Candidate:
    kind: str
    title: str
    username: str | None
    target: str
    ref: Any

    def label(self) -> str:
        return f"{self.title} ({self.target})"


def _policy(policy: FloodPolicy | None) -> FloodPolicy:
    return policy if policy is not None else FloodPolicy()


async def _all_dialogs(client: TelegramClientLike, policy: FloodPolicy) -> list[Any]:
    return await policy.call(lambda: collect(client.iter_dialogs()))


def _live(dialogs: Sequence[Any]) -> list[Any]:
    """Dialogs without legacy groups that were upgraded (their supergroup is listed too)."""
    return [d for d in dialogs if getattr(d.entity, "migrated_to", None) is None]


def _chat_target(record: ExportChat) -> str:
    return f"@{record.username}" if record.username else str(record.chat_id)


def _resolved_chat(entity: Any) -> Resolved:
    record = chat_record(entity)
    source_id = f"chat:@{record.username}" if record.username else f"chat:{record.chat_id}"
    return Resolved(
        kind="chat",
        source_id=source_id,
        target=str(record.chat_id),
        title=record.title,
        chats=(ResolvedChat(record, getattr(entity, "access_hash", None)),),
    )


def _resolved_folder(folder: Any, dialogs: Sequence[Any]) -> Resolved:
    title = folder_title(folder)
    members = folder_members(folder, dialogs)
    chats = tuple(
        ResolvedChat(chat_record(d.entity), getattr(d.entity, "access_hash", None)) for d in members
    )
    return Resolved(
        kind="folder",
        source_id=f"{FOLDER_PREFIX}{title}",
        target=f"{FOLDER_PREFIX}{title}",
        title=title,
        chats=chats,
    )


def _pick(query: str, candidates: Sequence[_Candidate], what: str) -> _Candidate:
    """Exact title or username, then substring, then the best ratio (a near-tie is ambiguous)."""
    wanted = normalise(query).lstrip("@")
    exact = [
        c
        for c in candidates
        if normalise(c.title) == wanted or (c.username and c.username.lower() == wanted)
    ]
    if not exact:
        exact = [
            c
            for c in candidates
            if wanted in normalise(c.title) or (c.username and wanted in c.username.lower())
        ]
    if not exact:
        scored = sorted(
            (
                (difflib.SequenceMatcher(None, wanted, normalise(c.title)).ratio(), i)
                for i, c in enumerate(candidates)
            ),
            reverse=True,
        )
        scored = [s for s in scored if s[0] >= FUZZY_CUTOFF]
        if scored:
            best = scored[0][0]
            exact = [candidates[i] for score, i in scored if best - score <= FUZZY_TIE]
    if not exact:
        raise ChatNotFound(
            f"no {what} matches {query!r}",
            hint="run `chatseek dialogs <words>` to find the chat and its target",
            metadata={"target": query},
        )
    if len(exact) > 1:
        raise AmbiguousName(
            f"{query!r} matches {len(exact)} {what}s",
            hint="pass one of the targets in parentheses instead",
            candidates=[c.label() for c in exact[:CANDIDATES_SHOWN]],
            metadata={"target": query},
        )
    return exact[0]


async def resolve_target(
    client: TelegramClientLike, target: str, *, policy: FloodPolicy | None = None
) -> Resolved:
    """Resolve a chat id, ``@username``, ``t.me`` link, ``folder:<name>`` or title.

    Raises:
        InvalidArgument: an empty target, an invite link, an ``import:`` target.
        ChatNotFound: nothing matches (unknown username, unseen id, no such folder or title).
        AmbiguousName: several chats or folders match equally well (``candidates`` lists them).
        FloodWait: Telegram asked for a wait longer than the policy sleeps through.
    """
    flood = _policy(policy)
    text = target.strip()
    if not text:
        raise InvalidArgument("the target is empty", hint="name a chat, a folder or a link")
    lowered = text.lower()
    if lowered.startswith(IMPORT_PREFIX):
        raise InvalidArgument(
            "an import: source cannot be added here",
            hint="imports come from `chatseek import <dir>`",
            metadata={"target": text},
        )
    if lowered.startswith(FOLDER_PREFIX):
        return await _resolve_folder(client, flood, text[len(FOLDER_PREFIX) :].strip())
    link = _TME.match(text)
    if link is not None:
        parts = [p for p in link.group("path").split("/") if p]
        if parts and parts[0] == "c" and len(parts) > 1 and parts[1].isdigit():
            return await _resolve_id(client, flood, -(CHANNEL_ID_OFFSET + int(parts[1])))
        if parts and (parts[0].lower() == "joinchat" or parts[0].startswith("+")):
            raise InvalidArgument(
                "an invite link cannot be resolved without joining the chat",
                hint="join the chat in Telegram, then add it by its title",
                metadata={"target": text},
            )
        if parts and parts[0] == "s":
            parts = parts[1:]
        if not parts or not _USERNAME.match(parts[0]):
            raise InvalidArgument(f"{text!r} is not a link to a chat", metadata={"target": text})
        return await _resolve_username(client, flood, parts[0])
    if text.startswith("@"):
        return await _resolve_username(client, flood, text[1:])
    if _INT.match(text):
        return await _resolve_id(client, flood, int(text))
    return await _resolve_title(client, flood, text)


async def _resolve_username(client: TelegramClientLike, policy: FloodPolicy, name: str) -> Resolved:
    try:
        entity = await policy.call(lambda: client.get_entity(name))
    except _NOT_FOUND_ERRORS as exc:
        raise ChatNotFound(
            f"no chat has the username @{name}",
            hint="check the spelling, or add the chat by its title",
            metadata={"target": f"@{name}"},
        ) from exc
    return _resolved_chat(entity)


async def _resolve_id(client: TelegramClientLike, policy: FloodPolicy, chat_id: int) -> Resolved:
    for dialog in await _all_dialogs(client, policy):
        if dialog.id == chat_id:
            return _resolved_chat(dialog.entity)
    try:
        entity = await policy.call(lambda: client.get_entity(chat_id))
    except ValueError as exc:
        raise ChatNotFound(
            f"this account has no chat {chat_id}",
            hint="open the chat in Telegram first, or add it by @username or title",
            metadata={"target": str(chat_id)},
        ) from exc
    return _resolved_chat(entity)


async def _resolve_folder(client: TelegramClientLike, policy: FloodPolicy, name: str) -> Resolved:
    filters = await policy.call(lambda: get_folders(client))
    candidates = [
        _Candidate("folder", folder_title(f), None, f"{FOLDER_PREFIX}{folder_title(f)}", f)
        for f in filters
    ]
    exact = [c for c in candidates if c.title.casefold() == name.casefold()]
    chosen = exact[0] if len(exact) == 1 else _pick(name, candidates, "folder")
    dialogs = await _all_dialogs(client, policy)
    return _resolved_folder(chosen.ref, dialogs)


async def _resolve_title(client: TelegramClientLike, policy: FloodPolicy, title: str) -> Resolved:
    dialogs = await _all_dialogs(client, policy)
    filters = await policy.call(lambda: get_folders(client))
    candidates = [
        _Candidate("chat", rec.title, rec.username, _chat_target(rec), d)
        for d in _live(dialogs)
        for rec in [chat_record(d.entity)]
    ]
    candidates += [
        _Candidate("folder", folder_title(f), None, f"{FOLDER_PREFIX}{folder_title(f)}", f)
        for f in filters
    ]
    chosen = _pick(title, candidates, "chat or folder")
    if chosen.kind == "folder":
        return _resolved_folder(chosen.ref, dialogs)
    return _resolved_chat(chosen.ref.entity)


# --- dialogs ---


@dataclass(frozen=True)
class DialogMatch:
    """A chat or folder of the account that matches a ``dialogs`` query.

    Attributes:
        kind: ``"chat"`` or ``"folder"``.
        id: the marked chat id, or the folder id.
        title: the title.
        type: the chat type (``private``, ``channel``...) or ``"folder"``.
        username: without ``@``, when public.
        folders: titles of the folders listing the chat.
        score: 1.0 for an exact match, lower for substring and fuzzy matches.
        target: what to pass to ``add_source``.
    """

    kind: str
    id: int
    title: str
    type: str
    username: str | None
    folders: list[str]
    score: float
    target: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of a match."""
        return asdict(self)


def _score(wanted: str, text: str) -> float:
    if not wanted:
        return 1.0
    if not text:
        return 0.0
    if text == wanted:
        return 1.0
    if wanted in text:
        return round(SUBSTRING_BASE + SUBSTRING_SPAN * len(wanted) / len(text), 3)
    ratio = difflib.SequenceMatcher(None, wanted, text).ratio()
    return round(FUZZY_WEIGHT * ratio, 3) if ratio >= FUZZY_CUTOFF else 0.0


async def dialogs(
    client: TelegramClientLike,
    query: str,
    limit: int = DIALOGS_LIMIT,
    *,
    policy: FloodPolicy | None = None,
) -> list[DialogMatch]:
    """Chats and folders whose title, @username or folder name matches ``query``, best first.

    An empty query lists everything (up to ``limit``).
    """
    flood = _policy(policy)
    all_dialogs = await _all_dialogs(client, flood)
    filters = await flood.call(lambda: get_folders(client))
    folders_of: dict[int, list[str]] = {}
    for folder in filters:
        for member in folder_members(folder, all_dialogs):
            folders_of.setdefault(member.id, []).append(folder_title(folder))
    wanted = normalise(query).lstrip("@")
    matches: list[DialogMatch] = []
    for dialog in _live(all_dialogs):
        rec = chat_record(dialog.entity)
        names = folders_of.get(dialog.id, [])
        fields = [normalise(rec.title), (rec.username or "").lower(), *map(normalise, names)]
        score = max(_score(wanted, f) for f in fields)
        if score > 0:
            matches.append(
                DialogMatch(
                    "chat",
                    rec.chat_id,
                    rec.title,
                    rec.type,
                    rec.username,
                    names,
                    score,
                    _chat_target(rec),
                )
            )
    for folder in filters:
        title = folder_title(folder)
        score = _score(wanted, normalise(title))
        if score > 0:
            matches.append(
                DialogMatch(
                    "folder",
                    int(folder.id),
                    title,
                    "folder",
                    None,
                    [],
                    score,
                    f"{FOLDER_PREFIX}{title}",
                )
            )
    matches.sort(key=lambda m: (-m.score, m.kind, m.title.casefold()))
    return matches[: max(limit, 0)] if limit else matches


# --- adding and listing ---


@dataclass
class AddedSource:
    """What ``add_source`` stored (also its JSON document)."""

    source: str
    kind: str
    title: str
    chats: list[dict[str, Any]]
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


# --- removing ---


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
    link = _TME.match(target)
    if link is not None:
        parts = [p for p in link.group("path").split("/") if p]
        if len(parts) > 1 and parts[0] == "c" and parts[1].isdigit():
            return -(CHANNEL_ID_OFFSET + int(parts[1])), None
        if parts and _USERNAME.match(parts[0]):
            return None, parts[0]
    if target.startswith("@") and _USERNAME.match(target[1:]):
        return None, target[1:]
    if _INT.match(target):
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
    candidates = [_Candidate("source", label, None, sid, sid) for sid, label in labels]
    return str(_pick(text, candidates, "source").ref)


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
        if kind == "chat" and _INT.match(target) and int(target) in titles:
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


# --- pruning folders ---


@dataclass
class PruneSourcesReport:
    """What ``prune_sources`` removed (or would remove) and what it kept, with why."""

    dry_run: bool
    removed: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)

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
    flood = _policy(policy)
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
    all_dialogs = await _all_dialogs(client, flood)
    filters = await flood.call(lambda: get_folders(client))
    by_title = {folder_title(f).casefold(): f for f in filters}
    listed_by: dict[int, str] = {
        int(r[2]): str(r[0]) for r in rows if r[1] == "chat" and _INT.match(str(r[2]))
    }
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
