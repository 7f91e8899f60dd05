"""Values of the ``date`` field and calendar days in an IANA timezone.

Invariants:
* A day, month or year is the half-open interval from the first instant of that local
  calendar period to the first instant of the next, found through the zone's rules, so 23- and
  25-hour days and midnights inside DST gaps are exact. A skipped local day (Samoa,
  2011-12-30) or a wall-clock time inside a gap is a ``ValueError``.
* Instants (``2026-03-29T10:00:00+02:00``; local without an offset), relative values (an age
  before now in ``chatseek_core.dates``' one grammar: ``30m`` minutes, ``12h``, ``7d``, ``2w``,
  ``6M`` months, ``1y``; months and years step the local calendar) and ``now`` are points;
  ``today``/``yesterday`` are days.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from chatseek_core.dates import Age, parse_age

__all__ = [
    "DateValue",
    "Interval",
    "MAX_YEAR",
    "MIN_YEAR",
    "day_start",
    "parse_date",
    "resolve",
    "resolve_timezone",
    "system_timezone",
]

MIN_YEAR = 1900
MAX_YEAR = 9998
GAP_SEARCH_SECONDS = 48 * 3600
FALLBACK_TIMEZONE = "UTC"
_LOCALTIME = Path("/etc/localtime")
_TIMEZONE_FILE = Path("/etc/timezone")
_ZONEINFO_MARK = "zoneinfo/"

_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_YEAR = re.compile(r"^(\d{4})$")
_INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


@dataclass(frozen=True, slots=True)
class DateValue:
    """One parsed date value; which fields are set depends on ``kind``."""

    kind: str
    year: int = 0
    month: int = 0
    day: int = 0
    instant: datetime | None = None
    age: Age | None = None


@dataclass(frozen=True, slots=True)
class Interval:
    """``[start, end)`` in unix seconds; a point has ``start == end``."""

    start: float
    end: float

    @property
    def point(self) -> bool:
        """Whether this value is an instant rather than a calendar period."""
        return self.start == self.end


def _year(value: int) -> int:
    if not MIN_YEAR <= value <= MAX_YEAR:
        raise ValueError(f"year {value} is outside {MIN_YEAR}..{MAX_YEAR}")
    return value


def parse_date(text: str) -> DateValue:
    """Parse one ``date`` value (no timezone needed yet).

    Raises:
        ValueError: not a day, month, year, instant, relative value, today, yesterday or now;
            or a calendar date that does not exist (``2026-02-30``).
    """
    value = text.strip()
    lowered = value.lower()
    if lowered in ("today", "yesterday", "now"):
        return DateValue(lowered)
    age = parse_age(value)
    if age is not None:
        return DateValue("relative", age=age)
    found = _DAY.match(value)
    if found:
        year, month, day = (int(g) for g in found.groups())
        date(_year(year), month, day)
        return DateValue("day", year, month, day)
    found = _MONTH.match(value)
    if found:
        year, month = int(found.group(1)), int(found.group(2))
        date(_year(year), month, 1)
        return DateValue("month", year, month)
    found = _YEAR.match(value)
    if found:
        return DateValue("year", _year(int(found.group(1))))
    if _INSTANT.match(value):
        instant = datetime.fromisoformat(value)
        _year(instant.year)
        return DateValue("instant", instant=instant)
    raise ValueError(
        f"{value!r} is not a date: use 2026-03-29, 2026-03, 2026, a quoted instant such as "
        '"2026-03-29T10:00:00+02:00", an age such as 30m, 7d or 6M (m is minutes, M months), '
        "today or yesterday"
    )


def _local_date(ts: int, tz: ZoneInfo) -> date:
    return datetime.fromtimestamp(ts, tz).date()


def day_start(day: date, tz: ZoneInfo) -> int:
    """The first instant (unix seconds) whose local date in ``tz`` is ``day`` or later."""
    naive = datetime.combine(day, time())
    first = int(naive.replace(tzinfo=tz, fold=0).timestamp())
    second = int(naive.replace(tzinfo=tz, fold=1).timestamp())
    low, high = min(first, second), max(first, second)
    if _local_date(low, tz) >= day:
        return low
    if _local_date(high, tz) < day:
        high = low + GAP_SEARCH_SECONDS
    while high - low > 1:
        middle = (low + high) // 2
        if _local_date(middle, tz) >= day:
            high = middle
        else:
            low = middle
    return high


def _period(first: date, following: date, tz: ZoneInfo, label: str) -> Interval:
    start = day_start(first, tz)
    end = day_start(following, tz)
    if end <= start:
        raise ValueError(f"{label} does not exist in {tz.key}")
    return Interval(float(start), float(end))


def _next_month(year: int, month: int) -> date:
    return date(year + 1, 1, 1) if month == 12 else date(year, month + 1, 1)


def resolve(value: DateValue, tz: ZoneInfo, now: float) -> Interval:
    """The interval (or point) ``value`` denotes in ``tz`` at time ``now``.

    Raises:
        ValueError: a local day or wall-clock time that does not exist in ``tz``.
    """
    if value.kind == "day":
        day = date(value.year, value.month, value.day)
        return _period(day, day + timedelta(days=1), tz, day.isoformat())
    if value.kind == "month":
        first = date(value.year, value.month, 1)
        return _period(first, _next_month(value.year, value.month), tz, first.isoformat()[:7])
    if value.kind == "year":
        return _period(date(value.year, 1, 1), date(value.year + 1, 1, 1), tz, str(value.year))
    if value.kind in ("today", "yesterday"):
        today = datetime.fromtimestamp(now, tz).date()
        day = today if value.kind == "today" else today - timedelta(days=1)
        return _period(day, day + timedelta(days=1), tz, day.isoformat())
    if value.kind == "relative":
        assert value.age is not None
        fixed = value.age.seconds
        if fixed is not None:
            return Interval(now - fixed, now - fixed)
        stepped = value.age.before(datetime.fromtimestamp(now, tz)).timestamp()
        return Interval(stepped, stepped)
    if value.kind == "now":
        return Interval(now, now)
    instant = value.instant
    assert instant is not None
    if instant.tzinfo is None:
        local = instant.replace(tzinfo=tz)
        back = datetime.fromtimestamp(local.timestamp(), tz).replace(tzinfo=None)
        if back != instant:
            raise ValueError(f"{instant.isoformat()} does not exist in {tz.key} (DST gap)")
        instant = local
    stamp = instant.astimezone(UTC).timestamp()
    return Interval(stamp, stamp)


def system_timezone() -> str:
    """The system's IANA timezone name: ``$TZ``, ``/etc/localtime``, ``/etc/timezone``, UTC."""
    candidates: list[str] = []
    env = os.environ.get("TZ", "").lstrip(":")
    if env:
        candidates.append(env)
    try:
        target = str(_LOCALTIME.resolve())
        if _ZONEINFO_MARK in target:
            candidates.append(target.split(_ZONEINFO_MARK, 1)[1])
    except OSError:
        pass
    try:
        candidates.append(_TIMEZONE_FILE.read_text(encoding="utf-8").strip())
    except OSError:
        pass
    for name in candidates:
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            continue
        return name
    return FALLBACK_TIMEZONE


def resolve_timezone(name: str | None) -> tuple[ZoneInfo, str]:
    """The zone for ``name`` (the system's when None) and the name to echo back.

    Raises:
        ValueError: ``name`` is not an IANA timezone known to this system.
    """
    chosen = name or system_timezone()
    try:
        return ZoneInfo(chosen), chosen
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"{chosen!r} is not an IANA timezone") from exc
