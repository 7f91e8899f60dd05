"""Deep links per chat type and the qualified locator."""

from __future__ import annotations

import pytest

from chatseek_lexical.query import deep_link, locator


@pytest.mark.parametrize(
    ("chat_type", "chat_id", "username", "msg_id", "topic", "link", "fallback"),
    [
        ("channel", -1001234567890, "durov", 42, None, "https://t.me/durov/42", None),
        ("supergroup", -1001234567890, "expats", 7, None, "https://t.me/expats/7", None),
        ("forum", -1001234567890, "expats", 7, 3, "https://t.me/expats/3/7", None),
        ("channel", -1001234567890, None, 42, None, "https://t.me/c/1234567890/42", None),
        ("supergroup", -1001234567890, None, 5, None, "https://t.me/c/1234567890/5", None),
        ("forum", -1001234567890, None, 5, 10, "https://t.me/c/1234567890/10/5", None),
        ("forum", -1001234567890, None, 5, 1, "https://t.me/c/1234567890/5", None),
        ("forum", -1001234567890, None, 5, None, "https://t.me/c/1234567890/5", None),
        ("supergroup", -1001234567890, None, 5, 10, "https://t.me/c/1234567890/5", None),
        (
            "private",
            777,
            "bob",
            9,
            None,
            "tg://openmessage?user_id=777&message_id=9",
            "tg://user?id=777",
        ),
        (
            "bot",
            93372553,
            "botfather",
            3,
            None,
            "tg://openmessage?user_id=93372553&message_id=3",
            "tg://user?id=93372553",
        ),
        ("saved", 42, None, 1, None, "tg://openmessage?user_id=42&message_id=1", "tg://user?id=42"),
        (
            "group",
            -4000000001,
            None,
            2,
            None,
            "tg://openmessage?chat_id=4000000001&message_id=2",
            None,
        ),
    ],
)
def test_deep_link_follows_the_chat_type(
    chat_type: str,
    chat_id: int,
    username: str | None,
    msg_id: int,
    topic: int | None,
    link: str,
    fallback: str | None,
) -> None:
    assert deep_link(chat_type, chat_id, username, msg_id, topic) == (link, fallback)


def test_locator_qualifies_account_chat_and_message() -> None:
    assert locator("me", -1001234567890, 42) == "tg:me/-1001234567890/42"
