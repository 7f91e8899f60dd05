"""Values of the ``size``, ``topic`` and ``in`` fields.

Invariants:
* Sizes are bytes with 1024-based units (``b``, ``kb``/``kib``/``k``, ``mb``…, ``tb``), any
  case, optional decimals (``1.5MB``); the result is rounded to whole bytes.
* A topic is a positive integer (the forum topic id).
* ``in`` is ``all``, a provider (``telegram``) or ``provider/account``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chatseek_lexical.query.fields import IN_ALL, PROVIDERS

__all__ = ["MAX_SIZE_BYTES", "ScopeValue", "parse_in", "parse_size", "parse_topic"]

KIB = 1024
MAX_SIZE_BYTES = 2**62
MAX_TOPIC = 2**53
UNIT_POWERS = {
    "": 0,
    "b": 0,
    "k": 1,
    "kb": 1,
    "kib": 1,
    "m": 2,
    "mb": 2,
    "mib": 2,
    "g": 3,
    "gb": 3,
    "gib": 3,
    "t": 4,
    "tb": 4,
    "tib": 4,
}
_SIZE = re.compile(r"^(\d{1,15}(?:\.\d{1,6})?)\s*([A-Za-z]*)$")


@dataclass(frozen=True, slots=True)
class ScopeValue:
    """A parsed ``in:`` value: ``provider`` and ``account`` are None for ``all``."""

    provider: str | None
    account: str | None


def parse_size(text: str) -> int:
    """Bytes for ``10MB``, ``512k``, ``1.5GiB``, ``2048``.

    Raises:
        ValueError: not a number with an optional known unit.
    """
    found = _SIZE.match(text.strip())
    if not found or found.group(2).lower() not in UNIT_POWERS:
        raise ValueError(f"{text!r} is not a size: use 2048, 512KB, 10MB or 1.5GB (1024-based)")
    number = float(found.group(1))
    value = int(round(number * KIB ** UNIT_POWERS[found.group(2).lower()]))
    if value > MAX_SIZE_BYTES:
        raise ValueError(f"{text!r} is larger than any file")
    return value


def parse_topic(text: str) -> int:
    """The topic id in ``text``.

    Raises:
        ValueError: not a positive integer.
    """
    value = text.strip()
    if not value.isascii() or not value.isdigit() or not 0 < int(value) <= MAX_TOPIC:
        raise ValueError(f"{text!r} is not a topic id: use the topic's number, e.g. topic:42")
    return int(value)


def parse_in(text: str) -> ScopeValue:
    """Parse ``all``, ``telegram`` or ``telegram/<account>``.

    Raises:
        ValueError: an unknown provider or an empty account.
    """
    value = text.strip()
    if value.lower() == IN_ALL:
        return ScopeValue(None, None)
    provider, _, account = value.partition("/")
    provider = provider.lower()
    if provider not in PROVIDERS:
        raise ValueError(
            f'{text!r} is not a scope: use in:all, in:telegram or in:"telegram/<account>"'
        )
    if "/" in value and not account:
        raise ValueError(f"{text!r} names no account after the slash")
    return ScopeValue(provider, account or None)
