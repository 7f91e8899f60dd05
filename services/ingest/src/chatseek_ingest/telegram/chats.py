"""Telethon users, groups and channels as ``ExportChat`` records (marked ids, no I/O)."""

from __future__ import annotations

from typing import Any

from telethon import utils
from telethon.tl import types

from chatseek_ingest.model import ExportChat

__all__ = ["chat_record"]

SAVED_MESSAGES_TITLE = "Saved Messages"


def _username(entity: Any) -> str | None:
    name = getattr(entity, "username", None)
    if name:
        return str(name)
    for extra in getattr(entity, "usernames", None) or []:
        if getattr(extra, "active", False):
            return str(extra.username)
    return None


def chat_record(entity: Any) -> ExportChat:
    """The ``ExportChat`` of a Telethon ``User`` / ``Chat`` / ``Channel`` (or forbidden one).

    Raises:
        TypeError: ``entity`` is not a chat-like Telethon object.
    """
    if isinstance(entity, types.User):
        if entity.is_self:
            kind, export_type, title = "saved", "saved_messages", SAVED_MESSAGES_TITLE
        elif entity.bot:
            kind, export_type, title = "bot", "bot_chat", utils.get_display_name(entity)
        else:
            kind, export_type, title = "private", "personal_chat", utils.get_display_name(entity)
        return ExportChat(
            chat_id=utils.get_peer_id(entity),
            raw_id=entity.id,
            type=kind,
            title=title,
            username=_username(entity),
            export_type=export_type,
            is_left=bool(entity.deleted),
        )
    if isinstance(entity, types.Chat | types.ChatForbidden):
        return ExportChat(
            chat_id=utils.get_peer_id(entity),
            raw_id=entity.id,
            type="group",
            title=entity.title or "",
            username=None,
            export_type="private_group",
            is_left=isinstance(entity, types.ChatForbidden)
            or bool(getattr(entity, "left", False) or getattr(entity, "deactivated", False)),
        )
    if isinstance(entity, types.Channel | types.ChannelForbidden):
        username = _username(entity)
        if entity.broadcast:
            kind = "channel"
        elif getattr(entity, "forum", False):
            kind = "forum"
        else:
            kind = "supergroup"
        visibility = "public" if username else "private"
        noun = "channel" if kind == "channel" else "supergroup"
        return ExportChat(
            chat_id=utils.get_peer_id(entity),
            raw_id=entity.id,
            type=kind,
            title=entity.title or "",
            username=username,
            export_type=f"{visibility}_{noun}",
            is_left=isinstance(entity, types.ChannelForbidden) or bool(entity.left),
        )
    raise TypeError(f"not a chat entity: {type(entity).__name__}")
