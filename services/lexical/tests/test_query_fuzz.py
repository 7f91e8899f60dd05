"""Fuzzing the parser and the whole pipeline: only typed errors or valid trees, never a crash."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatseek_core import db
from chatseek_core.errors import ChatseekError, InvalidArgument
from chatseek_lexical.query import (
    SearchRequest,
    parse,
    search,
    to_sexpr,
    tree_from_json,
    tree_to_json,
    validate,
)

from .conftest_query import RICH, build_store

PIECES = [
    "alpha",
    "beta",
    "инвойс",
    "😀",
    "a",
    "1",
    "AND",
    "OR",
    "NOT",
    "&&",
    "||",
    "!",
    "+",
    "-",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ":",
    "^",
    "^2",
    "~",
    "~2",
    "*",
    "?",
    "\\",
    "/",
    '"',
    " TO ",
    "text:",
    "body:",
    "from:",
    "chat:",
    "date:",
    "kind:",
    "has:",
    "topic:",
    "in:",
    "preset:",
    "filename:",
    "mime:",
    "size:",
    "tag:",
    "foo:",
    "*:*",
    "date>=",
    "7d",
    "2026-03-29",
    "size>",
    "10MB",
    "=",
    "@2",
    "fn:",
    "\\u0041",
    "\\u12",
    "/a.*/",
    "/(/",
    "{a TO b]",
    "[* TO *]",
    "group",
    "photo",
    "card",
    "all",
    "telegram/me",
    " ",
    " ",
    "\t",
    "\u3000",
]


def _utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def check_parse(query: str) -> None:
    try:
        tree = parse(query)
    except ChatseekError as exc:
        assert isinstance(exc, InvalidArgument), exc
        span = exc.metadata.get("span")
        if span is not None:
            start, end = (int(x) for x in span.split(","))
            assert 0 <= start <= end <= _utf16_length(query)
        return
    encoded = tree_to_json(tree)
    assert to_sexpr(validate(tree_from_json(encoded)).root) == to_sexpr(tree.root)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_unicode_gives_a_tree_or_a_typed_error(query: str) -> None:
    check_parse(query)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_token_soup_gives_a_tree_or_a_typed_error(query: str) -> None:
    check_parse(query)


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=1, max_value=3000), st.sampled_from(["(", "(a ", "-(", "a OR ("]))
def test_deep_nesting_never_recurses_out_of_the_stack(depth: int, opener: str) -> None:
    query = opener * depth + "b" + ")" * depth
    try:
        parse(query)
    except ChatseekError as exc:
        assert exc.reason in ("QUERY_LIMIT", "SYNTAX_ERROR")


@settings(max_examples=20, deadline=None)
@given(st.integers(min_value=8193, max_value=100_000), st.sampled_from(["a ", "(", "é", "😀"]))
def test_huge_inputs_hit_the_query_size_budget(size: int, unit: str) -> None:
    query = (unit * size)[:size]
    with pytest.raises(ChatseekError) as caught:
        parse(query)
    assert caught.value.reason == "QUERY_LIMIT"
    assert caught.value.metadata["budget"] == "query_bytes"


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[db.Connection]:
    connection = build_store(Path(tmp_path_factory.mktemp("fuzz")), RICH)
    yield connection
    connection.close()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=25).map("".join))
def test_search_returns_an_envelope_or_a_typed_error(conn: db.Connection, query: str) -> None:
    try:
        envelope = search(conn, SearchRequest(query, timezone="Europe/Madrid", limit=5))
    except ChatseekError as exc:
        assert exc.reason in {
            "SYNTAX_ERROR",
            "UNKNOWN_FIELD",
            "INVALID_VALUE",
            "UNSUPPORTED_OPERATOR",
            "UNSUPPORTED_REGEX",
            "AMBIGUOUS_NAME",
            "QUERY_LIMIT",
        }, exc
        return
    assert len(envelope.items) <= 5
    assert envelope.to_json()["query"]["language"] == "lucene-v1"
