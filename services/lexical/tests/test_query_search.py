"""Result sets, ordering, paging, envelope and scope of strict search on the rich fixture.

Labels: ``E1``–``E12`` are the forum "Expats Madrid" (active account ``me``), ``B101``–``B107``
the private chat with Bob (``me``, not completely downloaded), ``N501``/``N502`` the channel
"Work News" of the second account ``work``. Days are Europe/Madrid unless a case says otherwise;
2026-03-29 is the 23-hour spring-forward day, 2025-10-26 the 25-hour fall-back day.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatseek_core import db
from chatseek_core.errors import ChatseekError
from chatseek_lexical.query import Budgets, SearchRequest, search
from chatseek_lexical.query.envelope import Item
from chatseek_lexical.query.limits import Deadline

from .conftest_query import BOB_CHAT, EXPATS, NEWS, RICH, build_store, ts

NOW = ts("2026-04-02T12:00:00Z")
MADRID = "Europe/Madrid"
_PREFIX = {EXPATS: "E", BOB_CHAT: "B", NEWS: "N"}


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[db.Connection]:
    connection = build_store(Path(tmp_path_factory.mktemp("rich")), RICH)
    yield connection
    connection.close()


def labels(spec: str) -> set[str]:
    """``"E1-E3 B101"`` → {E1, E2, E3, B101}."""
    out: set[str] = set()
    for part in spec.split():
        if "-" in part:
            first, last = part.split("-")
            prefix = first[0]
            out.update(f"{prefix}{n}" for n in range(int(first[1:]), int(last[1:]) + 1))
        else:
            out.add(part)
    return out


def run(conn: db.Connection, query: str, **options: object) -> list[str]:
    request = SearchRequest(query, timezone=MADRID, now=NOW, limit=1000)
    envelope = search(conn, dataclasses.replace(request, **options))  # type: ignore[arg-type]
    return [f"{_PREFIX[item.chat_id]}{item.msg_id}" for item in envelope.items]


RESULTS: list[tuple[str, str]] = [
    # --- text: normalised words, phrases, patterns
    ("invoice", "E4 E10 B101"),
    ("text:invoice", "E4 E10 B101"),
    ("INVOICE", "E4 E10 B101"),
    ('"invoice attached"', "E4"),
    ('"attached invoice"', "E4"),
    ('"due total"', ""),
    ('"alpha beta"', "B106 B107"),
    ('"beta alpha"', ""),
    ('"gamma alpha"', "B107"),
    ("alpha beta", "B106 B107"),
    ("alpha-beta", "B106 B107"),
    ("cafe", "E12"),
    ("café", "E12"),
    ("CAFÉ", "E12"),
    ("квартиру", "E3"),
    ("Квартиру", "E3"),
    ("квартира", ""),
    ("ищу квартиру", "E3"),
    ("total due", "E4"),
    ("pdf", "E4"),
    ("png", "B106"),
    ("inv*", "E4 E10 B101"),
    ("text:/inv.*/", "E4 E10 B101"),
    ("to?ight", "E12"),
    ("*oice", "E4 E10 B101"),
    ("v*ce", "E10"),
    ("text:/[0-9]+/", "E2 E4 E6 E7 E9 B102"),
    ("text:/.*2/", "E6 E7 E11 B102"),
    ("zz*", ""),
    ("text:[a TO b]", "E1 E2 E4 E5 E6 E8 E9 E10 B106 B107"),
    ("text:{a TO b}", "E1 E4 E5 E6 E8 E9 E10 B106 B107"),
    ("*", "E1-E12 B101 B102 B104-B107"),
    # --- body: original text, case-sensitive, whole value
    ('body:"alpha beta gamma"', "B106"),
    ('body:"Alpha beta gamma"', ""),
    ("body:Invoice*", "E4"),
    ("body:*invoice?", "B101"),
    ("body:/.*invoice.*/", "E10 B101"),
    ("body:/.*[Ii]nvoice.*/", "E4 E10 B101"),
    ("body:/Meet here/", "B104"),
    ('body:""', "B103"),
    ("body:[A TO C]", "E8"),
    ("body:/.*\\d{4} \\d{4}.*/", "E7 B102"),
    # --- from: names resolved within scope
    ("from:@asmith", "E1 E4 E5 E8 E9 E12"),
    ("from:asmith", "E1 E4 E5 E8 E9 E12"),
    ('from:"Alice Smith"', "E1 E4 E5 E8 E9 E12"),
    ('from:"alice smith"', "E1 E4 E5 E8 E9 E12"),
    ("from:1001", "E1 E4 E5 E8 E9 E12"),
    ("from:jones", "E2 E7 E11"),
    ("from:иван", "E3 E6 E10"),
    ("from:@ivan", "E3 E6 E10"),
    ("from:bob", "B101 B103 B104 B106 B107"),
    ("from:me", "B102 B105"),
    ("from:al*", "E1 E2 E4 E5 E7 E8 E9 E11 E12"),
    ("from:/alice.*/", "E1 E2 E4 E5 E7 E8 E9 E11 E12"),
    ("from:*jones", "E2 E7 E11"),
    ("from:nobody", ""),
    ("from:carol", ""),
    ("in:all from:carol", "N501 N502"),
    ("from:(jones OR bob) AND alpha", "B106 B107"),
    ('from:["alice k" TO "alice zz"]', "E1 E4 E5 E8 E9 E12"),
    ('from:{"alice jones" TO b]', "E1 E4 E5 E8 E9 E12"),
    ('from:["alice jones" TO b]', "E1 E2 E4 E5 E7 E8 E9 E11 E12"),
    ('chat:["Expats Madrid" TO "Expats Madrid"]', "E1-E12"),
    # --- chat
    ('chat:"Expats Madrid"', "E1-E12"),
    ("chat:expats", "E1-E12"),
    ("chat:expats*", "E1-E12"),
    ("chat:madrid*", ""),
    ("chat:@bob", "B101-B107"),
    ("chat:2002", "B101-B107"),
    ("chat:1111111111", "E1-E12"),
    ('chat:"-1001111111111"', "E1-E12"),
    ('chat:"Work News"', ""),
    ('in:all chat:"Work News"', "N501 N502"),
    ("chat:expats invoice", "E4 E10"),
    # --- dates in Europe/Madrid (23-hour and 25-hour days)
    ("date:2026-03-29", "E3 E4 E5 B103 B104"),
    ("date:2026-03-28", "E2 B101 B102"),
    ("date:2026-03-30", "E6 E7 E8 B105"),
    ("date:2025-10-26", "E12"),
    ("date:[2026-03-29 TO 2026-03-30]", "E3 E4 E5 E6 E7 E8 B103 B104 B105"),
    ("date:{2026-03-28 TO 2026-03-30}", "E3 E4 E5 B103 B104"),
    ("date:[2026-03-29 TO 2026-03-30}", "E3 E4 E5 B103 B104"),
    ("date:{2026-03-29 TO 2026-03-31]", "E6 E7 E8 E9 B105 B106"),
    ("date:[* TO 2026-03-27]", "E1 E12"),
    ("date:[2026-04-01 TO *]", "E10 E11 B107"),
    ("date:[* TO *]", "E1-E12 B101-B107"),
    ("date<2026-03-28", "E1 E12"),
    ("date<=2026-03-28", "E1 E2 E12 B101 B102"),
    ("date>2026-03-31", "E10 E11 B107"),
    ("date>=2026-03-31", "E9 E10 E11 B106 B107"),
    ("date:2026-03", "E1-E9 B101-B106"),
    ("date:2025", "E12"),
    ("date:today", "E11"),
    ("date:yesterday", "E10 B107"),
    ("date>=2d", "E9 E10 E11 B106 B107"),
    ("date:2d", "E9 E10 E11 B106 B107"),
    ("date>=36h", "E10 E11 B107"),
    ("date>=90m", ""),
    ("date>=1w", "E1-E11 B101-B107"),
    ('date>="2026-03-29T03:30:00+02:00"', "E4-E11 B103-B107"),
    ('date>"2026-03-29T03:30:00+02:00"', "E5-E11 B103-B107"),
    ('date:"2026-03-29T03:30:00+02:00"', "E4"),
    ('date:"2026-03-29T01:30:00Z"', "E4"),
    ('date:"2026-03-29T03:30"', "E4"),
    ('date:["2026-03-29T03:30:00+02:00" TO "2026-03-29T12:00:00Z"]', "E4 B103"),
    ('date:{"2026-03-29T03:30:00+02:00" TO "2026-03-29T12:00:00Z"}', ""),
    ("date:[2026-03-29 TO now]", "E3-E11 B103-B107"),
    # --- kind
    ("kind:group", "E1-E12"),
    ("kind:private", "B101-B107"),
    ("kind=private", "B101-B107"),
    ("kind:channel", ""),
    ("in:all kind:channel", "N501 N502"),
    ("kind:service", "E8"),
    ("kind:bot", ""),
    ("kind:saved", ""),
    ("kind:unknown", ""),
    ("kind:group -kind:service", "E1-E7 E9-E12"),
    # --- has
    ("has:attachment", "E4 E5 E10 B103 B104 B106 B107"),
    ("has:file", "E4 B106"),
    ("has:photo", "E5"),
    ("has:image", "E5 B106"),
    ("has:video", ""),
    ("has:audio", ""),
    ("has:voice", "E10"),
    ("has:sticker", "B103"),
    ("has:location", "B104"),
    ("has:contact", "B107"),
    ("has:poll", ""),
    ("has:link", "E9"),
    # --- topic (needs exactly one required chat)
    ('chat:"Expats Madrid" AND topic:10', "E2 E3 E5"),
    ("chat:expats topic:20", "E4 E6 E7 E10"),
    ("chat:expats topic:1", "E1 E8 E9 E11 E12"),
    ("chat:expats (topic:10 OR topic:20) has:attachment", "E4 E5 E10"),
    # --- in: scope
    ("in:all invoice", "E4 E10 B101 N501"),
    ("in:telegram invoice", "E4 E10 B101 N501"),
    ('in:"telegram/work" invoice', "N501"),
    ("in:telegram/work invoice", "N501"),
    ('in:"telegram/me" invoice', "E4 E10 B101"),
    ('invoice -in:"telegram/me"', "N501"),
    ("in:all OR invoice", "E1-E12 B101-B107 N501 N502"),
    # --- presets
    ("preset:password", "E11"),
    ("preset:code", ""),
    ("preset:card", "E7"),
    ("preset:bank", "B102"),
    ("preset:passport", "B105"),
    ("preset:phone", "E6"),
    ("preset:email", "E6"),
    ("preset:telegram-link", "E9"),
    ("preset:url", "E9"),
    ("preset:contact", "E6 B107"),
    ("preset:location", "B104"),
    ("preset:api-key", ""),
    ("in:all preset:api-key", "N502"),
    ("preset:secret", ""),
    ("preset:phone OR preset:card", "E6 E7"),
    ("kind:private -preset:bank", "B101 B103-B107"),
    ("preset:email preset:phone", "E6"),
    # --- tags: the message, its chat or its sender
    ("tag:flat", "E2 E7 E11"),
    ("tag:home", "B101-B107"),
    ("tag:HOME", "B101-B107"),
    ("tag:money", "B102"),
    ("tag:news", ""),
    ("in:all tag:news", "N501 N502"),
    ("tag:h*", "B101-B107"),
    ("tag:/mon.*/", "B102"),
    ("tag:nothing", ""),
    ("tag:flat OR tag:money", "E2 E7 E11 B102"),
    ("tag:[g TO i]", "B101-B107"),
    ("tag:{flat TO money}", "B101-B107"),
    # --- filename, mime, size (1024-based)
    ("filename:invoice-2026-03.pdf", "E4"),
    ('filename:"INVOICE-2026-03.PDF"', "E4"),
    ("filename:*.pdf", "E4"),
    ("filename:*.png", "B106"),
    ("filename:plan*", "B106"),
    ("filename:/Plan\\..*/", "B106"),
    ("filename:[i TO j]", "E4"),
    ("filename:[PLAN TO PLAN.PNG]", "B106"),
    ('mime:"application/pdf"', "E4"),
    ("mime:image/*", "E5 B103 B106"),
    ("mime:audio/ogg", "E10"),
    ("mime:/image\\/(png|jpeg)/", "E5 B106"),
    ("size>1MB", "E5 B106"),
    ("size>=2MB", "E5 B106"),
    ("size>2MB", "B106"),
    ("size<100KB", "E10 B103"),
    ("size:[200KB TO 3MB]", "E4 E5"),
    ("size:{250000 TO *]", "E5 B106"),
    ("size:30KB", "E10"),
    # --- Boolean structure
    ("invoice AND has:file", "E4"),
    ("invoice -has:file", "E10 B101"),
    ("invoice OR has:sticker", "E4 E10 B101 B103"),
    ("(from:jones OR from:ivan) AND date:2026-03-30", "E6 E7"),
    ("kind:private AND NOT alpha", "B101-B105"),
    ("*:* -kind:group", "B101-B107"),
    ("-kind:group", ""),
    ("NOT invoice", ""),
    ("alpha OR -beta", ""),
    ("gamma OR -beta", ""),
    ("+alpha OR invoice", "B106 B107"),
    ('""', ""),
    ('alpha ""', "B106 B107"),
    ("alpha OR ...", "B106 B107"),
    ("alpha AND (-beta)", ""),
    ("invoice OR квартиру date:2026-03-29", "E3 E4"),
    ("invoice OR (квартиру AND date:2026-03-29)", "E3 E4 E10 B101"),
    ("has:attachment AND NOT (has:file OR has:photo)", "E10 B103 B104 B107"),
    ("*:*", "E1-E12 B101-B107"),
]


@pytest.mark.parametrize(("query", "expected"), RESULTS)
def test_query_finds_exactly_the_expected_messages(
    conn: db.Connection, query: str, expected: str
) -> None:
    assert set(run(conn, query)) == labels(expected)


@pytest.mark.parametrize(
    ("query", "timezone", "expected"),
    [
        ("date:2026-03-29", "UTC", "E4 E5 E6 B103 B104"),
        ("date:2026-03-29", "Asia/Tokyo", "E2 E3 E4 B103 B104"),
        ("date:2026-03-28", "America/New_York", "E2 E3 E4 B101 B102"),
        ('date:"2026-03-29T03:30"', "UTC", ""),
    ],
)
def test_calendar_days_follow_the_request_timezone(
    conn: db.Connection, query: str, timezone: str, expected: str
) -> None:
    assert set(run(conn, query, timezone=timezone)) == labels(expected)


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("from:alice", "AMBIGUOUS_NAME"),
        ("from:Alice", "AMBIGUOUS_NAME"),
        ("topic:10", "INVALID_VALUE"),
        ("(chat:expats OR chat:bob) topic:10", "INVALID_VALUE"),
        ("chat:expats chat:bob topic:10", "INVALID_VALUE"),
        ('in:"telegram/nope" alpha', "INVALID_VALUE"),
        ('date:"2026-03-29T02:30"', "INVALID_VALUE"),
    ],
)
def test_execution_errors_have_a_reason(conn: db.Connection, query: str, reason: str) -> None:
    with pytest.raises(ChatseekError) as caught:
        run(conn, query)
    assert caught.value.reason == reason


def test_ambiguous_name_lists_the_candidates_and_the_span(conn: db.Connection) -> None:
    with pytest.raises(ChatseekError) as caught:
        run(conn, "invoice from:alice")
    assert caught.value.candidates == ["Alice Jones (id 1002)", "Alice Smith @asmith (id 1001)"]
    assert caught.value.metadata["span"] == "8,18"


def test_names_resolve_only_within_the_scope(conn: db.Connection) -> None:
    assert run(conn, "from:carol") == []
    assert set(run(conn, "from:carol", source="all")) == {"N501", "N502"}
    assert set(run(conn, "invoice", source="telegram/work")) == {"N501"}


def test_source_all_widens_like_in_all(conn: db.Connection) -> None:
    assert set(run(conn, "invoice", source="all")) == set(run(conn, "in:all invoice"))


def test_request_chats_narrow_the_scope(conn: db.Connection) -> None:
    assert set(run(conn, "invoice", chats=("Bob Builder",))) == {"B101"}
    assert set(run(conn, "topic:10", chats=("expats",))) == {"E2", "E3", "E5"}
    with pytest.raises(ChatseekError) as caught:
        run(conn, "invoice", chats=("Nowhere",))
    assert caught.value.reason == "CHAT_NOT_FOUND"


def test_unknown_account_and_source_are_invalid_values(conn: db.Connection) -> None:
    for options in ({"account": "nobody"}, {"source": "whatsapp"}):
        with pytest.raises(ChatseekError) as caught:
            run(conn, "invoice", **options)
        assert caught.value.reason == "INVALID_VALUE"


def test_an_explicit_account_is_searched_instead_of_the_active_one(conn: db.Connection) -> None:
    assert set(run(conn, "invoice", account="work")) == {"N501"}


# --- ordering


def test_relevance_order_applies_when_every_branch_requires_words(conn: db.Connection) -> None:
    envelope = search(conn, SearchRequest("invoice", now=NOW, timezone=MADRID))
    assert envelope.query.order == "relevance"
    envelope = search(conn, SearchRequest("invoice OR has:sticker", now=NOW, timezone=MADRID))
    assert envelope.query.order == "newest"
    envelope = search(conn, SearchRequest("invoice has:file", now=NOW, timezone=MADRID))
    assert envelope.query.order == "relevance"


@pytest.mark.parametrize(
    "query",
    ["alpha AND beta", "alpha beta -delta", "alpha gamma -delta", '"alpha beta" AND gamma*'],
)
def test_a_rank_query_of_required_words_ranks_exactly_as_one_of_any_word(
    conn: db.Connection, query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chatseek_lexical.query import compile as compile_module
    from chatseek_lexical.query.parser import parse

    assert compile_module._all_required(parse(query).root)
    anded = run(conn, query)
    assert len(anded) >= 2
    monkeypatch.setattr(compile_module, "_all_required", lambda node: False)
    assert run(conn, query) == anded


def test_optional_words_keep_the_rank_query_of_any_word() -> None:
    from chatseek_lexical.query import compile as compile_module
    from chatseek_lexical.query.parser import parse

    for query in ("alpha OR beta", "alpha AND (beta OR gamma)", "alpha OR from:bob"):
        assert not compile_module._all_required(parse(query).root)


def test_newest_order_is_by_time_descending(conn: db.Connection) -> None:
    assert run(conn, "invoice", newest=True) == ["E10", "E4", "B101"]
    assert run(conn, "has:file") == ["B106", "E4"]


def test_bm25_ranks_the_denser_match_first(conn: db.Connection) -> None:
    assert run(conn, "invoice")[0] == "E4"


@pytest.mark.parametrize(("query", "_"), RESULTS[:40])
def test_ordering_never_changes_the_result_set(conn: db.Connection, query: str, _: str) -> None:
    assert sorted(run(conn, query)) == sorted(run(conn, query, newest=True))


# --- paging


@pytest.mark.parametrize(
    ("query", "newest"),
    [("*:*", False), ("alpha OR invoice OR a", False), ("alpha OR invoice OR a", True)],
)
def test_pages_concatenate_to_the_whole_result_in_order(
    conn: db.Connection, query: str, newest: bool
) -> None:
    whole = search(conn, SearchRequest(query, now=NOW, limit=1000, newest=newest)).items
    seen: list[Item] = []
    token = None
    pages = 0
    while True:
        envelope = search(
            conn, SearchRequest(query, now=NOW, limit=3, page_token=token, newest=newest)
        )
        pages += 1
        assert envelope.page == pages
        seen.extend(envelope.items)
        if not envelope.has_more:
            assert envelope.next_page_token is None
            break
        assert len(envelope.items) == 3
        token = envelope.next_page_token
    assert [i.locator for i in seen] == [i.locator for i in whole]


@pytest.mark.parametrize(
    "query", ["alpha OR invoice OR a", "alpha beta", "alpha from:bob", "gamma kind:private"]
)
def test_a_relevance_pool_that_must_grow_gives_the_same_pages(
    conn: db.Connection, query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chatseek_lexical.query import execute

    whole = search(conn, SearchRequest(query, now=NOW, limit=1000)).items
    assert len(whole) >= 2
    # A pool of one scored match, growing by two: pages end both when the pool ran out of
    # matches and when a full page's last row scores below the pool's worst. (This fixture has
    # no tie placed so that a weakened below-the-worst check would change a page.)
    monkeypatch.setattr(execute, "POOL_MIN", 1)
    monkeypatch.setattr(execute, "POOL_FACTOR", 1)
    monkeypatch.setattr(execute, "POOL_GROWTH", 2)
    seen: list[Item] = []
    token = None
    while True:
        envelope = search(conn, SearchRequest(query, now=NOW, limit=2, page_token=token))
        assert envelope.query.order == "relevance"
        seen.extend(envelope.items)
        if not envelope.has_more:
            break
        token = envelope.next_page_token
    assert [i.locator for i in seen] == [i.locator for i in whole]


@pytest.mark.parametrize(
    "query",
    [
        "alpha beta",
        "invoice AND NOT attached",
        "(alpha OR invoice) AND beta",
        '"invoice attached" AND NOT gamma',
        "alpha AND from:bob",
        "invoice OR (alpha AND NOT kind:private)",
    ],
)
def test_a_relevance_page_holds_exactly_the_messages_the_newest_order_does(
    conn: db.Connection, query: str
) -> None:
    # A relevance page checks its scored matches row by row (Compiler.pool_where); the newest
    # order runs the query as compiled for a scan. Both must find the same messages.
    ranked = search(conn, SearchRequest(query, now=NOW, limit=1000))
    newest = search(conn, SearchRequest(query, now=NOW, limit=1000, newest=True))
    assert ranked.query.order == "relevance" and newest.query.order == "newest"
    assert ranked.items
    assert sorted(i.locator for i in ranked.items) == sorted(i.locator for i in newest.items)


def test_page_token_of_another_query_or_a_damaged_one_is_rejected(conn: db.Connection) -> None:
    first = search(conn, SearchRequest("*:*", now=NOW, limit=2))
    assert first.next_page_token
    for query, token in [
        ("invoice", first.next_page_token),
        ("*:*", "garbage!"),
        ("*:*", first.next_page_token[:-4]),
    ]:
        with pytest.raises(ChatseekError) as caught:
            search(conn, SearchRequest(query, now=NOW, limit=2, page_token=token))
        assert caught.value.reason == "INVALID_VALUE"


@pytest.mark.parametrize("options", [{"limit": 0}, {"limit": 1001}, {"context": 21}])
def test_limit_and_context_are_bounded(conn: db.Connection, options: dict[str, int]) -> None:
    with pytest.raises(ChatseekError) as caught:
        search(conn, SearchRequest("invoice", **options))  # type: ignore[arg-type]
    assert caught.value.reason == "INVALID_VALUE"


# --- envelope


def test_envelope_item_carries_locator_chat_sender_date_snippet_and_link(
    conn: db.Connection,
) -> None:
    envelope = search(conn, SearchRequest('"invoice attached"', now=NOW, timezone=MADRID))
    item = envelope.items[0].to_json()
    assert item["locator"] == f"tg:me/{EXPATS}/4"
    assert item["chat"] == {
        "id": EXPATS,
        "type": "forum",
        "title": "Expats Madrid",
        "username": None,
    }
    assert item["sender"] == {"id": 1001, "name": "Alice Smith"}
    assert item["date"] == "2026-03-29T01:30:00Z"
    assert item["text"] == "Invoice attached"
    assert item["snippet"] == "**Invoice** **attached**"
    assert item["link"] == "https://t.me/c/1111111111/20/4"
    assert item["fallback_link"] is None
    assert "context" not in item


def test_private_chat_items_link_with_openmessage_and_a_fallback(conn: db.Connection) -> None:
    item = search(conn, SearchRequest("paying", now=NOW)).items[0]
    assert item.link == "tg://openmessage?user_id=2002&message_id=102"
    assert item.fallback_link == "tg://user?id=2002"


def test_channel_items_link_to_the_public_username(conn: db.Connection) -> None:
    item = search(conn, SearchRequest("quarterly", now=NOW, source="all")).items[0]
    assert item.link == "https://t.me/worknews/501"


def test_context_returns_chronological_neighbours_in_the_hit_chat(conn: db.Connection) -> None:
    envelope = search(conn, SearchRequest("paying", now=NOW, context=2))
    item = envelope.items[0].to_json()
    assert [c["msg_id"] for c in item["context"]["before"]] == [101]
    assert [c["msg_id"] for c in item["context"]["after"]] == [103, 104]
    assert item["context"]["after"][0]["locator"] == f"tg:me/{BOB_CHAT}/103"


def test_snippet_is_a_window_around_the_first_hit(conn: db.Connection) -> None:
    long_text = search(conn, SearchRequest("leche", now=NOW)).items[0]
    assert "**leche**" in long_text.snippet


def test_zero_hits_still_carry_query_words_ready_and_coverage(conn: db.Connection) -> None:
    envelope = search(conn, SearchRequest("zzzz", now=NOW, timezone=MADRID)).to_json()
    assert envelope["items"] == []
    assert envelope["has_more"] is False
    assert envelope["page"] == 1
    assert envelope["query"] == {
        "language": "lucene-v1",
        "version": 1,
        "fields_version": 1,
        "preset_version": 1,
        "timezone": MADRID,
        "order": "relevance",
    }
    assert envelope["words_ready"] is True
    coverage = envelope["coverage"]
    assert coverage["inventory_complete"] is False
    assert coverage["accounts"] == [
        {"account": "me", "provider": "telegram", "chats": 2, "chats_complete": 1}
    ]
    chats = {c["chat_id"]: c for c in coverage["chats"]}
    assert chats[EXPATS]["history_complete"] is True
    assert chats[EXPATS]["last_fetched_at"] == "2026-04-03T00:00:00Z"
    assert chats[BOB_CHAT]["history_complete"] is False
    assert chats[BOB_CHAT]["last_fetched_at"] is None


def test_coverage_narrows_to_the_required_chat(conn: db.Connection) -> None:
    coverage = search(conn, SearchRequest("chat:@bob alpha", now=NOW)).coverage
    assert [c.chat_id for c in coverage.chats] == [BOB_CHAT]
    coverage = search(conn, SearchRequest("in:all invoice", now=NOW)).coverage
    assert {c.chat_id for c in coverage.chats} == {EXPATS, BOB_CHAT, NEWS}


def test_default_timezone_is_the_systems_and_is_echoed(conn: db.Connection) -> None:
    envelope = search(conn, SearchRequest("invoice", now=NOW))
    assert envelope.query.timezone


def test_unknown_timezone_is_an_invalid_value(conn: db.Connection) -> None:
    with pytest.raises(ChatseekError) as caught:
        search(conn, SearchRequest("invoice", timezone="Mars/Olympus"))
    assert caught.value.reason == "INVALID_VALUE"


# --- word index readiness


def test_text_query_while_the_word_index_is_not_ready_is_index_not_ready(
    conn: db.Connection,
) -> None:
    for query in ("invoice", "has:file OR inv*", "-alpha *:*", "text:/x.*/"):
        with pytest.raises(ChatseekError) as caught:
            search(conn, SearchRequest(query, words_ready=False))
        assert caught.value.reason == "INDEX_NOT_READY"


def test_metadata_query_runs_while_the_word_index_is_not_ready(conn: db.Connection) -> None:
    envelope = search(conn, SearchRequest("has:file body:/.*a.*/", words_ready=False))
    assert envelope.words_ready is False
    assert [i.msg_id for i in envelope.items] == [106, 4]


# --- execution budgets


@pytest.mark.parametrize(
    ("query", "budgets", "budget"),
    [
        ("body:/.*a.*/", Budgets(candidates=5), "candidates"),
        ("preset:card", Budgets(candidates=5), "candidates"),
        ("body:/.*a.*/", Budgets(body_bytes_scanned=100), "body_bytes_scanned"),
        ("text:*", Budgets(vocabulary_expansions=5), "vocabulary_expansions"),
        ("text:/.*e.*/", Budgets(vocabulary_expansions=5), "vocabulary_expansions"),
        ("filename:/.*/", Budgets(candidates=1), "candidates"),
        ("invoice", Budgets(time_ms=0), "time_ms"),
        ("has:file", Budgets(time_ms=0), "time_ms"),
    ],
)
def test_execution_budget_is_an_error_not_a_partial_answer(
    conn: db.Connection, query: str, budgets: Budgets, budget: str
) -> None:
    with pytest.raises(ChatseekError) as caught:
        search(conn, SearchRequest(query, now=NOW, budgets=budgets))
    assert caught.value.reason == "QUERY_LIMIT"
    assert caught.value.metadata["budget"] == budget


def test_required_context_narrows_post_filter_candidates(conn: db.Connection) -> None:
    tight = Budgets(candidates=3)
    envelope = search(conn, SearchRequest("chat:@bob alpha body:/.*beta.*/", budgets=tight))
    assert {i.msg_id for i in envelope.items} == {106, 107}
    envelope = search(conn, SearchRequest("has:file preset:card", budgets=tight))
    assert envelope.items == ()


def test_optional_post_filter_beside_a_required_clause_is_not_evaluated(
    conn: db.Connection,
) -> None:
    tight = Budgets(candidates=0)
    envelope = search(conn, SearchRequest("+has:file OR preset:card", budgets=tight))
    assert {i.msg_id for i in envelope.items} == {4, 106}


def test_the_time_budget_counts_the_querys_own_work_not_a_busy_machine() -> None:
    deadline = Deadline(budget_ms=50)
    time.sleep(0.2)  # another process has the CPU: wall time passes, this thread's does not
    assert not deadline.expired()
    stop = time.monotonic() + 10
    while not deadline.expired() and time.monotonic() < stop:
        sum(range(10_000))  # the query itself working
    assert deadline.expired()
