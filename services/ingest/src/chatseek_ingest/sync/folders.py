"""Which dialogs a Telegram chat folder lists now: explicit chats plus its flag matches."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from telethon import utils
from telethon.tl import types

__all__ = ["folder_members"]


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
