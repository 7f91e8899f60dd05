"""Deep links and qualified locators for messages, per chat type.

* public chats (with a username): ``https://t.me/<username>/<msg>`` (forums: ``/<topic>/<msg>``);
* private supergroups and channels: ``https://t.me/c/<id>/<msg>`` where ``<id>`` is the marked id
  without its ``-100`` prefix (forums: ``/c/<id>/<topic>/<msg>``);
* private chats (users, bots, saved): ``tg://openmessage?user_id=…&message_id=…`` with
  ``tg://user?id=…`` as the fallback;
* legacy groups: ``tg://openmessage?chat_id=…&message_id=…``.
Every message also has the stable locator ``tg:<account>/<chat_id>/<msg_id>``.
"""

from __future__ import annotations

import re

from chatseek_core.errors import InvalidValue

__all__ = ["CHANNEL_ID_OFFSET", "deep_link", "locator", "parse_locator"]

CHANNEL_ID_OFFSET = 10**12
_LOCATOR = re.compile(r"tg:([^/\s]+)/(-?\d+)/(-?\d+)")
_FORUM_GENERAL_TOPIC = 1


def deep_link(
    chat_type: str,
    chat_id: int,
    username: str | None,
    msg_id: int,
    topic_id: int | None = None,
) -> tuple[str, str | None]:
    """The link that opens ``msg_id`` in Telegram, and a fallback link (or None).

    Args:
        chat_type: private, saved, bot, group, supergroup, forum or channel.
        chat_id: the marked chat id.
        username: the chat's public username, if any.
        msg_id: the message id within the chat.
        topic_id: the forum topic (its root message id), for forums.
    """
    in_topic = chat_type == "forum" and topic_id not in (None, 0, _FORUM_GENERAL_TOPIC)
    if chat_type in ("private", "saved", "bot") or (chat_id > 0 and not username):
        return (
            f"tg://openmessage?user_id={chat_id}&message_id={msg_id}",
            f"tg://user?id={chat_id}",
        )
    if username:
        path = f"{topic_id}/{msg_id}" if in_topic else str(msg_id)
        return f"https://t.me/{username}/{path}", None
    if chat_id <= -CHANNEL_ID_OFFSET:
        bare = -chat_id - CHANNEL_ID_OFFSET
        path = f"{topic_id}/{msg_id}" if in_topic else str(msg_id)
        return f"https://t.me/c/{bare}/{path}", None
    return f"tg://openmessage?chat_id={-chat_id}&message_id={msg_id}", None


def locator(account: str, chat_id: int, msg_id: int) -> str:
    """The qualified, stable locator of a message."""
    return f"tg:{account}/{chat_id}/{msg_id}"


def parse_locator(text: str) -> tuple[str, int, int]:
    """``(account, chat_id, msg_id)`` of a locator.

    Raises:
        InvalidValue: not of the form ``tg:<account>/<chat_id>/<msg_id>``.
    """
    match = _LOCATOR.fullmatch(text.strip())
    if match is None:
        raise InvalidValue(
            f"{text!r} is not a message locator",
            hint="locators look like tg:default/-1001234567890/42",
            metadata={"field": "locator"},
        )
    return match.group(1), int(match.group(2)), int(match.group(3))
