"""The one text form of an instant and the one grammar of a relative date (an age).

Invariants:
* ``iso_utc`` is how every response writes unix seconds: ``2026-03-29T10:00:00Z``.
* An age is ``[-]<n><unit>``, counted back from now, with Elasticsearch's date-math units:
  ``s`` seconds, ``m`` (or ``min``) minutes, ``h`` hours, ``d`` days, ``w`` weeks, ``M``
  months, ``y`` years. ``m`` is minutes and ``M`` months in every caller (the CLI's
  ``--since``, the MCP tools, the strict ``date`` field); every other unit ignores case.
* Months and years step the calendar back (the day clamped to the month's length, in the
  zone of the ``now`` given); the other units are fixed numbers of seconds.
* Text shaped like an age whose unit is none of these (``6mo``, ``3x``) is a ``ValueError``
  that lists the units, never some other reading of it.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["AGE_UNITS_HELP", "MAX_AGE_SECONDS", "Age", "iso_utc", "parse_age"]

MAX_AGE_SECONDS = 200 * 366 * 86400
"""The furthest back an age may reach (about 200 years)."""
AGE_UNITS_HELP = "s, m (minutes), h, d, w, M (months), y"
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_MONTHS = {"M": 1, "y": 12}
_LONGEST_MONTH_S = 31 * 86400
_ALIASES = {"min": "m"}
_AGE_SHAPE = re.compile(r"-?(\d{1,9})([A-Za-z]+)")


def iso_utc(ts: int) -> str:
    """``2026-03-29T10:00:00Z`` for unix seconds ``ts``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


@dataclass(frozen=True, slots=True)
class Age:
    """A parsed age: ``amount`` of the canonical ``unit`` (one of s m h d w M y)."""

    amount: int
    unit: str

    @property
    def seconds(self) -> int | None:
        """The age in seconds for the fixed units; None for months and years."""
        per = _SECONDS.get(self.unit)
        return None if per is None else self.amount * per

    def before(self, now: datetime) -> datetime:
        """The instant this age before ``now``, in ``now``'s zone.

        Raises:
            ValueError: the result falls outside the calendar datetime can hold.
        """
        fixed = self.seconds
        try:
            if fixed is not None:
                return now - timedelta(seconds=fixed)
            months = self.amount * _MONTHS[self.unit]
            year, month = divmod(now.year * 12 + now.month - 1 - months, 12)
            month += 1
            day = min(now.day, calendar.monthrange(year, month)[1])
            return now.replace(year=year, month=month, day=day)
        except (OverflowError, ValueError):
            raise ValueError(f"{self.amount}{self.unit} reaches too far back") from None


def _canonical(unit: str) -> str | None:
    if unit in ("m", "M"):
        return unit
    lowered = _ALIASES.get(unit.lower(), unit.lower())
    return lowered if lowered in _SECONDS or lowered == "y" else None


def parse_age(text: str) -> Age | None:
    """The age ``text`` denotes, or None when it is not shaped like one (digits, then letters).

    Raises:
        ValueError: shaped like an age but with an unknown unit (the message lists the
            units and says which one is months), or reaching back more than
            ``MAX_AGE_SECONDS``.
    """
    found = _AGE_SHAPE.fullmatch(text.strip())
    if found is None:
        return None
    amount, written = int(found.group(1)), found.group(2)
    unit = _canonical(written)
    if unit is None:
        raise ValueError(
            f"{text.strip()!r}: {written!r} is not a date unit; use {AGE_UNITS_HELP}"
            " (m is minutes, M is months)"
        )
    age = Age(amount, unit)
    reach = age.seconds
    if reach is None:
        reach = amount * _MONTHS[unit] * _LONGEST_MONTH_S
    if reach > MAX_AGE_SECONDS:
        raise ValueError(f"relative date {text.strip()!r} reaches too far back")
    return age
