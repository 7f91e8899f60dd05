"""Deep links per chat type, and locators."""

from __future__ import annotations

import pytest

from chatseek_core.errors import InvalidValue
from chatseek_core.links import deep_link, locator, parse_locator


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("supergroup", -1001234567890, "expats", 42, None), ("https://t.me/expats/42", None)),
        (("supergroup", -1001234567890, None, 42, None), ("https://t.me/c/1234567890/42", None)),
        (("forum", -1001234567890, None, 42, 7), ("https://t.me/c/1234567890/7/42", None)),
        (("forum", -1001234567890, "city", 42, 7), ("https://t.me/city/7/42", None)),
        (("forum", -1001234567890, None, 42, 1), ("https://t.me/c/1234567890/42", None)),
        (("channel", -1009876543210, None, 5, None), ("https://t.me/c/9876543210/5", None)),
        (
            ("private", 555, None, 9, None),
            ("tg://openmessage?user_id=555&message_id=9", "tg://user?id=555"),
        ),
        (("group", -4242, None, 3, None), ("tg://openmessage?chat_id=4242&message_id=3", None)),
    ],
)
def test_each_chat_type_gets_its_deep_link(
    args: tuple[str, int, str | None, int, int | None], expected: tuple[str, str | None]
) -> None:
    assert deep_link(*args) == expected


def test_a_locator_round_trips() -> None:
    text = locator("default", -1001234567890, 42)
    assert text == "tg:default/-1001234567890/42"
    assert parse_locator(text) == ("default", -1001234567890, 42)


def test_a_malformed_locator_is_an_invalid_value() -> None:
    with pytest.raises(InvalidValue):
        parse_locator("t.me/x/1")
