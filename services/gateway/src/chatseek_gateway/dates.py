"""Parsing ``--since`` / ``--until`` for hybrid and conversation search.

Accepted: an ISO date (``2025-06-01``), a month (``2025-06``), a datetime with optional seconds
and offset (``2025-06-01T14:30``, ``…:05Z``, ``…+03:00``), or an age (``7d``, ``3w``, ``6m``,
``1y``) stepping the calendar back from now. Naive input is UTC. An upper bound given as a day
or a month includes the whole day or month.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta

from chatseek_core.errors import InvalidValue

__all__ = ["parse_bound"]

_AGE = re.compile(r"(\d+)([dwmy])")
_MONTH = re.compile(r"(\d{4})-(\d{2})")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _step_back(now: datetime, amount: int, unit: str) -> datetime:
    if unit == "d":
        return now - timedelta(days=amount)
    if unit == "w":
        return now - timedelta(weeks=amount)
    months = amount if unit == "m" else amount * 12
    year, month = divmod(now.year * 12 + now.month - 1 - months, 12)
    month += 1
    day = min(now.day, calendar.monthrange(year, month)[1])
    return now.replace(year=year, month=month, day=day)


def parse_bound(text: str, *, upper: bool, now: datetime | None = None) -> int:
    """Unix seconds UTC for a bound; 0 for an empty string.

    Raises:
        InvalidValue: the text is none of the accepted forms (the error lists them).
    """
    value = text.strip()
    if not value:
        return 0
    now = now or datetime.now(UTC)
    field = "until" if upper else "since"
    age = _AGE.fullmatch(value)
    if age:
        return int(_step_back(now, int(age.group(1)), age.group(2)).timestamp())
    month = _MONTH.fullmatch(value)
    if month:
        year, mon = int(month.group(1)), int(month.group(2))
        if not 1 <= mon <= 12:
            raise InvalidValue(f"{value!r} is not a month", metadata={"field": field})
        start = datetime(year, mon, 1, tzinfo=UTC)
        if not upper:
            return int(start.timestamp())
        end = start + timedelta(days=calendar.monthrange(year, mon)[1])
        return int(end.timestamp()) - 1
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidValue(
            f"{value!r} is not a date",
            hint="use 2025-06-01, 2025-06, 2025-06-01T14:30[:05][Z|+03:00] or an age like 7d",
            metadata={"field": field},
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    if upper and _DAY.fullmatch(value):
        return int((parsed + timedelta(days=1)).timestamp()) - 1
    return int(parsed.timestamp())
