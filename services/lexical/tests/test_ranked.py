"""BM25 ranked lists: analysis, quoting, AND-then-OR, filters and message-to-unit mapping."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers_store import BASE_DATE, Stores, make_stores
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatseek_core.errors import IndexNotReady, InvalidValue
from chatseek_lexical.indexer import apply_feeds
from chatseek_lexical.ranked import chunk_list, match_expression, message_list, unit_list

CHAT = -1001
OTHER_CHAT = -1002
WORK_CHAT = -3003
WORK = "work"
DAY = 86_400


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    s = make_stores(tmp_path)
    yield s
    s.close()


def unit_ids(rows: list[tuple[int, float]]) -> list[int]:
    return [r[0] for r in rows]


def window(
    stores: Stores, text: str, key: str, *, chat: int = CHAT, start_date: int | None = None
) -> int:
    """A window unit with one made-up member, keyed by ``key``."""
    member = sum(map(ord, key))
    return stores.unitize.put_unit(chat, "window", [member], text, key=key, start_date=start_date)


# --- analysis ---


def test_russian_inflections_find_each_other(stores: Stores) -> None:
    schet = window(stores, "Ann: Как открыть счёт в банке?", "a")
    scheta = window(stores, "Bob: Все счета закрыты, банка больше нет", "b")
    schetov = window(stores, "Eve: сколько у тебя счетов", "c")
    window(stores, "Kim: погода хорошая", "d")
    apply_feeds(stores.lex)

    for query in ("счёт", "счета", "счетов", "СЧЕТ"):
        assert set(unit_ids(unit_list(stores.lex, query))) == {schet, scheta, schetov}, query
    for query in ("банк", "банка"):
        assert set(unit_ids(unit_list(stores.lex, query))) == {schet, scheta}, query


def test_yo_and_ye_are_the_same_letter(stores: Stores) -> None:
    tree = window(stores, "Ann: купили ёлку", "a")
    apply_feeds(stores.lex)

    assert unit_ids(unit_list(stores.lex, "елку")) == [tree]
    assert unit_ids(unit_list(stores.lex, "ЁЛКУ")) == [tree]


def test_english_plurals_find_the_singular(stores: Stores) -> None:
    banks = window(stores, "Tom: which banks are open today", "a")
    apply_feeds(stores.lex)

    assert unit_ids(unit_list(stores.lex, "bank")) == [banks]
    assert unit_ids(unit_list(stores.lex, "Banking")) == [banks]
    assert unit_ids(unit_list(stores.lex, "bandit")) == []


def test_acronyms_latin_ids_and_years_stay_findable(stores: Stores) -> None:
    papers = window(stores, "Ann: ВНЖ и DNI готовы, продление в 2024", "a")
    window(stores, "Bob: nothing here from 2023", "b")
    apply_feeds(stores.lex)

    for query in ("ВНЖ", "внж", "DNI", "dni", "2024", "внж dni 2024"):
        assert unit_ids(unit_list(stores.lex, query)) == [papers], query


def test_an_exact_word_outranks_a_match_on_its_stem_only(stores: Stores) -> None:
    stem_only = window(stores, "Tom: the bank is closed", "a")
    exact = window(stores, "Tom: the banks are closed", "b")
    apply_feeds(stores.lex)

    assert unit_ids(unit_list(stores.lex, "banks")) == [exact, stem_only]
    assert unit_ids(unit_list(stores.lex, "bank")) == [stem_only, exact]


# --- quoting ---


HOSTILE = [
    '"AND" OR NEAR( ) * ^ : -foo',
    "NEAR(a b, 3)",
    '"unterminated',
    'raw:"x" OR stem:*',
    "{raw stem}: x",
    "a AND",
    "OR",
    "NOT NOT",
    "*",
    "^start",
    "(((",
    '""""',
    "' OR 1=1 --",
    "a\x00b",
    "счёт* -банк +визa",
    "col:val AND (x OR",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_query_syntax_in_user_text_never_breaks_fts(stores: Stores, query: str) -> None:
    window(stores, "Ann: foo and near start val", "a")
    apply_feeds(stores.lex)

    unit_list(stores.lex, query)
    chunk_list(stores.lex, query)
    message_list(stores.lex, query)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text())
def test_arbitrary_text_never_raises(stores: Stores, query: str) -> None:
    assert isinstance(unit_list(stores.lex, query), list)
    assert isinstance(message_list(stores.lex, query), list)


def test_every_term_is_double_quoted_with_quotes_doubled() -> None:
    assert match_expression([('a"b', "ab")], "AND") == '(raw:"a""b" OR stem:"ab")'
    assert match_expression([("x", "x"), ("y", "y")], "OR") == (
        '(raw:"x" OR stem:"x") OR (raw:"y" OR stem:"y")'
    )


@pytest.mark.parametrize("query", ["", "   ", "!!! ??? ---", "🙂"])
def test_a_query_without_indexable_words_returns_an_empty_list(stores: Stores, query: str) -> None:
    window(stores, "Ann: anything", "a")
    apply_feeds(stores.lex)

    assert unit_list(stores.lex, query) == []
    assert chunk_list(stores.lex, query) == []
    assert message_list(stores.lex, query) == []


# --- AND then OR ---


def test_units_with_every_term_rank_before_partial_matches(stores: Stores) -> None:
    both = window(stores, "Ann: " + "long story " * 30 + "alpha beta", "a")
    only_alpha = window(stores, "Bob: alpha alpha", "b")
    only_beta = window(stores, "Eve: beta", "c")
    apply_feeds(stores.lex)

    rows = unit_list(stores.lex, "alpha beta", limit=3)

    assert rows[0][0] == both
    assert set(unit_ids(rows[1:])) == {only_alpha, only_beta}


def test_the_or_fallback_runs_only_when_and_finds_too_few(stores: Stores) -> None:
    first = window(stores, "Ann: alpha beta", "a")
    second = window(stores, "Bob: beta alpha gamma", "b")
    window(stores, "Eve: alpha", "c")
    apply_feeds(stores.lex)

    assert set(unit_ids(unit_list(stores.lex, "alpha beta", limit=2))) == {first, second}
    assert len(unit_list(stores.lex, "alpha beta", limit=10)) == 3
    assert unit_list(stores.lex, "alpha zzz", limit=10) != []


def test_function_words_never_fill_the_or_top_up(stores: Stores) -> None:
    answer = window(stores, "Ann: opened a bank account at Sabadell", "a")
    window(stores, "Bob: how do I get to the beach from here?", "b")
    window(stores, "Eve: я не знаю, как это делать", "c")
    apply_feeds(stores.lex)

    assert unit_ids(unit_list(stores.lex, "how do I open a bank account?", limit=10)) == [answer]
    assert unit_list(stores.lex, "как мне это сделать в банке", limit=10) == []


def test_russian_function_words_are_left_out_of_the_match(stores: Stores) -> None:
    answer = window(stores, "Ann: залог за квартиру вернули через месяц", "a")
    window(stores, "Bob: а что если он не придёт", "b")
    late = window(stores, "Eve: он вернёт всё в пятницу", "c")
    apply_feeds(stores.lex)

    rows = unit_ids(unit_list(stores.lex, "а если он не вернёт залог?", limit=10))

    assert sorted(rows) == sorted([answer, late])


def test_a_query_of_function_words_only_still_finds_them(stores: Stores) -> None:
    band = window(stores, "Ann: the who played here", "a")
    window(stores, "Bob: concert tickets", "b")
    apply_feeds(stores.lex)

    assert unit_ids(unit_list(stores.lex, "The Who", limit=10)) == [band]


def test_scores_are_positive_and_best_first(stores: Stores) -> None:
    window(stores, "Ann: rent rent rent", "a")
    window(stores, "Bob: rent a flat in the old town near the harbour", "b")
    apply_feeds(stores.lex)

    scores = [score for _, score in unit_list(stores.lex, "rent")]

    assert scores == sorted(scores, reverse=True)
    assert all(score > 0 for score in scores)


# --- filters ---


def test_chat_account_date_and_kind_filters_apply_before_the_limit(stores: Stores) -> None:
    may = window(stores, "Ann: visa", "a", start_date=BASE_DATE)
    june = window(stores, "Ann: visa visa", "b", start_date=BASE_DATE + 40 * DAY)
    other_chat = window(stores, "Bob: visa visa visa", "c", chat=OTHER_CHAT)
    work = stores.unitize.put_unit(WORK_CHAT, "window", [1], "Eve: visa", account=WORK)
    thread = stores.unitize.put_unit(CHAT, "thread", [9], "Ann: visa thread", key="t:9")
    post = stores.unitize.put_unit(CHAT, "post", [10], "News: visa post", key="p:10")
    apply_feeds(stores.lex)

    def found(**kw: Any) -> set[int]:
        return set(unit_ids(unit_list(stores.lex, "visa", limit=1000, **kw)))

    assert found() == {may, june, other_chat, work, thread, post}
    assert found(chat_ids=[CHAT]) == {may, june, thread, post}
    assert found(account_scope=[WORK]) == {work}
    assert found(account_scope=["me"], chat_ids=[OTHER_CHAT]) == {other_chat}
    assert found(since=BASE_DATE + DAY) == {june}
    assert found(until=BASE_DATE + 1) == {may}
    assert found(since=BASE_DATE, until=BASE_DATE) == set()
    assert found(kinds=["thread", "post"]) == {thread, post}
    assert found(chat_ids=[]) == set()
    assert unit_ids(unit_list(stores.lex, "visa", chat_ids=[CHAT], limit=1)) == [june]


def test_bad_limits_kinds_and_ranges_are_invalid_values(stores: Stores) -> None:
    for kw in ({"limit": 0}, {"limit": 100_000}, {"kinds": ["banana"]}, {"since": 10, "until": 5}):
        with pytest.raises(InvalidValue):
            unit_list(stores.lex, "visa", **kw)
    with pytest.raises(InvalidValue):
        unit_list(stores.lex, "visa", kinds=["conversation"])


# --- chunks ---


def test_chunk_list_sees_only_each_chats_current_build(stores: Stores) -> None:
    old = stores.unitize.start_build(CHAT)
    old_chunk = stores.unitize.put_unit(
        CHAT, "conversation", [1, 2], "Ann: renting a flat", key="c:1", build_id=old
    )
    stores.unitize.publish_build(old)
    new = stores.unitize.start_build(CHAT)
    new_chunk = stores.unitize.put_unit(
        CHAT, "conversation", [1, 2], "Ann: renting a flat", key="c:1b", build_id=new
    )
    window(stores, "Ann: renting a flat", "w")
    apply_feeds(stores.lex)

    assert unit_ids(chunk_list(stores.lex, "flat")) == [old_chunk]

    stores.unitize.publish_build(new)

    assert unit_ids(chunk_list(stores.lex, "flat")) == [new_chunk]
    assert unit_ids(chunk_list(stores.lex, "flat", chat_ids=[OTHER_CHAT])) == []


# --- messages mapped to units ---


def test_messages_map_to_their_units_keeping_the_best_message(stores: Stores) -> None:
    stores.ingest.put_message(CHAT, 1, "visa")
    stores.ingest.put_message(CHAT, 2, "visa paperwork needs many more words than this one")
    stores.ingest.put_message(CHAT, 3, "unrelated")
    stores.ingest.put_message(OTHER_CHAT, 1, "unrelated elsewhere")
    whole = stores.unitize.put_unit(CHAT, "window", [1, 2, 3], "...", key="w:1")
    reply = stores.unitize.put_unit(CHAT, "thread", [2], "...", key="t:2")
    stores.unitize.put_unit(OTHER_CHAT, "window", [1], "...", key="w:1")
    apply_feeds(stores.lex)

    rows = message_list(stores.lex, "visa")

    assert [(unit, best) for unit, _, best in rows] == [(whole, 1), (reply, 2)]
    assert rows[0][1] > rows[1][1]
    assert message_list(stores.lex, "visa", kinds=["thread"]) == [rows[1]]
    assert message_list(stores.lex, "visa", chat_ids=[OTHER_CHAT]) == []


def test_message_list_reaches_current_conversation_chunks_only_when_asked(
    stores: Stores,
) -> None:
    stores.ingest.put_message(CHAT, 1, "parking permit")
    stale = stores.unitize.start_build(CHAT)
    stores.unitize.put_unit(CHAT, "conversation", [1], "...", key="c:old", build_id=stale)
    build = stores.unitize.start_build(CHAT)
    chunk = stores.unitize.put_unit(CHAT, "conversation", [1], "...", key="c:1", build_id=build)
    stores.unitize.publish_build(build)
    apply_feeds(stores.lex)

    assert message_list(stores.lex, "permit") == []
    rows = message_list(stores.lex, "permit", kinds=["conversation"])
    assert [(unit, best) for unit, _, best in rows] == [(chunk, 1)]


def test_message_list_uses_and_then_or_too(stores: Stores) -> None:
    stores.ingest.put_message(CHAT, 1, "cheap flat")
    stores.ingest.put_message(CHAT, 2, "cheap flat near the beach")
    stores.ingest.put_message(CHAT, 3, "cheap tickets")
    first = stores.unitize.put_unit(CHAT, "window", [1], "...", key="w:1")
    second = stores.unitize.put_unit(CHAT, "window", [2], "...", key="w:2")
    third = stores.unitize.put_unit(CHAT, "window", [3], "...", key="w:3")
    apply_feeds(stores.lex)

    rows = message_list(stores.lex, "beach flat", limit=5)

    assert [unit for unit, _, _ in rows] == [second, first]
    assert third not in [unit for unit, _, _ in message_list(stores.lex, "flat", limit=5)]


@pytest.mark.parametrize(
    "options",
    [{}, {"limit": 3}, {"chat_ids": [OTHER_CHAT]}, {"kinds": ["thread"]}, {"limit": 1}],
)
@pytest.mark.parametrize("query", ["rent deposit", "rent", "deposit flat beach"])
def test_lists_read_a_small_pool_at_a_time_find_the_same_rows(
    stores: Stores, monkeypatch: pytest.MonkeyPatch, query: str, options: dict[str, Any]
) -> None:
    words = ["rent", "deposit", "flat", "beach", "rent rent", "deposit deposit deposit"]
    for chat in (CHAT, OTHER_CHAT):
        texts = {}
        for n in range(1, 41):
            text = " ".join(words[(n * k) % len(words)] for k in range(1, n % 5 + 2))
            texts[n] = f"{text} filler {n}"
            stores.ingest.put_message(chat, n, texts[n])
        members = [("window", f"w:{f}", list(range(f, f + 4))) for f in range(1, 41, 4)]
        members += [("thread", f"t:{r}", [r, r + 1, r + 5]) for r in (2, 9, 17)]
        for kind, key, ids in members:
            text = "\n".join(texts[i] for i in ids)
            stores.unitize.put_unit(chat, kind, ids, text, key=key)
    apply_feeds(stores.lex)
    limit = options.pop("limit", 10)
    whole = [
        message_list(stores.lex, query, limit=limit, **options),
        unit_list(stores.lex, query, limit=limit, **options),
    ]
    assert all(whole)
    # One scored match joined at first, growing by two: a list stops both when the matches run
    # out and when its last row scores above the pool's worst match.
    from chatseek_lexical import ranked

    monkeypatch.setattr(ranked, "POOL_MIN", 1)
    monkeypatch.setattr(ranked, "POOL_FACTOR", 1)
    monkeypatch.setattr(ranked, "POOL_GROWTH", 2)
    assert [
        message_list(stores.lex, query, limit=limit, **options),
        unit_list(stores.lex, query, limit=limit, **options),
    ] == whole


def test_a_tie_at_the_edge_of_the_pool_grows_it(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two messages with the same text score the same; the first stored (read first) is in the
    # unit made last. Units that tie rank by id, so the whole list starts with the other one.
    stores.ingest.put_message(CHAT, 1, "deposit returned in full")
    stores.ingest.put_message(CHAT, 2, "deposit returned in full")
    earlier = stores.unitize.put_unit(CHAT, "window", [2], "...", key="w:2")
    later = stores.unitize.put_unit(CHAT, "window", [1], "...", key="w:1")
    apply_feeds(stores.lex)
    from chatseek_lexical import ranked

    monkeypatch.setattr(ranked, "POOL_MIN", 1)
    monkeypatch.setattr(ranked, "POOL_FACTOR", 1)
    rows = message_list(stores.lex, "deposit", limit=1)
    assert earlier < later and [unit for unit, _, _ in rows] == [earlier]


def test_a_tie_at_the_edge_of_a_unit_lists_pool_does_not_grow_it(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Six units with the same text score the same. A unit list keeps the pool's order (score,
    # then id), so the first pool of two already holds the two the whole table ranks first.
    units = [
        stores.unitize.put_unit(CHAT, "window", [n], "deposit returned", key=f"w:{n}")
        for n in range(1, 7)
    ]
    for n in range(1, 7):
        stores.ingest.put_message(CHAT, n, "deposit returned")
    apply_feeds(stores.lex)
    whole = unit_list(stores.lex, "deposit", limit=2)
    assert [unit for unit, _ in whole] == sorted(units)[:2]

    from chatseek_lexical import ranked

    monkeypatch.setattr(ranked, "POOL_MIN", 1)
    monkeypatch.setattr(ranked, "POOL_FACTOR", 1)
    pools: list[int] = []
    conn = stores.lex

    class Counting:
        def execute(self, sql: str, *args: Any) -> Any:
            if "json_each(:pool)" in sql:
                pools.append(len(json.loads(args[0]["pool"])))
            return conn.execute(sql, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(conn, name)

    assert unit_list(Counting(), "deposit", limit=2) == whole  # type: ignore[arg-type]
    assert pools == [2]
    # The message list orders its units by id, not by the pool's message order: a tie at its
    # pool's edge still grows the pool.
    pools.clear()
    message_list(Counting(), "deposit", limit=2)  # type: ignore[arg-type]
    assert len(pools) > 1


# --- readiness ---


def test_require_ready_refuses_an_index_behind_its_feeds(stores: Stores) -> None:
    stores.ingest.put_message(CHAT, 1, "visa")
    stores.unitize.put_unit(CHAT, "window", [1], "Ann: visa", key="w:1")

    with pytest.raises(IndexNotReady) as caught:
        message_list(stores.lex, "visa", require_ready=True)
    assert caught.value.metadata["ingest_behind"] == "1"
    assert unit_list(stores.lex, "visa") == []

    apply_feeds(stores.lex)

    assert len(unit_list(stores.lex, "visa", require_ready=True)) == 1
    assert len(message_list(stores.lex, "visa", require_ready=True)) == 1
