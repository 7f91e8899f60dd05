"""The tools' arguments: their annotated types and the validators that enforce them.

A type's ``Field`` gives an agent the description and the advertised bounds (``minimum``,
``maxItems``, ``enum``); the validators enforce the same bounds on every call, since a client
may send anything. A failed check raises ``InvalidArgument`` naming the field in its metadata.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field

from chatseek_core.errors import InvalidArgument
from chatseek_core.limits import MAX_QUERY_BYTES

__all__ = [
    "MAX_ANSWERS",
    "MAX_BOUND_CHARS",
    "MAX_CHATS",
    "MAX_QUESTION_CHARS",
    "MAX_SPEC_CHARS",
    "MESSAGE_SOURCES",
    "NEW_CONVERSATION",
    "ChatSpec",
    "ChatSpecs",
    "LuceneText",
    "LuceneTree",
    "MessagesSource",
    "MsgId",
    "Question",
    "Since",
    "Timezone",
    "Until",
    "answers_json",
    "bounded_int",
    "checked_text",
    "choice",
    "float_range",
    "int_range",
    "invalid",
    "lucene",
    "spec",
    "specs",
]

MAX_QUESTION_CHARS = 2000
MAX_TREE_BYTES = 256 * 1024
MAX_SPEC_CHARS = 256
MAX_CHATS = 50
MAX_BOUND_CHARS = 64
MAX_ANSWERS = 500
MESSAGE_SOURCES = ("active", "all")
NEW_CONVERSATION = "new"

# --- argument types (descriptions and advertised bounds; enforced by the validators below) ---

Question = Annotated[str, Field(description="what to look for, in natural language")]
ChatSpec = Annotated[
    int | str,
    Field(description="one chat: id as results give it, @username, t.me link or title"),
]
ChatSpecs = Annotated[
    list[int | str] | None,
    Field(
        description="restrict to these chats: ids, @usernames, t.me links, folder:<name>, "
        "import:<slug> or titles",
        json_schema_extra={"maxItems": MAX_CHATS},
    ),
]
Since = Annotated[
    str | None,
    Field(
        description="lower bound: ISO date or datetime, month (2026-03) or age before now: "
        "30m (minutes), 12h, 7d, 3w, 6M (months), 1y"
    ),
]
Until = Annotated[str | None, Field(description="inclusive upper bound, same forms as since")]
MsgId = Annotated[int, Field(description="the message id within its chat")]
LuceneText = Annotated[
    str | None,
    Field(
        description="a Lucene-syntax query, e.g. invoice AND has:file AND date>=30d "
        "(give this or tree, not both)"
    ),
]
LuceneTree = Annotated[
    dict[str, Any] | None,
    Field(
        description='the parsed tree instead of text: {"version": 1, "language": "lucene-v1", '
        '"root": {...}}'
    ),
]
MessagesSource = Annotated[
    str,
    Field(
        description="active: the active account's chats; all: every account in the store",
        json_schema_extra={"enum": list(MESSAGE_SOURCES)},
    ),
]
Timezone = Annotated[
    str | None,
    Field(description="IANA timezone for calendar days, e.g. Europe/Madrid (default: system's)"),
]


def bounded_int(description: str, low: int, high: int) -> Any:
    """The ``Field`` of an integer argument advertised as ``low..high``."""
    return Field(description=description, json_schema_extra={"minimum": low, "maximum": high})


# --- validation ---


def invalid(field_name: str, message: str, hint: str) -> InvalidArgument:
    """The ``InvalidArgument`` for one argument, naming it in its metadata."""
    return InvalidArgument(message, hint=hint, metadata={"field": field_name})


def checked_text(
    field_name: str, value: str | None, max_chars: int, *, required: bool = True
) -> str:
    """``value`` stripped; empty (when not required) or at most ``max_chars`` characters."""
    text = (value or "").strip()
    if required and not text:
        raise invalid(field_name, f"{field_name} is empty", f"pass a non-empty {field_name}")
    if len(text) > max_chars:
        raise invalid(
            field_name,
            f"{field_name} is {len(text)} characters long; the limit is {max_chars}",
            f"shorten {field_name}",
        )
    return text


def spec(field_name: str, value: int | str) -> str:
    """One chat (or locator, or target) as the gateway takes it: non-empty text."""
    return checked_text(field_name, str(value), MAX_SPEC_CHARS)


def specs(field_name: str, values: list[int | str] | None, limit: int = MAX_CHATS) -> list[str]:
    """At most ``limit`` specs, each checked as ``spec``."""
    items = list(values or [])
    if len(items) > limit:
        raise invalid(
            field_name,
            f"{field_name} lists {len(items)} entries; the limit is {limit}",
            f"pass at most {limit}, or leave {field_name} out to search everything",
        )
    return [spec(field_name, item) for item in items]


def int_range(field_name: str, value: int, low: int, high: int) -> int:
    """``value`` when it lies in ``low..high``."""
    if not low <= value <= high:
        raise invalid(
            field_name,
            f"{field_name}={value} is outside {low}..{high}",
            f"pass {field_name} between {low} and {high}",
        )
    return value


def float_range(field_name: str, value: float, low: float, high: float) -> float:
    """``value`` when it lies in ``low..high``."""
    if not low <= value <= high:
        raise invalid(
            field_name,
            f"{field_name}={value:g} is outside {low:g}..{high:g}",
            f"pass {field_name} between {low:g} and {high:g}",
        )
    return value


def choice(field_name: str, value: str, choices: tuple[str, ...]) -> str:
    """``value`` when it is one of ``choices``."""
    if value not in choices:
        raise invalid(
            field_name,
            f"{field_name}={value!r} is not one of {', '.join(choices)}",
            f"pass {field_name} as one of {', '.join(choices)}",
        )
    return value


def lucene(query: str | None, tree: dict[str, Any] | None) -> tuple[str, str]:
    """The (query text, tree JSON) pair of a strict search; exactly one is non-empty."""
    if (query is None or not query.strip()) == (tree is None):
        raise invalid(
            "query",
            "pass exactly one of query (Lucene text) and tree (its parsed form)",
            "use query for text such as `invoice AND has:file`",
        )
    if tree is not None:
        tree_json = json.dumps(tree, ensure_ascii=False)
        if len(tree_json.encode()) > MAX_TREE_BYTES:
            raise invalid(
                "tree",
                f"tree is {len(tree_json.encode())} bytes of JSON; the limit is {MAX_TREE_BYTES}",
                "send a smaller query",
            )
        return "", tree_json
    text = (query or "").strip()
    size = len(text.encode())
    if size > MAX_QUERY_BYTES:
        raise invalid(
            "query",
            f"query is {size} bytes long; the limit is {MAX_QUERY_BYTES}",
            "shorten the query or split it into several",
        )
    return text, ""


def answers_json(answers: list[dict[str, Any]]) -> str:
    """The ``answer_json`` of a link batch answer, checked entry by entry."""
    if not answers:
        raise invalid("answers", "answers is empty", "answer at least one message of the batch")
    if len(answers) > MAX_ANSWERS:
        raise invalid(
            "answers",
            f"answers lists {len(answers)} entries; the limit is {MAX_ANSWERS}",
            f"answer at most {MAX_ANSWERS} messages per call",
        )
    clean: list[dict[str, Any]] = []
    for index, entry in enumerate(answers):
        msg_id = entry.get("msg_id")
        parent = entry.get("parent")
        valid_msg = isinstance(msg_id, int) and not isinstance(msg_id, bool) and msg_id > 0
        valid_parent = parent == NEW_CONVERSATION or (
            isinstance(parent, int) and not isinstance(parent, bool) and parent > 0
        )
        if not (valid_msg and valid_parent):
            raise invalid(
                "answers",
                f"answers[{index}] is not {{msg_id: positive integer, parent: message id or "
                f"{NEW_CONVERSATION!r}}}",
                f"give each answer a msg_id from the batch and a parent id or {NEW_CONVERSATION!r}",
            )
        clean.append({"msg_id": msg_id, "parent": parent})
    return json.dumps({"answers": clean})
