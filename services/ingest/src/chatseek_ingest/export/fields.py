"""Readers of message fields: each returns the value or raises ``BadField``.

A ``BadField`` skips its message with a warning; it never aborts the export.
"""

from __future__ import annotations

import calendar
from datetime import datetime
from typing import Any

__all__ = [
    "MAX_DIGITS",
    "MAX_UNIXTIME",
    "SUPERGROUP_ID_OFFSET",
    "BadField",
    "clipped",
    "marked_id",
    "need_str",
    "opt_int",
    "opt_str",
    "parse_buttons",
    "parse_digits",
    "parse_peer",
    "parse_reactions",
    "parse_text",
    "parse_unix",
    "runs_text",
]

# Ids and unix times written as strings: enough digits for any of them, few enough that the
# marked id of a channel still fits SQLite's 64-bit integers.
MAX_DIGITS = 18
# 9999-12-31T23:59:59Z, the last second a date can be shown; earlier than 1970 is no message.
MAX_UNIXTIME = 253_402_300_799
MAX_QUOTED_CHARS = 64
SUPERGROUP_ID_OFFSET = 1_000_000_000_000


class BadField(Exception):
    """A message field of the wrong shape; the message is skipped with a warning."""


def parse_digits(text: str) -> int | None:
    """The value of ``text`` when it is at most ``MAX_DIGITS`` ASCII digits, else ``None``."""
    if len(text) <= MAX_DIGITS and text.isascii() and text.isdigit():
        return int(text)
    return None


def _in_range(unixtime: int, name: str) -> int:
    if not 0 <= unixtime <= MAX_UNIXTIME:
        raise BadField(f"'{name}' is out of range")
    return unixtime


def parse_unix(unixtime: object, iso: object, name: str) -> int | None:
    """Unix seconds from ``<name>_unixtime`` or else the ISO ``<name>``; None when neither."""
    if unixtime is not None:
        value = parse_digits(unixtime) if type(unixtime) is str else unixtime
        if type(value) is not int:
            raise BadField(f"'{name}_unixtime' is not a number")
        return _in_range(value, f"{name}_unixtime")
    if iso is None:
        return None
    if type(iso) is not str:
        raise BadField(f"'{name}' is not a date string")
    try:
        stamp = datetime.fromisoformat(iso)
    except ValueError:
        raise BadField(f"'{name}' is not an ISO date") from None
    if stamp.tzinfo is None:
        return _in_range(calendar.timegm(stamp.timetuple()), name)
    return _in_range(int(stamp.timestamp()), name)


def parse_peer(value: object, name: str) -> tuple[str | None, int | None]:
    """``user123`` / ``channel123`` / ``chat123`` / a bare number -> (kind, bare id)."""
    if value is None:
        return None, None
    if type(value) is int:
        return "user", value
    if type(value) is str:
        if value.startswith("user"):
            kind, digits = "user", value[4:]
        elif value.startswith("channel"):
            kind, digits = "channel", value[7:]
        elif value.startswith("chat"):
            kind, digits = "chat", value[4:]
        else:
            kind, digits = "user", value
        bare = parse_digits(digits)
        if bare is not None:
            return kind, bare
    raise BadField(f"'{name}' is not a peer id")


def marked_id(kind: str | None, bare: int | None) -> int | None:
    """The marked id of a ``parse_peer`` result (None stays None)."""
    if bare is None:
        return None
    if kind == "channel":
        return -(SUPERGROUP_ID_OFFSET + bare)
    if kind == "chat":
        return -bare
    return bare


def opt_str(value: object, name: str) -> str | None:
    """``value`` when it is a string or None."""
    if value is None or type(value) is str:
        return value
    raise BadField(f"'{name}' is not a string")


def opt_int(value: object, name: str) -> int | None:
    """``value`` when it is an integer or None."""
    if value is None or type(value) is int:
        return value
    raise BadField(f"'{name}' is not an integer")


def need_str(value: object, name: str) -> str:
    """``value`` when it is a string."""
    if type(value) is not str:
        raise BadField(f"'{name}' is not a string")
    return value


def parse_text(entities: object, text: object) -> tuple[str, list[dict[str, Any]], bool]:
    """Plain text, entities and whether a link entity is present, from runs or a string."""
    if type(text) is str and (
        type(entities) is not list
        or not entities
        or (len(entities) == 1 and type(entities[0]) is dict and entities[0].get("type") == "plain")
    ):
        return text, [], False
    runs = entities if type(entities) is list and entities else text
    if type(runs) is str:
        return runs, [], False
    if runs is None or (type(runs) is list and not runs):
        return "", [], False
    if type(runs) is not list:
        raise BadField("'text' is neither a string nor a list of runs")
    parts: list[str] = []
    out: list[dict[str, Any]] = []
    link = False
    for run in runs:
        if type(run) is str:
            parts.append(run)
            continue
        if type(run) is not dict:
            raise BadField("a text run is neither a string nor an object")
        piece = run.get("text", "")
        kind = run.get("type", "plain")
        if type(piece) is not str or type(kind) is not str:
            raise BadField("a text run has a non-string 'type' or 'text'")
        parts.append(piece)
        if kind == "plain":
            continue
        entity: dict[str, Any] = {"type": kind, "text": piece}
        if kind == "link":
            entity["href"] = piece
            link = True
        elif kind == "text_link":
            href = run.get("href")
            if type(href) is str:
                entity["href"] = href
            link = True
        elif kind == "mention_name":
            user_id = run.get("user_id")
            if type(user_id) is int:
                entity["user_id"] = user_id
            elif type(user_id) is str and parse_digits(user_id) is not None:
                entity["user_id"] = int(user_id)
        elif kind == "custom_emoji":
            document_id = run.get("document_id")
            if document_id is not None:
                entity["document_id"] = str(document_id)
        elif kind == "pre":
            language = run.get("language")
            if type(language) is str and language:
                entity["language"] = language
        out.append(entity)
    return "".join(parts), out, link


def runs_text(value: object, name: str) -> str:
    """A string that newer exports may write as a list of text runs (poll questions)."""
    if value is None:
        return ""
    return parse_text(None, value)[0] if type(value) is list else need_str(value, name)


def parse_reactions(value: object) -> dict[str, int]:
    """Reaction counts by emoji (``custom:<id>`` for custom ones)."""
    if value is None:
        return {}
    if type(value) is not list:
        raise BadField("'reactions' is not a list")
    out: dict[str, int] = {}
    for reaction in value:
        if type(reaction) is not dict:
            raise BadField("a reaction is not an object")
        count = reaction.get("count")
        kind = reaction.get("type")
        if type(count) is not int or type(kind) is not str:
            raise BadField("a reaction lacks an integer 'count' or a 'type'")
        if kind == "emoji":
            key = reaction.get("emoji")
            if type(key) is not str:
                raise BadField("an emoji reaction lacks its 'emoji'")
        elif kind == "custom_emoji":
            key = f"custom:{reaction.get('document_id')}"
        else:
            key = kind
        out[key] = out.get(key, 0) + count
    return out


def parse_buttons(value: object) -> tuple[list[list[dict[str, Any]]], bool]:
    """The inline keyboard's rows, and whether a button opens a URL."""
    if value is None:
        return [], False
    if type(value) is not list:
        raise BadField("'inline_bot_buttons' is not a list of rows")
    rows: list[list[dict[str, Any]]] = []
    url = False
    for row in value:
        if type(row) is not list:
            raise BadField("an inline button row is not a list")
        out: list[dict[str, Any]] = []
        for button in row:
            if type(button) is not dict:
                raise BadField("an inline button is not an object")
            kind = button.get("type", "")
            label = button.get("text", "")
            if type(kind) is not str or type(label) is not str:
                raise BadField("an inline button has a non-string 'type' or 'text'")
            entry: dict[str, Any] = {"type": kind, "text": label}
            data = button.get("data")
            if data is not None:
                entry["data"] = data
                url = url or (kind == "url" and type(data) is str)
            if "button_id" in button:
                entry["button_id"] = button["button_id"]
            out.append(entry)
        rows.append(out)
    return rows, url


def clipped(value: str | None) -> str | None:
    """``value`` short enough to quote in a warning (a hostile file may hold megabytes)."""
    if value is None or len(value) <= MAX_QUOTED_CHARS:
        return value
    return value[:MAX_QUOTED_CHARS] + "…"
