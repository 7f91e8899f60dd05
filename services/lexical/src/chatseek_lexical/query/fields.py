"""The field registry of the strict query language: names, value kinds and allowed leaf types.

Invariants:
* Field names are case-sensitive; anything not listed here is an ``UnknownField``.
* ``FIELDS_VERSION`` changes whenever a field, a value or a meaning below changes.
* ``leaves`` lists the leaf types a field accepts; any other leaf type on that field is an
  ``InvalidValue`` naming the field (comparisons only on ``date`` and ``size``).
* Enum values are the complete lists; ``in`` also accepts ``telegram/<account>``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from chatseek_lexical.query.presets import PRESET_NAMES

__all__ = [
    "DEFAULT_FIELD",
    "FIELDS",
    "FIELDS_VERSION",
    "HAS_VALUES",
    "KIND_VALUES",
    "PROVIDERS",
    "FieldKind",
    "FieldSpec",
    "close_fields",
]

FIELDS_VERSION = 1
DEFAULT_FIELD = "text"

KIND_VALUES = ("private", "saved", "bot", "service", "group", "channel", "unknown")
HAS_VALUES = (
    "attachment",
    "link",
    "file",
    "photo",
    "image",
    "video",
    "audio",
    "voice",
    "sticker",
    "contact",
    "location",
    "poll",
)
PROVIDERS = ("telegram",)
IN_ALL = "all"

_TEXTUAL = frozenset({"term", "phrase", "prefix", "wildcard", "regex", "range"})
_ORDERED = frozenset({"term", "phrase", "range", "compare"})
_ENUM = frozenset({"enum"})


class FieldKind(enum.Enum):
    """How a field's values are interpreted."""

    WORDS = "words"
    KEYWORD = "keyword"
    NAME = "name"
    DATE = "date"
    ENUM = "enum"
    TOPIC = "topic"
    SIZE = "size"


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field: its kind, the leaf types it takes and, for enums, its values."""

    name: str
    kind: FieldKind
    leaves: frozenset[str]
    values: tuple[str, ...] = ()
    slash_values: bool = False
    description: str = ""


FIELDS: Mapping[str, FieldSpec] = MappingProxyType(
    {
        "text": FieldSpec(
            "text",
            FieldKind.WORDS,
            _TEXTUAL,
            description="normalised words of the text, file name and extracted media text",
        ),
        "body": FieldSpec(
            "body",
            FieldKind.KEYWORD,
            _TEXTUAL,
            description="the original message text as one case-sensitive value",
        ),
        "from": FieldSpec(
            "from", FieldKind.NAME, _TEXTUAL, description="sender name, @username, id"
        ),
        "chat": FieldSpec(
            "chat", FieldKind.NAME, _TEXTUAL, description="chat title, @username, id"
        ),
        "date": FieldSpec("date", FieldKind.DATE, _ORDERED, description="message date"),
        "kind": FieldSpec("kind", FieldKind.ENUM, _ENUM, values=KIND_VALUES),
        "has": FieldSpec("has", FieldKind.ENUM, _ENUM, values=HAS_VALUES),
        "topic": FieldSpec("topic", FieldKind.TOPIC, frozenset({"term", "phrase"})),
        "in": FieldSpec(
            "in", FieldKind.ENUM, _ENUM, values=(IN_ALL, *PROVIDERS), slash_values=True
        ),
        "preset": FieldSpec("preset", FieldKind.ENUM, _ENUM, values=PRESET_NAMES),
        "filename": FieldSpec("filename", FieldKind.KEYWORD, _TEXTUAL),
        "mime": FieldSpec("mime", FieldKind.KEYWORD, _TEXTUAL, slash_values=True),
        "size": FieldSpec("size", FieldKind.SIZE, _ORDERED),
        "tag": FieldSpec("tag", FieldKind.KEYWORD, _TEXTUAL),
    }
)


def close_fields(name: str) -> list[str]:
    """Known field names that differ from ``name`` only in case (for error candidates)."""
    folded = name.casefold()
    return [known for known in FIELDS if known.casefold() == folded]
