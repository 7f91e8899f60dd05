"""Telethon messages as the same ``ExportMessage`` records an export produces (no I/O)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from telethon import helpers, utils
from telethon.tl import types

from chatseek_ingest.model import ExportChat, ExportMessage
from chatseek_ingest.telegram.media import message_media
from chatseek_ingest.telegram.peers import CHANNEL_ID_OFFSET

__all__ = ["GENERAL_TOPIC_ID", "to_records"]

GENERAL_TOPIC_ID = 1
_URL_RE = re.compile(r"\b[a-z][a-z0-9+.-]*://\S|\bwww\.\w|\bt\.me/\w", re.IGNORECASE)

_ENTITY_TYPES: dict[type[object], str] = {
    types.MessageEntityMention: "mention",
    types.MessageEntityMentionName: "mention_name",
    types.MessageEntityHashtag: "hashtag",
    types.MessageEntityCashtag: "cashtag",
    types.MessageEntityBotCommand: "bot_command",
    types.MessageEntityUrl: "link",
    types.MessageEntityTextUrl: "text_link",
    types.MessageEntityEmail: "email",
    types.MessageEntityPhone: "phone",
    types.MessageEntityBold: "bold",
    types.MessageEntityItalic: "italic",
    types.MessageEntityUnderline: "underline",
    types.MessageEntityStrike: "strikethrough",
    types.MessageEntityCode: "code",
    types.MessageEntityPre: "pre",
    types.MessageEntityBankCard: "bank_card",
    types.MessageEntitySpoiler: "spoiler",
    types.MessageEntityCustomEmoji: "custom_emoji",
    types.MessageEntityBlockquote: "blockquote",
}

_ACTION_NAMES: dict[type[object], str] = {
    types.MessageActionChatCreate: "create_group",
    types.MessageActionChatEditTitle: "edit_group_title",
    types.MessageActionChatEditPhoto: "edit_group_photo",
    types.MessageActionChatDeletePhoto: "delete_group_photo",
    types.MessageActionChatAddUser: "invite_members",
    types.MessageActionChatDeleteUser: "remove_members",
    types.MessageActionChatJoinedByLink: "join_group_by_link",
    types.MessageActionChatJoinedByRequest: "join_group_by_request",
    types.MessageActionChannelCreate: "create_channel",
    types.MessageActionChatMigrateTo: "migrate_to_supergroup",
    types.MessageActionChannelMigrateFrom: "migrate_from_group",
    types.MessageActionPinMessage: "pin_message",
    types.MessageActionHistoryClear: "clear_history",
    types.MessageActionGameScore: "score_in_game",
    types.MessageActionPhoneCall: "phone_call",
    types.MessageActionScreenshotTaken: "take_screenshot",
    types.MessageActionCustomAction: "custom_action",
    types.MessageActionBotAllowed: "allow_sending_messages",
    types.MessageActionContactSignUp: "joined_telegram",
    types.MessageActionGroupCall: "group_call",
    types.MessageActionInviteToGroupCall: "invite_to_group_call",
    types.MessageActionSetMessagesTTL: "set_messages_ttl",
    types.MessageActionGroupCallScheduled: "group_call_scheduled",
    types.MessageActionSetChatTheme: "edit_chat_theme",
    types.MessageActionTopicCreate: "topic_created",
    types.MessageActionTopicEdit: "topic_edit",
    types.MessageActionGiftPremium: "send_premium_gift",
    types.MessageActionSetChatWallPaper: "set_chat_wallpaper",
    types.MessageActionBoostApply: "boost_apply",
}
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _marked_kind(marked: int) -> str:
    bare, peer_cls = utils.resolve_id(marked)
    if peer_cls is types.PeerChannel:
        return "channel"
    if peer_cls is types.PeerChat:
        return "chat"
    return "user"


def _entities(text: str, raw: Sequence[Any] | None) -> list[dict[str, Any]]:
    if not raw:
        return []
    wide = helpers.add_surrogate(text)
    out: list[dict[str, Any]] = []
    for entity in raw:
        kind = _ENTITY_TYPES.get(type(entity), "unknown")
        piece = helpers.del_surrogate(wide[entity.offset : entity.offset + entity.length])
        item: dict[str, Any] = {"type": kind, "text": piece}
        if kind == "link":
            item["href"] = piece
        elif kind == "text_link":
            item["href"] = entity.url
        elif kind == "mention_name":
            item["user_id"] = entity.user_id
        elif kind == "custom_emoji":
            item["document_id"] = str(entity.document_id)
        elif kind == "pre" and entity.language:
            item["language"] = entity.language
        out.append(item)
    return out


def _buttons(markup: Any) -> tuple[list[list[dict[str, Any]]], bool]:
    if not isinstance(markup, types.ReplyInlineMarkup):
        return [], False
    rows: list[list[dict[str, Any]]] = []
    has_url = False
    for row in markup.rows:
        out: list[dict[str, Any]] = []
        for button in row.buttons:
            kind_obj = getattr(button, "type", button)
            url = getattr(kind_obj, "url", None)
            name = _CAMEL.sub("_", type(kind_obj).__name__)
            for prefix in ("Inline_Button_Type_", "Keyboard_Button_", "Button_Type_"):
                name = name.removeprefix(prefix)
            entry: dict[str, Any] = {"type": name.lower(), "text": button.text}
            if url:
                entry["type"] = "url"
                entry["data"] = url
                has_url = True
            out.append(entry)
        rows.append(out)
    return rows, has_url


def _names(entities: Sequence[Any] | None) -> list[str]:
    return [utils.get_display_name(e) for e in entities or [] if e is not None]


def _service(message: Any) -> tuple[str, dict[str, Any]]:
    action = message.action
    name = _ACTION_NAMES.get(type(action))
    if name is None:
        name = _CAMEL.sub("_", type(action).__name__.removeprefix("MessageAction")).lower()
    extra: dict[str, Any] = {}
    actors = getattr(message, "action_entities", None)
    if isinstance(action, types.MessageActionChatCreate | types.MessageActionChannelCreate):
        extra["title"] = action.title
    if isinstance(
        action,
        types.MessageActionChatCreate
        | types.MessageActionChatAddUser
        | types.MessageActionChatDeleteUser,
    ):
        extra["members"] = _names(actors)
    elif isinstance(action, types.MessageActionChatEditTitle):
        extra["title"] = action.title
    elif isinstance(action, types.MessageActionChatJoinedByLink):
        inviter = _names(actors)
        if inviter:
            extra["inviter"] = inviter[0]
    elif isinstance(action, types.MessageActionChatMigrateTo):
        extra["channel_id"] = -(CHANNEL_ID_OFFSET + action.channel_id)
    elif isinstance(action, types.MessageActionChannelMigrateFrom):
        extra["title"] = action.title
        extra["chat_id"] = -action.chat_id
    elif isinstance(action, types.MessageActionPinMessage):
        reply = message.reply_to
        if isinstance(reply, types.MessageReplyHeader) and reply.reply_to_msg_id:
            extra["message_id"] = reply.reply_to_msg_id
    elif isinstance(action, types.MessageActionPhoneCall | types.MessageActionGroupCall):
        if action.duration is not None:
            extra["duration_seconds"] = action.duration
    elif isinstance(action, types.MessageActionTopicCreate):
        extra["title"] = action.title
    elif isinstance(action, types.MessageActionTopicEdit):
        if action.title is not None:
            extra["new_title"] = action.title
        for flag in ("closed", "hidden"):
            if getattr(action, flag) is not None:
                extra[flag] = bool(getattr(action, flag))
    elif isinstance(action, types.MessageActionSetMessagesTTL):
        extra["period"] = action.period
    return name, extra


def _reactions(raw: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for result in getattr(raw, "results", None) or []:
        reaction = result.reaction
        if isinstance(reaction, types.ReactionEmoji):
            key = reaction.emoticon
        elif isinstance(reaction, types.ReactionCustomEmoji):
            key = f"custom:{reaction.document_id}"
        elif isinstance(reaction, types.ReactionPaid):
            key = "paid"
        else:
            continue
        out[key] = out.get(key, 0) + int(result.count)
    return out


def _topic(message: Any, reply: Any, chat: ExportChat) -> int | None:
    if chat.type != "forum":
        return None
    if isinstance(getattr(message, "action", None), types.MessageActionTopicCreate):
        return int(message.id)
    if isinstance(reply, types.MessageReplyHeader) and reply.forum_topic:
        return int(reply.reply_to_top_id or reply.reply_to_msg_id or GENERAL_TOPIC_ID)
    return GENERAL_TOPIC_ID


def _sender(
    message: Any, chat: ExportChat, self_id: int | None
) -> tuple[int | None, str | None, str]:
    marked = message.sender_id
    if marked is None and message.out and self_id is not None:
        marked = self_id
    if marked is None:
        return None, None, ""
    entity = message.sender
    if entity is not None:
        name = utils.get_display_name(entity)
    elif marked == chat.chat_id:
        name = chat.title
    else:
        name = ""
    return utils.resolve_id(marked)[0], _marked_kind(marked), name


def _reply(reply: Any) -> tuple[int | None, int | None]:
    """``(replied message id, marked id of its chat when another)`` of a reply header."""
    if not isinstance(reply, types.MessageReplyHeader):
        return None, None
    peer = reply.reply_to_peer_id
    return reply.reply_to_msg_id, utils.get_peer_id(peer) if peer is not None else None


def _forward(message: Any) -> tuple[str | None, int | None, str | None]:
    fwd = message.fwd_from
    if fwd is None:
        return None, None, None
    name = fwd.from_name
    forward = message.forward
    if not name and forward is not None:
        origin = forward.sender or forward.chat
        name = utils.get_display_name(origin) if origin is not None else None
    if not name and fwd.post_author:
        name = fwd.post_author
    origin_id = utils.get_peer_id(fwd.from_id) if fwd.from_id is not None else None
    return name or None, origin_id, fwd.saved_from_name or None


def to_records(message: Any, chat: ExportChat, *, self_id: int | None = None) -> ExportMessage:
    """Convert a real Telethon ``Message`` / ``MessageService`` of ``chat`` into its record.

    Args:
        message: a message as Telethon returns it (sender and forward entities attached).
        chat: the record of the chat the message is in (its ``peer_id``).
        self_id: the signed-in user's id, the sender of outgoing messages without ``from_id``.

    Raises:
        TypeError: ``message`` is not a Telethon message (``MessageEmpty`` included).
        ValueError: the message belongs to another chat than ``chat``.
    """
    if not isinstance(message, types.Message | types.MessageService):
        raise TypeError(f"not a Telethon message: {type(message).__name__}")
    if utils.get_peer_id(message.peer_id) != chat.chat_id:
        raise ValueError(f"message {message.id} is not in chat {chat.chat_id}")
    service = isinstance(message, types.MessageService)
    text = (getattr(message, "message", None) or "") if not service else ""
    entities = _entities(text, getattr(message, "entities", None))
    has_link = any(e["type"] in ("link", "text_link") for e in entities) or bool(
        text and _URL_RE.search(text)
    )
    buttons, url_button = _buttons(getattr(message, "reply_markup", None))
    media_obj = getattr(message, "media", None)
    has_link = has_link or url_button or isinstance(media_obj, types.MessageMediaWebPage)
    reply = message.reply_to
    reply_to_msg_id, reply_peer = _reply(reply)
    sender_id, sender_kind, sender_name = _sender(message, chat, self_id)
    forwarded_from, forwarded_from_id, saved_from = (
        _forward(message) if not service else (None, None, None)
    )
    action_name, action_extra = _service(message) if service else (None, {})
    via = message.via_bot if not service else None
    reactions = _reactions(getattr(message, "reactions", None))
    edit_date = getattr(message, "edit_date", None)
    if getattr(message, "edit_hide", False):
        edit_date = None
    return ExportMessage(
        chat_id=chat.chat_id,
        msg_id=int(message.id),
        date=int(message.date.timestamp()),
        kind="service" if service else "message",
        edit_date=int(edit_date.timestamp()) if edit_date is not None else None,
        sender_id=sender_id,
        sender_kind=sender_kind,
        sender_name=sender_name,
        text=text,
        entities=entities,
        reply_to_msg_id=reply_to_msg_id,
        reply_to_peer_id=reply_peer,
        topic_id=_topic(message, reply, chat),
        forwarded_from=forwarded_from,
        forwarded_from_id=forwarded_from_id,
        saved_from=saved_from if chat.type == "saved" else None,
        via_bot=f"@{via.username}" if via is not None and getattr(via, "username", None) else None,
        author=getattr(message, "post_author", None) if not service else None,
        reactions=reactions,
        reactions_total=sum(reactions.values()),
        service_action=action_name,
        service_extra=action_extra,
        media=None if service else message_media(media_obj),
        has_link=has_link,
        buttons=buttons,
        raw_type="service" if service else "message",
        grouped_id=getattr(message, "grouped_id", None) if not service else None,
    )
