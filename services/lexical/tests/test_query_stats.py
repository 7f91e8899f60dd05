"""Counting exactly what search finds, by chat, sender, local day and local hour."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from chatseek_core import db
from chatseek_core.errors import ChatseekError
from chatseek_lexical.query import SearchRequest, search, stats
from chatseek_lexical.query.stats import offset_segments

from .conftest_query import BOB_CHAT, EXPATS, NEWS, RICH, build_store, ts
from .test_query_search import RESULTS

MADRID = "Europe/Madrid"
NOW = ts("2026-04-02T12:00:00Z")


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[db.Connection]:
    connection = build_store(Path(tmp_path_factory.mktemp("stats")), RICH)
    yield connection
    connection.close()


def counts(conn: db.Connection, query: str, by: str, **options: object) -> dict[object, int]:
    request = SearchRequest(query, now=NOW, **options)  # type: ignore[arg-type]
    result = stats(conn, request, by=by, timezone=MADRID)
    assert result.total == sum(b.count for b in result.buckets)
    return {b.key: b.count for b in result.buckets}


@pytest.mark.parametrize(("query", "_"), RESULTS[::4])
def test_total_equals_the_number_of_search_hits(conn: db.Connection, query: str, _: str) -> None:
    try:
        hits = search(conn, SearchRequest(query, now=NOW, timezone=MADRID, limit=1000)).items
    except ChatseekError:
        return
    for by in ("chat", "sender", "day", "hour"):
        result = stats(conn, SearchRequest(query, now=NOW), by=by, timezone=MADRID)
        assert result.total == len(hits)


def test_counts_by_chat_use_locators_and_titles(conn: db.Connection) -> None:
    result = stats(conn, SearchRequest("in:all invoice", now=NOW), by="chat")
    assert [(b.key, b.label, b.count) for b in result.buckets] == [
        (f"tg:me/{EXPATS}", "Expats Madrid", 2),
        (f"tg:me/{BOB_CHAT}", "Bob Builder", 1),
        (f"tg:work/{NEWS}", "Work News", 1),
    ]


def test_counts_by_sender_group_each_person_once(conn: db.Connection) -> None:
    assert counts(conn, "kind:group", "sender") == {1001: 6, 1002: 3, 1003: 3}
    result = stats(conn, SearchRequest("kind:private"), by="sender")
    assert {b.label for b in result.buckets} == {"Bob Builder", "Me"}


def test_counts_by_day_follow_local_days_across_dst(conn: db.Connection) -> None:
    assert counts(conn, "date:[2026-03-28 TO 2026-03-30]", "day") == {
        "2026-03-28": 3,
        "2026-03-29": 5,
        "2026-03-30": 4,
    }
    assert counts(conn, "kind:group", "day")["2025-10-26"] == 1


def test_counts_by_hour_use_local_wall_clock(conn: db.Connection) -> None:
    assert counts(conn, "date:2026-03-29 kind:group", "hour") == {
        "2026-03-29T00:00": 1,
        "2026-03-29T03:00": 1,
        "2026-03-29T23:00": 1,
    }


def test_lower_bound_is_set_when_a_searched_chat_is_incomplete(conn: db.Connection) -> None:
    assert stats(conn, SearchRequest("alpha"), by="chat").lower_bound is True
    assert stats(conn, SearchRequest("chat:expats invoice"), by="chat").lower_bound is False


def test_zero_matches_give_no_buckets_but_full_metadata(conn: db.Connection) -> None:
    result = stats(conn, SearchRequest("zzzz"), by="day", timezone=MADRID).to_json()
    assert result["buckets"] == []
    assert result["total"] == 0
    assert result["query"]["timezone"] == MADRID
    assert result["coverage"]["chats"]


def test_unknown_grouping_is_an_invalid_value(conn: db.Connection) -> None:
    with pytest.raises(ChatseekError) as caught:
        stats(conn, SearchRequest("alpha"), by="week")
    assert caught.value.reason == "INVALID_VALUE"


def test_offset_segments_find_the_dst_change_to_the_second() -> None:
    segments = offset_segments(
        ZoneInfo(MADRID), ts("2026-03-20T00:00:00Z"), ts("2026-04-10T00:00:00Z")
    )
    assert segments == [(ts("2026-03-20T00:00:00Z"), 3600), (ts("2026-03-29T01:00:00Z"), 7200)]
