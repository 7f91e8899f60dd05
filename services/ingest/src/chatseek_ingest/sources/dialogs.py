"""Finding chats and folders of the account by title, @username or folder name, scored."""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass
from typing import Any

from chatseek_core.text import normalise
from chatseek_ingest.sources.resolve import (
    FOLDER_PREFIX,
    FUZZY_CUTOFF,
    chat_target,
    fetch_dialogs,
    flood_policy,
    live_dialogs,
)
from chatseek_ingest.sync import folder_members
from chatseek_ingest.telegram import (
    FloodPolicy,
    TelegramClientLike,
    chat_record,
    folder_title,
    get_folders,
)

__all__ = ["DIALOGS_LIMIT", "DialogMatch", "dialogs"]

DIALOGS_LIMIT = 20
SUBSTRING_BASE = 0.7
SUBSTRING_SPAN = 0.3
FUZZY_WEIGHT = 0.7


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
    flood = flood_policy(policy)
    all_dialogs = await fetch_dialogs(client, flood)
    filters = await flood.call(lambda: get_folders(client))
    folders_of: dict[int, list[str]] = {}
    for folder in filters:
        for member in folder_members(folder, all_dialogs):
            folders_of.setdefault(member.id, []).append(folder_title(folder))
    wanted = normalise(query).lstrip("@")
    matches: list[DialogMatch] = []
    for dialog in live_dialogs(all_dialogs):
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
                    chat_target(rec),
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
