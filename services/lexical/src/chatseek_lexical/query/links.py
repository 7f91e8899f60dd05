"""Deep links to a message, by chat type (DESIGN.md section 4).

Invariants:
* A chat with a public username links as ``https://t.me/<username>/<msg>`` (forum topics as
  ``https://t.me/<username>/<topic>/<msg>``); private chats, bots and Saved Messages never do.
* A private supergroup, forum or channel links as ``https://t.me/c/<id without -100>/<msg>``,
  with the topic inserted for forum topics other than General.
* A private chat links as ``tg://openmessage?user_id=…&message_id=…`` with ``tg://user?id=…``
  as the fallback; a legacy group as ``tg://openmessage?chat_id=…&message_id=…``.
"""

from __future__ import annotations

__all__ = ["GENERAL_TOPIC", "MARKED_CHANNEL_BASE", "deep_link", "locator"]

MARKED_CHANNEL_BASE = 10**12
GENERAL_TOPIC = 1
_PERSONAL = frozenset({"private", "bot", "saved"})
_CHANNEL_LIKE = frozenset({"supergroup", "forum", "channel"})


def _channel_id(chat_id: int) -> int:
    if chat_id <= -MARKED_CHANNEL_BASE:
        return -chat_id - MARKED_CHANNEL_BASE
    return abs(chat_id)


def deep_link(
    chat_type: str, chat_id: int, username: str | None, msg_id: int, topic_id: int | None
) -> tuple[str, str | None]:
    """The link that opens message ``msg_id`` and a fallback link (or None).

    Args:
        chat_type: ``private``, ``saved``, ``bot``, ``group``, ``supergroup``, ``forum`` or
            ``channel`` (ingest's chat types).
        chat_id: the marked chat id (``-100…`` for channels and supergroups).
        username: the chat's public username, without ``@``, or None.
        msg_id: the message id within the chat.
        topic_id: the forum topic id, or None.
    """
    topic = topic_id if chat_type == "forum" and topic_id and topic_id != GENERAL_TOPIC else None
    if chat_type in _PERSONAL:
        return (
            f"tg://openmessage?user_id={chat_id}&message_id={msg_id}",
            f"tg://user?id={chat_id}",
        )
    if username and chat_type in _CHANNEL_LIKE:
        middle = f"/{topic}" if topic else ""
        return f"https://t.me/{username}{middle}/{msg_id}", None
    if chat_type in _CHANNEL_LIKE:
        middle = f"/{topic}" if topic else ""
        return f"https://t.me/c/{_channel_id(chat_id)}{middle}/{msg_id}", None
    return f"tg://openmessage?chat_id={abs(chat_id)}&message_id={msg_id}", None


def locator(account: str, chat_id: int, msg_id: int) -> str:
    """The stable qualified locator ``tg:<account>/<chat_id>/<msg_id>``."""
    return f"tg:{account}/{chat_id}/{msg_id}"
