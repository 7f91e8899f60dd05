"""Calendar days in IANA timezones: DST days, midnights in gaps, days that never existed."""

from __future__ import annotations

from datetime import date
from zoneinfo import ZoneInfo

import pytest

from chatseek_lexical.query import dates

from .conftest_query import ts

MADRID = ZoneInfo("Europe/Madrid")
HOUR = 3600


def day(value: str, tz: ZoneInfo, now: float = 0.0) -> dates.Interval:
    return dates.resolve(dates.parse_date(value), tz, now)


def test_spring_forward_day_has_23_hours() -> None:
    span = day("2026-03-29", MADRID)
    assert span.start == ts("2026-03-28T23:00:00Z")
    assert span.end == ts("2026-03-29T22:00:00Z")
    assert span.end - span.start == 23 * HOUR


def test_fall_back_day_has_25_hours() -> None:
    span = day("2025-10-26", MADRID)
    assert span.start == ts("2025-10-25T22:00:00Z")
    assert span.end - span.start == 25 * HOUR


def test_a_day_whose_midnight_falls_in_a_gap_starts_after_the_gap() -> None:
    santiago = ZoneInfo("America/Santiago")
    span = day("2024-09-08", santiago)
    assert span.start == ts("2024-09-08T04:00:00Z")
    assert span.end - span.start == 23 * HOUR


def test_a_day_before_a_midnight_fall_back_has_25_hours() -> None:
    span = day("2025-04-05", ZoneInfo("America/Santiago"))
    assert span.end - span.start == 25 * HOUR


def test_a_skipped_local_day_is_an_error() -> None:
    with pytest.raises(ValueError, match="does not exist"):
        day("2011-12-30", ZoneInfo("Pacific/Apia"))
    assert day("2011-12-31", ZoneInfo("Pacific/Apia")).end > 0


def test_a_local_time_inside_a_gap_is_an_error() -> None:
    with pytest.raises(ValueError, match="does not exist"):
        day("2026-03-29T02:30", MADRID)


def test_an_ambiguous_local_time_takes_the_first_occurrence() -> None:
    assert day("2025-10-26T02:30", MADRID).start == ts("2025-10-26T00:30:00Z")


def test_months_and_years_are_local_calendar_periods() -> None:
    march = day("2026-03", MADRID)
    assert march.start == ts("2026-02-28T23:00:00Z")
    assert march.end == ts("2026-03-31T22:00:00Z")
    year = day("2026", ZoneInfo("UTC"))
    assert (year.start, year.end) == (ts("2026-01-01T00:00:00Z"), ts("2027-01-01T00:00:00Z"))


def test_instants_with_an_offset_are_points() -> None:
    span = day("2026-03-29T10:00:00+02:00", MADRID)
    assert span.point
    assert span.start == ts("2026-03-29T08:00:00Z")
    assert day("2026-03-29T08:00:00Z", MADRID).start == span.start


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("30m", 1800),
        ("30min", 1800),
        ("12h", 43200),
        ("7d", 604800),
        ("2w", 1209600),
        ("-7d", 604800),
        ("7D", 604800),
        ("now", 0),
    ],
)
def test_relative_values_count_back_from_now(value: str, seconds: int) -> None:
    now = ts("2026-04-02T12:00:00Z")
    span = day(value, MADRID, now)
    assert span.point
    assert span.start == now - seconds


def test_capital_m_counts_months_back_in_the_local_calendar() -> None:
    now = ts("2026-03-31T10:00:00Z")  # 12:00 in Madrid, summer time
    span = day("1M", MADRID, now)
    assert span.point
    assert span.start == ts("2026-02-28T11:00:00Z")  # 12:00 in Madrid, winter time
    assert day("1y", MADRID, now).start == ts("2025-03-31T10:00:00Z")


@pytest.mark.parametrize("value", ["6mo", "3months", "2q"])
def test_a_relative_value_with_an_unknown_unit_names_minutes_and_months(value: str) -> None:
    with pytest.raises(ValueError, match="m is minutes, M is months"):
        dates.parse_date(value)


def test_today_and_yesterday_are_days_in_the_timezone() -> None:
    now = ts("2026-03-29T22:30:00Z")  # already 00:30 on the 30th in Madrid
    assert day("today", MADRID, now).start == ts("2026-03-29T22:00:00Z")
    assert day("yesterday", MADRID, now).start == ts("2026-03-28T23:00:00Z")
    assert day("today", ZoneInfo("UTC"), now).start == ts("2026-03-29T00:00:00Z")


@pytest.mark.parametrize(
    "value",
    [
        "2026-02-30",
        "2026-13",
        "2026-00-10",
        "1899-01-01",
        "9999-01-01",
        "soon",
        "7yr",  # 7y is a year now: one age grammar everywhere (chatseek_core.dates)
        "7",
        "26-03-29",
        "2026/03/29",
        "",
        "99999999999d",
        "2026-03-29T25:00",
    ],
)
def test_malformed_dates_are_rejected(value: str) -> None:
    with pytest.raises(ValueError):
        dates.parse_date(value)


def test_day_start_is_the_first_instant_of_the_local_date() -> None:
    assert dates.day_start(date(2026, 3, 30), MADRID) == ts("2026-03-29T22:00:00Z")


def test_timezones_resolve_by_name_and_the_system_one_by_default() -> None:
    zone, name = dates.resolve_timezone("Europe/Madrid")
    assert (zone.key, name) == ("Europe/Madrid", "Europe/Madrid")
    _, system = dates.resolve_timezone(None)
    assert system == dates.system_timezone()
    for bad in ("Mars/Olympus", "../etc/passwd", "Europe"):
        with pytest.raises(ValueError):
            dates.resolve_timezone(bad)
