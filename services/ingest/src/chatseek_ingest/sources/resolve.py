"""Resolving what a user names into Telegram chats or folders.

A target is a marked chat id, ``@username``, a ``t.me`` link (``t.me/<name>``,
``t.me/c/<id>/<msg>``), ``folder:<name>`` or a chat / folder title (exact, then substring, then
a difflib ratio; a near-tie is ambiguous). Invite links and ``import:`` targets are refused.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from telethon import errors

from chatseek_core.errors import (
    AmbiguousName,
    ChatNotFound,
    InvalidArgument,
)
from chatseek_core.text import normalise
from chatseek_ingest.model import ExportChat
from chatseek_ingest.sync import folder_members
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
    "CANDIDATES_SHOWN",
    "FOLDER_PREFIX",
    "FUZZY_CUTOFF",
    "INT_RE",
    "TME_RE",
    "USERNAME_RE",
    "Candidate",
    "Resolved",
    "ResolvedChat",
    "chat_target",
    "fetch_dialogs",
    "flood_policy",
    "live_dialogs",
    "pick",
    "resolve_target",
]

FUZZY_CUTOFF = 0.6
FUZZY_TIE = 0.05
CANDIDATES_SHOWN = 20
FOLDER_PREFIX = "folder:"
IMPORT_PREFIX = "import:"
TME_RE = re.compile(r"^(?:https?://)?(?:www\.)?(?:t|telegram)\.me/(?P<path>[^?#]+)", re.IGNORECASE)
USERNAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{2,31}$")
INT_RE = re.compile(r"^-?\d+$")
_NOT_FOUND_ERRORS: tuple[type[Exception], ...] = (
    ValueError,
    errors.UsernameNotOccupiedError,
    errors.UsernameInvalidError,
)


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
class Candidate:
    """A chat, folder or source a name may stand for; ``ref`` is what it resolves to."""

    kind: str
    title: str
    username: str | None
    target: str
    ref: Any

    def label(self) -> str:
        return f"{self.title} ({self.target})"


def flood_policy(policy: FloodPolicy | None) -> FloodPolicy:
    """``policy``, or a default ``FloodPolicy``."""
    return policy if policy is not None else FloodPolicy()


async def fetch_dialogs(client: TelegramClientLike, policy: FloodPolicy) -> list[Any]:
    """Every dialog of the account, under ``policy``."""
    return await policy.call(lambda: collect(client.iter_dialogs()))


def live_dialogs(dialogs: Sequence[Any]) -> list[Any]:
    """Dialogs without legacy groups that were upgraded (their supergroup is listed too)."""
    return [d for d in dialogs if getattr(d.entity, "migrated_to", None) is None]


def chat_target(record: ExportChat) -> str:
    """What to pass to ``add_source`` for a chat: ``@username``, else its marked id."""
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


def pick(query: str, candidates: Sequence[Candidate], what: str) -> Candidate:
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
    flood = flood_policy(policy)
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
    link = TME_RE.match(text)
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
        if not parts or not USERNAME_RE.match(parts[0]):
            raise InvalidArgument(f"{text!r} is not a link to a chat", metadata={"target": text})
        return await _resolve_username(client, flood, parts[0])
    if text.startswith("@"):
        return await _resolve_username(client, flood, text[1:])
    if INT_RE.match(text):
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
    for dialog in await fetch_dialogs(client, policy):
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
        Candidate("folder", folder_title(f), None, f"{FOLDER_PREFIX}{folder_title(f)}", f)
        for f in filters
    ]
    exact = [c for c in candidates if c.title.casefold() == name.casefold()]
    chosen = exact[0] if len(exact) == 1 else pick(name, candidates, "folder")
    dialogs = await fetch_dialogs(client, policy)
    return _resolved_folder(chosen.ref, dialogs)


async def _resolve_title(client: TelegramClientLike, policy: FloodPolicy, title: str) -> Resolved:
    dialogs = await fetch_dialogs(client, policy)
    filters = await policy.call(lambda: get_folders(client))
    candidates = [
        Candidate("chat", rec.title, rec.username, chat_target(rec), d)
        for d in live_dialogs(dialogs)
        for rec in [chat_record(d.entity)]
    ]
    candidates += [
        Candidate("folder", folder_title(f), None, f"{FOLDER_PREFIX}{folder_title(f)}", f)
        for f in filters
    ]
    chosen = pick(title, candidates, "chat or folder")
    if chosen.kind == "folder":
        return _resolved_folder(chosen.ref, dialogs)
    return _resolved_chat(chosen.ref.entity)
