"""Peers, folders and discussion groups: the raw requests behind them."""

from __future__ import annotations

from typing import Any

from telethon.tl import functions, types

from chatseek_ingest.telegram.client import TelegramClientLike

__all__ = ["CHANNEL_ID_OFFSET", "folder_title", "get_folders", "get_linked_chat", "input_peer"]

CHANNEL_ID_OFFSET = 1_000_000_000_000


def input_peer(chat_id: int, access_hash: int | None, *, is_self: bool = False) -> Any:
    """An input peer for a stored chat, or its marked id when no access hash is known.

    Telethon accepts either; the id only works once this client has seen the chat.
    """
    if is_self:
        return types.InputPeerSelf()
    if chat_id <= -CHANNEL_ID_OFFSET:
        if access_hash is None:
            return chat_id
        return types.InputPeerChannel(
            channel_id=-chat_id - CHANNEL_ID_OFFSET, access_hash=access_hash
        )
    if chat_id < 0:
        return types.InputPeerChat(chat_id=-chat_id)
    if access_hash is None:
        return chat_id
    return types.InputPeerUser(user_id=chat_id, access_hash=access_hash)


def folder_title(folder: Any) -> str:
    """A folder's title as plain text (newer layers wrap it in ``TextWithEntities``)."""
    title = getattr(folder, "title", "")
    return str(getattr(title, "text", title) or "")


async def get_folders(client: TelegramClientLike) -> list[Any]:
    """The account's chat folders (``DialogFilter`` / ``DialogFilterChatlist``)."""
    result = await client(functions.messages.GetDialogFiltersRequest())
    filters = getattr(result, "filters", result)
    return [f for f in filters if isinstance(f, types.DialogFilter | types.DialogFilterChatlist)]


async def get_linked_chat(client: TelegramClientLike, channel: Any) -> Any | None:
    """The discussion group entity of a broadcast channel, or ``None`` when it has none."""
    full = await client(functions.channels.GetFullChannelRequest(channel=channel))
    linked = getattr(full.full_chat, "linked_chat_id", None)
    if not linked:
        return None
    for chat in full.chats:
        if chat.id == linked and isinstance(chat, types.Channel | types.ChannelForbidden):
            return chat
    return types.PeerChannel(channel_id=linked)
