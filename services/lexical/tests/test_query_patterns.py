"""Lucene regexes and wildcards translated to RE2 and GLOB."""

from __future__ import annotations

import pytest

from chatseek_core.errors import ChatseekError
from chatseek_lexical.query import Budgets
from chatseek_lexical.query.patterns import (
    compile_regex,
    compile_wildcard,
    prefix_successor,
    wildcard_glob,
)

SPAN = (0, 0)
BUDGETS = Budgets()


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("abc", ["abc"], ["ab", "abcd", "xabc"]),
        ("a.c", ["abc", "a\nc", "aéc"], ["ac", "abbc"]),
        ("ab*", ["a", "abbb"], ["b"]),
        ("ab+", ["ab", "abbb"], ["a"]),
        ("ab?", ["a", "ab"], ["abb"]),
        ("a{2}", ["aa"], ["a", "aaa"]),
        ("a{2,}", ["aa", "aaaa"], ["a"]),
        ("a{1,2}", ["a", "aa"], ["aaa", ""]),
        ("a{3,2}", [], ["aa", "aaa", ""]),
        ("(ab|cd)e", ["abe", "cde"], ["abcde"]),
        ("[a-c]x", ["ax", "cx"], ["dx"]),
        ("[^a-c]x", ["dx", "\nx"], ["ax"]),
        ("[]a]", ["]", "a"], ["b"]),
        ('"a.b"c', ["a.bc"], ["axbc"]),
        ("@", ["", "anything at all"], []),
        ("a@", ["a", "abc"], ["ba"]),
        ("#", [], ["", "a"]),
        ("a|#", ["a"], [""]),
        ("()a", ["a"], ["()a"]),
        ("\\d+", ["123"], ["12a"]),
        ("\\w\\s\\W", ["a !", "a  "], ["a b"]),
        ("[\\d-]+", ["1-2"], ["a"]),
        ("\\.", ["."], ["a"]),
        ("\\q", ["q"], ["\\q"]),
        ("*a", ["*a"], ["a", "ba"]),
        ("a||b", ["a", "|b"], ["b"]),
        ("{x", ["{x"], ["x"]),
        ("<1-10>", ["1", "5", "10", "007"], ["0", "11", "a"]),
        ("<01-10>", ["01", "10"], ["1", "010", "11"]),
        ("<1-9>", ["1", "9"], ["01", "10"]),
        ("<10-1>", ["1", "10"], ["11"]),
        ("<95-205>", ["95", "99", "100", "199", "205"], ["94", "206", "1000"]),
        ("", [""], ["a"]),
        ("инвойс.*", ["инвойсы"], ["invoice"]),
    ],
)
def test_lucene_regex_matches_whole_values(
    pattern: str, matching: list[str], not_matching: list[str]
) -> None:
    compiled = compile_regex(pattern, SPAN, BUDGETS)
    for value in matching:
        assert compiled.matches(value), (pattern, value)
    for value in not_matching:
        assert not compiled.matches(value), (pattern, value)


@pytest.mark.parametrize(
    ("pattern", "prefix"),
    [
        ("invoice.*", "invoice"),
        ("inv(oice|entory)", "inv"),
        ("(abc|abd)x", "ab"),
        ("ab?c", "a"),
        ("ab+c", "ab"),
        ("a{2}b", "a"),
        ('"a.b"c.*', "a.bc"),
        (".*voice", ""),
        ("[a-c]x", ""),
        ("a{0,2}b", ""),
    ],
)
def test_regex_literal_prefix_bounds_the_vocabulary_scan(pattern: str, prefix: str) -> None:
    assert compile_regex(pattern, SPAN, BUDGETS).prefix == prefix


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(a", "SYNTAX_ERROR"),
        ("a)", "SYNTAX_ERROR"),
        ("[a", "SYNTAX_ERROR"),
        ("[]", "SYNTAX_ERROR"),
        ("a{", "SYNTAX_ERROR"),
        ("a{x}", "SYNTAX_ERROR"),
        ("a{2", "SYNTAX_ERROR"),
        ("[z-a]", "SYNTAX_ERROR"),
        ("\\", "SYNTAX_ERROR"),
        ('"abc', "SYNTAX_ERROR"),
        ("<1-2", "SYNTAX_ERROR"),
        ("<a-b>", "SYNTAX_ERROR"),
        ("<-1-2>", "SYNTAX_ERROR"),
        ("<1-99999999999>", "SYNTAX_ERROR"),
        ("a{99999999999}", "SYNTAX_ERROR"),
        ("a&b", "UNSUPPORTED_REGEX"),
        ("~a", "UNSUPPORTED_REGEX"),
        ("a{1001}", "QUERY_LIMIT"),
        ("(abcdefghijklmnop){700}", "QUERY_LIMIT"),
    ],
)
def test_bad_regexes_raise_typed_errors(pattern: str, reason: str) -> None:
    with pytest.raises(ChatseekError) as caught:
        compile_regex(pattern, (3, 9), BUDGETS)
    assert caught.value.reason == reason
    if reason != "QUERY_LIMIT":
        assert caught.value.metadata["span"] == "3,9"


@pytest.mark.parametrize(
    ("pattern", "folded", "matching", "not_matching", "prefix"),
    [
        ("te?t", True, ["test", "text"], ["tet", "tests"], "te"),
        ("*oice", True, ["invoice", "oice"], ["invoices"], ""),
        ("Caf*", True, ["cafe", "cafeteria"], ["Cafe"], "caf"),
        ("Caf*", False, ["Cafe"], ["cafe"], "Caf"),
        ("a\\*b", False, ["a*b"], ["axb"], "a*b"),
        ("a\\?*", False, ["a?", "a?x"], ["ab"], "a?"),
        ("x.y*", False, ["x.y", "x.yz"], ["xay"], "x.y"),
    ],
)
def test_wildcards_match_whole_values(
    pattern: str, folded: bool, matching: list[str], not_matching: list[str], prefix: str
) -> None:
    compiled = compile_wildcard(pattern, SPAN, BUDGETS, folded=folded)
    assert compiled.prefix == prefix
    for value in matching:
        assert compiled.matches(value), (pattern, value)
    for value in not_matching:
        assert not compiled.matches(value), (pattern, value)


@pytest.mark.parametrize(
    ("pattern", "glob"),
    [
        ("*.pdf", "*.pdf"),
        ("a?c", "a?c"),
        ("a\\*b", "a[*]b"),
        ("a\\?b", "a[?]b"),
        ("[x]*", "[[]x]*"),
        ("C\\\\d", "C\\d"),
    ],
)
def test_wildcards_become_escaped_globs(pattern: str, glob: str) -> None:
    assert wildcard_glob(pattern, folded=False) == glob


@pytest.mark.parametrize(
    ("prefix", "successor"),
    [("inv", "inw"), ("a\U0010ffff", "b"), ("\U0010ffff", None), ("\ud7ff", "\ue000"), ("", None)],
)
def test_prefix_successor_bounds_every_string_with_the_prefix(
    prefix: str, successor: str | None
) -> None:
    assert prefix_successor(prefix) == successor
