"""``--since`` / ``--until``: ISO forms, and ages in the one grammar (m minutes, M months)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chatseek_core.errors import InvalidValue
from chatseek_gateway.dates import parse_bound

NOW = datetime(2026, 3, 31, 12, 0, tzinfo=UTC)


def _ts(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp())


def test_lower_case_m_is_minutes_and_capital_m_is_months() -> None:
    assert parse_bound("30m", upper=False, now=NOW) == _ts(2026, 3, 31, 11, 30)
    assert parse_bound("6M", upper=False, now=NOW) == _ts(2025, 9, 30, 12, 0)
    assert parse_bound("1M", upper=False, now=NOW) == _ts(2026, 2, 28, 12, 0)


def test_days_weeks_and_years_count_back_from_now() -> None:
    assert parse_bound("7d", upper=False, now=NOW) == _ts(2026, 3, 24, 12, 0)
    assert parse_bound("2w", upper=False, now=NOW) == _ts(2026, 3, 17, 12, 0)
    assert parse_bound("1y", upper=True, now=NOW) == _ts(2025, 3, 31, 12, 0)
    assert parse_bound("12h", upper=False, now=NOW) == _ts(2026, 3, 31, 0, 0)


def test_iso_bounds_keep_their_meaning() -> None:
    assert parse_bound("", upper=False) == 0
    assert parse_bound("2026-03", upper=False) == _ts(2026, 3, 1)
    assert parse_bound("2026-03", upper=True) == _ts(2026, 4, 1) - 1
    assert parse_bound("2026-03-05", upper=True) == _ts(2026, 3, 6) - 1
    assert parse_bound("2026-03-05T10:00+02:00", upper=False) == _ts(2026, 3, 5, 8, 0)


@pytest.mark.parametrize("text", ["6mo", "3months", "2q"])
def test_an_unknown_unit_is_an_invalid_value_for_its_field(text: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        parse_bound(text, upper=True, now=NOW)
    assert caught.value.reason == "INVALID_VALUE"
    assert caught.value.metadata["field"] == "until"
