"""The one age grammar (Elasticsearch's units: m minutes, M months) and the one ISO form."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chatseek_core.dates import Age, iso_utc, parse_age

NOW = datetime(2026, 3, 31, 12, 0, tzinfo=UTC)


def _age(text: str) -> Age:
    age = parse_age(text)
    assert age is not None
    return age


def test_iso_utc_writes_seconds_and_z() -> None:
    assert iso_utc(0) == "1970-01-01T00:00:00Z"
    assert iso_utc(1_774_785_600) == "2026-03-29T12:00:00Z"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("45s", 45),
        ("30m", 1800),
        ("30min", 1800),
        ("12h", 43200),
        ("12H", 43200),
        ("7d", 604800),
        ("7D", 604800),
        ("-7d", 604800),
        ("2w", 1209600),
    ],
)
def test_fixed_units_are_seconds_and_m_is_minutes(text: str, seconds: int) -> None:
    age = _age(text)
    assert age.seconds == seconds
    assert age.before(NOW).timestamp() == NOW.timestamp() - seconds


def test_capital_m_is_months_and_steps_the_calendar_clamping_the_day() -> None:
    assert parse_age("6M") == Age(6, "M")
    assert _age("1M").before(NOW) == datetime(2026, 2, 28, 12, 0, tzinfo=UTC)
    assert _age("13M").before(NOW) == datetime(2025, 2, 28, 12, 0, tzinfo=UTC)


def test_years_step_the_calendar() -> None:
    leap = datetime(2028, 2, 29, tzinfo=UTC)
    assert _age("1y").before(leap) == datetime(2027, 2, 28, tzinfo=UTC)
    assert parse_age("2Y") == Age(2, "y")


@pytest.mark.parametrize("text", ["2026-03", "2026", "today", "", "m", "7 d"])
def test_text_not_shaped_like_an_age_is_none(text: str) -> None:
    assert parse_age(text) is None


@pytest.mark.parametrize("text", ["6mo", "6mon", "3months", "3x", "1q"])
def test_an_unknown_or_ambiguous_unit_is_an_error_naming_the_units(text: str) -> None:
    with pytest.raises(ValueError, match=r"m is minutes, M is months"):
        parse_age(text)


def test_an_age_past_two_centuries_is_refused() -> None:
    with pytest.raises(ValueError, match="too far back"):
        parse_age("300y")
    with pytest.raises(ValueError, match="too far back"):
        parse_age("999999999d")
