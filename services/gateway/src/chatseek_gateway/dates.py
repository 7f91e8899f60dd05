"""Parsing ``--since`` / ``--until`` for hybrid and conversation search.

Accepted: an ISO date (``2025-06-01``), a month (``2025-06``), a datetime with optional seconds
and offset (``2025-06-01T14:30``, ``…:05Z``, ``…+03:00``), or an age counted back from now in
``chatseek_core.dates``' one grammar (``30m``, ``12h``, ``7d``, ``3w``, ``6M``, ``1y``: ``m`` is
minutes, ``M`` months). Naive input is UTC. An upper bound given as a day or a month includes
the whole day or month.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta

from chatseek_core.dates import parse_age
from chatseek_core.errors import InvalidValue

__all__ = ["parse_bound"]

_HINT = (
    "use 2025-06-01, 2025-06, 2025-06-01T14:30[:05][Z|+03:00] or an age like 30m, 12h, 7d, 6M, 1y"
    " (m is minutes, M is months)"
)
_MONTH = re.compile(r"(\d{4})-(\d{2})")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


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
    try:
        age = parse_age(value)
        if age is not None:
            return int(age.before(now).timestamp())
    except ValueError as exc:
        raise InvalidValue(str(exc), hint=_HINT, metadata={"field": field}) from None
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
            hint=_HINT,
            metadata={"field": field},
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    if upper and _DAY.fullmatch(value):
        return int((parsed + timedelta(days=1)).timestamp()) - 1
    return int(parsed.timestamp())
