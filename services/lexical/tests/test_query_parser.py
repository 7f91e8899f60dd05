"""Conformance tables for the strict query parser: trees, errors (reason + span), budgets."""

from __future__ import annotations

import pytest

from chatseek_core.errors import ChatseekError, QueryLimit
from chatseek_lexical.query import Budgets, parse, to_sexpr
from chatseek_lexical.query.ast import Bool, Term
from chatseek_lexical.query.parser import parse_syntax

# (query, expected s-expression): ``+`` required, ``-`` prohibited, bare optional.
TREES: list[tuple[str, str]] = [
    # --- default operator, precedence, modifiers
    ("alpha", "alpha"),
    ("alpha beta", "(+alpha +beta)"),
    ("alpha beta gamma", "(+alpha +beta +gamma)"),
    ("alpha OR beta", "(alpha beta)"),
    ("alpha || beta", "(alpha beta)"),
    ("alpha AND beta", "(+alpha +beta)"),
    ("alpha && beta", "(+alpha +beta)"),
    ("alpha OR beta gamma", "(+(alpha beta) +gamma)"),
    ("alpha OR beta AND gamma", "(alpha (+beta +gamma))"),
    ("alpha AND beta OR gamma", "((+alpha +beta) gamma)"),
    ("alpha AND beta OR gamma AND delta", "((+alpha +beta) (+gamma +delta))"),
    ("alpha beta OR gamma", "(+alpha +(beta gamma))"),
    ("alpha OR beta OR gamma", "(alpha beta gamma)"),
    ("alpha AND beta AND gamma", "(+alpha +beta +gamma)"),
    ("a b c OR d e AND f", "(+a +b +(c d) +(+e +f))"),
    ("alpha && beta || gamma", "((+alpha +beta) gamma)"),
    ("-alpha", "(-alpha)"),
    ("NOT alpha", "(-alpha)"),
    ("!alpha", "(-alpha)"),
    ("+alpha", "alpha"),
    ("alpha -beta", "(+alpha -beta)"),
    ("alpha NOT beta", "(+alpha -beta)"),
    ("alpha AND NOT beta", "(+alpha -beta)"),
    ("alpha AND -beta", "(+alpha -beta)"),
    ("alpha !beta", "(+alpha -beta)"),
    ("alpha!beta", "(+alpha -beta)"),
    ("alpha OR -beta", "(alpha -beta)"),
    ("alpha OR NOT beta", "(alpha -beta)"),
    ("+alpha OR beta", "(+alpha beta)"),
    ("+alpha beta", "(+alpha +beta)"),
    ("-alpha -beta", "(-alpha -beta)"),
    ("-alpha OR -beta", "(-alpha -beta)"),
    ("alpha -beta OR gamma", "(+alpha +(gamma -beta))"),
    ("alpha OR beta -gamma", "(+(alpha beta) -gamma)"),
    ("NOT alpha AND beta", "(+beta -alpha)"),
    ("and or not", "(+and +or +not)"),
    ("ANDroid ORacle NOTary", "(+ANDroid +ORacle +NOTary)"),
    ("alpha - beta", "(+alpha +- +beta)"),
    ("alpha + beta", '(+alpha +"+" +beta)'),
    ("alpha ! beta", '(+alpha +"!" +beta)'),
    ("- -alpha", "(+- -alpha)"),
    ("a-b", "a-b"),
    ("a+b", '"a+b"'),
    ("a&b", '"a&b"'),
    ("&&b", '"&&b"'),
    # --- groups
    ("(alpha)", "alpha"),
    ("((alpha))", "alpha"),
    ("(alpha beta)", "(+alpha +beta)"),
    ("(alpha OR beta) gamma", "(+(alpha beta) +gamma)"),
    ("(alpha OR beta) AND (gamma OR delta)", "(+(alpha beta) +(gamma delta))"),
    ("alpha OR (beta gamma)", "(alpha (+beta +gamma))"),
    ("-(alpha beta)", "(-(+alpha +beta))"),
    ("alpha -(beta OR gamma)", "(+alpha -(beta gamma))"),
    ("(-alpha)", "(-alpha)"),
    ("alpha AND (-beta)", "(+alpha +(-beta))"),
    ("+(alpha OR beta)", "(alpha beta)"),
    ("(alpha (beta (gamma)))", "(+alpha +(+beta +gamma))"),
    ("(alpha OR beta) AND NOT (gamma OR delta)", "(+(alpha beta) -(gamma delta))"),
    # --- fields and field groups
    ("text:alpha", "alpha"),
    ("body:alpha", "body:alpha"),
    ("from:alice", "from:alice"),
    ("from : alice", "from:alice"),
    ("from:(alice OR bob)", "(from:alice from:bob)"),
    ("from:(alice bob)", "(+from:alice +from:bob)"),
    ("from:(alice text:beta)", "(+from:alice +beta)"),
    ("chat:(x OR y) alpha", "(+(chat:x chat:y) +alpha)"),
    ("fr\\om:x", "from:x"),
    ("from:@asmith", "from:@asmith"),
    ('chat:"Expats Madrid"', 'chat:"Expats Madrid"'),
    ("tag:work", "tag:work"),
    ("filename:report.pdf", "filename:report.pdf"),
    ('mime:"application/pdf"', 'mime:"application/pdf"'),
    ("mime:image/png", 'mime:"image/png"'),
    ("mime:image/*", 'mime:"image/"*'),
    # --- enums (``=`` is a synonym of ``:``)
    ("kind:group", "kind=group"),
    ("kind=group", "kind=group"),
    ("kind:GROUP", "kind=group"),
    ('kind:"private"', "kind=private"),
    ("kind:service", "kind=service"),
    ("has:photo", "has=photo"),
    ("has=file", "has=file"),
    ("has:attachment has:link", "(+has=attachment +has=link)"),
    ("in:all", "in=all"),
    ("in:telegram", "in=telegram"),
    ("in:telegram/work", 'in="telegram/work"'),
    ('in:"telegram/work"', 'in="telegram/work"'),
    ("in=telegram", "in=telegram"),
    ("preset:card", "preset=card"),
    ("preset:api-key", "preset=api-key"),
    ("preset=telegram-link", "preset=telegram-link"),
    ("topic:42", "topic:42"),
    ("topic=7", "topic:7"),
    ("from=alice", "from:alice"),
    ("foo=bar", '"foo=bar"'),
    ("alpha>beta", '"alpha>beta"'),
    # --- phrases and escapes
    ('"alpha beta"', '"alpha beta"'),
    ('"alpha \\"quoted\\" beta"', '"alpha \\"quoted\\" beta"'),
    ('""', '""'),
    ('body:"Hi there"', 'body:"Hi there"'),
    ("a\\:b", '"a:b"'),
    ("a\\ b", '"a b"'),
    ("\\(alpha\\)", '"(alpha)"'),
    ("\\u0041lpha", "Alpha"),
    ("\\uD83D\\uDE00", '"😀"'),
    ("caf\\u00e9", "café"),
    ("\\-alpha", "-alpha"),
    ("\\+1", '"+1"'),
    ("a\\\\b", '"a\\\\b"'),
    ("Ищу квартиру", "(+Ищу +квартиру)"),
    ("😀 beta", '(+"😀" +beta)'),
    # --- prefix, wildcard, regex
    ("inv*", "inv*"),
    ("text:inv*", "inv*"),
    ("te?t", 'w"te?t"'),
    ("te*t", 'w"te*t"'),
    ("*oice", 'w"*oice"'),
    ("?nvoice", 'w"?nvoice"'),
    ("*", 'w"*"'),
    ("text:*", 'w"*"'),
    ("in*v?ice*", 'w"in*v?ice*"'),
    ("\\*x*", '"*x"*'),
    ("a\\*b*c", 'w"a\\\\*b*c"'),
    ("body:Inv*", "body:Inv*"),
    ("filename:*.pdf", 'filename:w"*.pdf"'),
    ("/inv.*/", "/inv.*/"),
    ("text:/inv.*/", "/inv.*/"),
    ("body:/.*invoice.*/", "body:/.*invoice.*/"),
    ("/a\\/b/", "/a\\/b/"),
    ("//", "//"),
    ("from:/ali.*/", "from:/ali.*/"),
    ("/[a-z]+/ alpha", "(+/[a-z]+/ +alpha)"),
    # --- match all
    ("*:*", "*:*"),
    ("*:* -alpha", "(+*:* -alpha)"),
    # --- ranges
    ("[a TO b]", "[a TO b]"),
    ("{a TO b}", "{a TO b}"),
    ("[a TO b}", "[a TO b}"),
    ("{a TO b]", "{a TO b]"),
    ("[* TO b]", "[* TO b]"),
    ("[a TO *]", "[a TO *]"),
    ('["a b" TO c]', '["a b" TO c]'),
    ("[TO TO TO]", "[TO TO TO]"),
    ("body:[A TO M]", "body:[A TO M]"),
    ("date:[2026-03-01 TO 2026-03-31]", "date:[2026-03-01 TO 2026-03-31]"),
    ("date:{2026-03-01 TO 2026-03-31}", "date:{2026-03-01 TO 2026-03-31}"),
    ("date:[2026-03-01 TO *]", "date:[2026-03-01 TO *]"),
    ("date:[* TO today]", "date:[* TO today]"),
    ("date:[7d TO now]", "date:[7d TO now]"),
    ('date:["2026-03-29T10:00:00+02:00" TO *]', 'date:["2026-03-29T10:00:00+02:00" TO *]'),
    ("size:[1MB TO 10MB]", "size:[1MB TO 10MB]"),
    ("from:[a TO b]", "from:[a TO b]"),
    ("tag:{a TO *]", "tag:{a TO *]"),
    ("filename:[a TO m]", "filename:[a TO m]"),
    ("size:{* TO 512KB]", "size:{* TO 512KB]"),
    # --- dates, comparisons, sizes
    ("date:2026-03-29", "date:2026-03-29"),
    ("date:2026-03", "date:2026-03"),
    ("date:2026", "date:2026"),
    ("date:today", "date:today"),
    ("date:yesterday", "date:yesterday"),
    ("date:7d", "date:7d"),
    ('date:"2026-03-29T10:00:00Z"', 'date:"2026-03-29T10:00:00Z"'),
    ("date>=7d", "date>=7d"),
    ("date>30m", "date>30m"),
    ("date<2026-01-01", "date<2026-01-01"),
    ("date<=2026-01-01", "date<=2026-01-01"),
    ("date:>=2026-01-01", "date>=2026-01-01"),
    ('date>="2026-03-29T10:00:00+02:00"', 'date>="2026-03-29T10:00:00+02:00"'),
    ("date>=7d alpha", "(+date>=7d +alpha)"),
    ("size>10MB", "size>10MB"),
    ("size>=1.5gb", "size>=1.5gb"),
    ("size<2048", "size<2048"),
    ("size:>10MB", "size>10MB"),
    ("size:1024", "size:1024"),
]


@pytest.mark.parametrize(("query", "expected"), TREES)
def test_query_parses_into_the_expected_tree(query: str, expected: str) -> None:
    assert to_sexpr(parse(query).root) == expected


# (query, reason, span "start,end" in UTF-16 code units)
ERRORS: list[tuple[str, str, str]] = [
    # --- syntax
    ("", "SYNTAX_ERROR", "0,0"),
    ("   ", "SYNTAX_ERROR", "0,3"),
    ("alpha AND", "SYNTAX_ERROR", "9,9"),
    ("alpha OR", "SYNTAX_ERROR", "8,8"),
    ("AND alpha", "SYNTAX_ERROR", "0,3"),
    ("OR alpha", "SYNTAX_ERROR", "0,2"),
    ("alpha AND OR beta", "SYNTAX_ERROR", "10,12"),
    ("NOT", "SYNTAX_ERROR", "3,3"),
    ("-", "SYNTAX_ERROR", "1,1"),
    ("alpha -", "SYNTAX_ERROR", "7,7"),
    ("--alpha", "SYNTAX_ERROR", "1,2"),
    ("+-alpha", "SYNTAX_ERROR", "1,2"),
    ("NOT -alpha", "SYNTAX_ERROR", "4,5"),
    ("()", "SYNTAX_ERROR", "1,2"),
    ("(alpha", "SYNTAX_ERROR", "0,1"),
    ("((alpha)", "SYNTAX_ERROR", "0,1"),
    ("alpha)", "SYNTAX_ERROR", "5,6"),
    ("alpha beta)", "SYNTAX_ERROR", "10,11"),
    ('"alpha', "SYNTAX_ERROR", "0,1"),
    ('alpha "beta', "SYNTAX_ERROR", "6,7"),
    ("a/b", "SYNTAX_ERROR", "1,2"),
    ("/abc", "SYNTAX_ERROR", "0,1"),
    ("alpha\\", "SYNTAX_ERROR", "5,6"),
    ("alpha]", "SYNTAX_ERROR", "5,6"),
    ("alpha}", "SYNTAX_ERROR", "5,6"),
    ("a:b:c", "SYNTAX_ERROR", "3,4"),
    ("from:", "SYNTAX_ERROR", "5,5"),
    (":alpha", "SYNTAX_ERROR", "0,1"),
    ("[a b]", "SYNTAX_ERROR", "3,4"),
    ("[a TO b", "SYNTAX_ERROR", "7,7"),
    ("[a TO]", "SYNTAX_ERROR", "5,6"),
    ("[TO b]", "SYNTAX_ERROR", "4,5"),
    ("alpha^", "SYNTAX_ERROR", "6,6"),
    ("alpha^ 2", "SYNTAX_ERROR", "6,7"),
    ("alpha^x", "SYNTAX_ERROR", "6,7"),
    ("alpha~1.5", "SYNTAX_ERROR", "5,9"),
    ("alpha~-1", "SYNTAX_ERROR", "5,8"),
    ("\\u12", "SYNTAX_ERROR", "0,4"),
    ("\\u12zz", "SYNTAX_ERROR", "0,6"),
    ("[a\\ TO b]", "SYNTAX_ERROR", "1,3"),
    ("~alpha", "SYNTAX_ERROR", "0,6"),
    ("😀 AND", "SYNTAX_ERROR", "6,6"),
    ("😀😀 )", "SYNTAX_ERROR", "5,6"),
    ("\ud800", "SYNTAX_ERROR", "0,1"),
    ("text:/(a/", "SYNTAX_ERROR", "0,9"),
    ("text:/a{x}/", "SYNTAX_ERROR", "0,11"),
    ("text:/[z-a]/", "SYNTAX_ERROR", "0,12"),
    ("text:/a)/", "SYNTAX_ERROR", "0,9"),
    ('text:/"abc/', "SYNTAX_ERROR", "0,11"),
    ("text:/<1-x>/", "SYNTAX_ERROR", "0,12"),
    ("text:/<abc>/", "SYNTAX_ERROR", "0,12"),
    ("text:/a\\\\\\/", "SYNTAX_ERROR", "0,11"),
    # --- unsupported operators
    ("alpha~", "UNSUPPORTED_OPERATOR", "5,6"),
    ("alpha~2", "UNSUPPORTED_OPERATOR", "5,7"),
    ("alpha~0.5", "UNSUPPORTED_OPERATOR", "5,9"),
    ('"alpha beta"~3', "UNSUPPORTED_OPERATOR", "12,14"),
    ("alpha^2", "UNSUPPORTED_OPERATOR", "5,7"),
    ("alpha^2.5 beta", "UNSUPPORTED_OPERATOR", "5,9"),
    ('"alpha beta"^2', "UNSUPPORTED_OPERATOR", "12,14"),
    ("(alpha beta)^3", "UNSUPPORTED_OPERATOR", "12,14"),
    ("[a TO b]^2", "UNSUPPORTED_OPERATOR", "8,10"),
    ("(alpha beta gamma)@2", "UNSUPPORTED_OPERATOR", "18,20"),
    ("fn:ordered(alpha beta)", "UNSUPPORTED_OPERATOR", "0,11"),
    ("inv*~2", "UNSUPPORTED_OPERATOR", "4,6"),
    ("/inv.*/~1", "UNSUPPORTED_OPERATOR", "7,9"),
    ("alpha^2~1", "UNSUPPORTED_OPERATOR", "5,7"),
    ("😀~1", "UNSUPPORTED_OPERATOR", "2,4"),
    ("text:/a&b/", "UNSUPPORTED_REGEX", "0,10"),
    ("text:/~a/", "UNSUPPORTED_REGEX", "0,9"),
    ("body:/.*(a&b).*/", "UNSUPPORTED_REGEX", "0,16"),
    # --- unknown fields (case-sensitive)
    ("foo:bar", "UNKNOWN_FIELD", "0,7"),
    ("From:alice", "UNKNOWN_FIELD", "0,10"),
    ("TEXT:alpha", "UNKNOWN_FIELD", "0,10"),
    ("*:alpha", "UNKNOWN_FIELD", "0,7"),
    ("x:(a b)", "UNKNOWN_FIELD", "3,4"),
    ("alpha title:beta", "UNKNOWN_FIELD", "6,16"),
    ("http://example.org", "UNKNOWN_FIELD", "0,7"),
    # --- invalid values
    ("kind:grup", "INVALID_VALUE", "0,9"),
    ("kind:gr*", "INVALID_VALUE", "0,8"),
    ("kind:[a TO b]", "INVALID_VALUE", "0,13"),
    ("has:pdf", "INVALID_VALUE", "0,7"),
    ("preset:ssn", "INVALID_VALUE", "0,10"),
    ("in:whatsapp", "INVALID_VALUE", "0,11"),
    ('in:"telegram/"', "INVALID_VALUE", "0,14"),
    ("topic:abc", "INVALID_VALUE", "0,9"),
    ("topic:0", "INVALID_VALUE", "0,7"),
    ("topic:1*", "INVALID_VALUE", "0,8"),
    ("date:2026-02-30", "INVALID_VALUE", "0,15"),
    ("date:2026-13", "INVALID_VALUE", "0,12"),
    ("date:soon", "INVALID_VALUE", "0,9"),
    ("date:0001-01-01", "INVALID_VALUE", "0,15"),
    ("date>=", "INVALID_VALUE", "0,6"),
    ("date:[2026-01-01 TO later]", "INVALID_VALUE", "0,26"),
    ("date:2026*", "INVALID_VALUE", "0,10"),
    ("date:/2026.*/", "INVALID_VALUE", "0,13"),
    ('date:"2026-03-29T10:00:00+25:00"', "INVALID_VALUE", "0,32"),
    ("size>ten", "INVALID_VALUE", "0,8"),
    ("size:10parsecs", "INVALID_VALUE", "0,14"),
    ("size:[1MB TO lots]", "INVALID_VALUE", "0,18"),
    ("from:alice~1 from:[a TO b]", "UNSUPPORTED_OPERATOR", "10,12"),
    ("has:photo topic:[1 TO 2]", "INVALID_VALUE", "10,24"),
    ("in:[a TO b]", "INVALID_VALUE", "0,11"),
]


@pytest.mark.parametrize(("query", "reason", "span"), ERRORS)
def test_query_error_has_the_expected_reason_and_span(query: str, reason: str, span: str) -> None:
    with pytest.raises(ChatseekError) as caught:
        parse(query)
    assert caught.value.reason == reason
    assert caught.value.metadata.get("span") == span


def test_every_query_error_is_an_invalid_argument_with_a_hint() -> None:
    for query, _, _ in ERRORS:
        with pytest.raises(ChatseekError) as caught:
            parse(query)
        assert caught.value.code.name == "INVALID_ARGUMENT"
        assert caught.value.hint


# (query, budget name, tight budgets that make it fail)
BUDGET_CASES: list[tuple[str, str, Budgets]] = [
    ("a" * 8193, "query_bytes", Budgets()),
    ("é" * 4097, "query_bytes", Budgets()),
    ("(a " * 33 + "b" + ")" * 33, "depth", Budgets()),
    ("(a " * 2000 + "b" + ")" * 2000, "depth", Budgets()),
    (" ".join(["a"] * 300), "nodes", Budgets()),
    ("a OR " * 300 + "b", "nodes", Budgets()),
    ("text:/" + "a" * 1025 + "/", "pattern_chars", Budgets()),
    ("body:" + "a" * 1100 + "*x", "pattern_chars", Budgets()),
    ("text:" + "a" * 1100 + "*", "pattern_chars", Budgets()),
    ("text:/(abcdefghijklmnop){700}/", "automaton_states", Budgets()),
    ("text:/a{1001}/", "automaton_states", Budgets()),
    ("text:/((a{100}){100}){10}/", "automaton_states", Budgets()),
    ("alpha beta gamma", "query_bytes", Budgets(query_bytes=10)),
    ("(alpha OR (beta OR gamma))", "depth", Budgets(depth=1)),
    ("alpha beta gamma", "nodes", Budgets(nodes=3)),
    ("text:/abcdef/", "pattern_chars", Budgets(pattern_chars=5)),
    ("text:/abcdef/", "automaton_states", Budgets(automaton_states=3)),
]


@pytest.mark.parametrize(("query", "budget", "budgets"), BUDGET_CASES)
def test_exceeded_budget_is_a_query_limit_naming_the_budget(
    query: str, budget: str, budgets: Budgets
) -> None:
    with pytest.raises(QueryLimit) as caught:
        parse(query, budgets)
    assert caught.value.reason == "QUERY_LIMIT"
    assert caught.value.metadata["budget"] == budget
    assert "budget" in str(caught.value)
    start, end = (int(x) for x in caught.value.metadata["span"].split(","))
    assert 0 <= start <= end <= len(query.encode("utf-16-le")) // 2


def test_queries_just_inside_the_budgets_parse() -> None:
    assert parse("a" * 8192).root
    assert parse("(a " * 31 + "b" + ")" * 31).root
    assert parse("(" * 500 + "a b" + ")" * 500).root
    assert parse(" ".join(["a"] * 255)).root
    assert parse("text:/" + "a" * 1024 + "/").root


def test_syntax_error_wins_over_unsupported_operator_and_budgets() -> None:
    with pytest.raises(ChatseekError) as caught:
        parse("alpha^2 AND")
    assert caught.value.reason == "SYNTAX_ERROR"
    with pytest.raises(ChatseekError) as caught:
        parse("(" * 40 + "a")
    assert caught.value.reason == "SYNTAX_ERROR"


def test_unsupported_operator_wins_over_unknown_field() -> None:
    with pytest.raises(ChatseekError) as caught:
        parse("foo:bar~2")
    assert caught.value.reason == "UNSUPPORTED_OPERATOR"
    assert caught.value.metadata["operator"] == "fuzzy"


@pytest.mark.parametrize(
    ("query", "operator"),
    [
        ("alpha~2", "fuzzy"),
        ('"a b"~2', "proximity"),
        ("alpha^3", "boost"),
        ("(a b c)@2", "minimum_should_match"),
        ("fn:ordered(a b)", "intervals"),
    ],
)
def test_unsupported_operator_names_the_operator_and_says_unsupported(
    query: str, operator: str
) -> None:
    with pytest.raises(ChatseekError) as caught:
        parse(query)
    assert caught.value.metadata["operator"] == operator
    assert "unsupported" in str(caught.value)


def test_error_messages_classify_like_the_conformance_harness() -> None:
    """Message and hint carry the words the harness looks for; syntax errors carry none."""
    for query, reason, _ in ERRORS:
        with pytest.raises(ChatseekError) as caught:
            parse(query)
        text = f"{caught.value} {caught.value.hint}".lower()
        if reason.startswith("UNSUPPORTED"):
            assert "unsupported" in text
        elif reason == "UNKNOWN_FIELD":
            assert "unknown field" in text
        elif reason == "INVALID_VALUE":
            assert "invalid value" in text
        else:
            for word in ("unsupported", "budget", "limit", "exceed", "unknown field"):
                assert word not in text, (query, text)


# --- spans


def _leaf_spans(query: str) -> list[tuple[int, int]]:
    root = parse(query).root
    nodes = [root]
    out = []
    while nodes:
        node = nodes.pop(0)
        if isinstance(node, Bool):
            nodes.extend(node.must + node.should + node.must_not)
        else:
            out.append(node.span)
    return sorted(out)


@pytest.mark.parametrize(
    ("query", "spans"),
    [
        ("alpha beta", [(0, 5), (6, 10)]),
        ("from:alice AND beta", [(0, 10), (15, 19)]),
        ('"a b" -c', [(0, 5), (7, 8)]),
        ("😀 beta", [(0, 2), (3, 7)]),
        ("𝔸𝔹 x", [(0, 4), (5, 6)]),
        ("é x", [(0, 1), (2, 3)]),
        ("date:[2026-01-01 TO *] x", [(0, 22), (23, 24)]),
        ("from:(a b)", [(6, 7), (8, 9)]),
        ("(😀 OR b) c", [(1, 3), (7, 8), (10, 11)]),
        ("date>=7d", [(0, 8)]),
    ],
)
def test_every_leaf_carries_its_utf16_span(query: str, spans: list[tuple[int, int]]) -> None:
    assert _leaf_spans(query) == spans


def test_group_span_covers_its_parentheses() -> None:
    root = parse("x (a OR b)").root
    assert isinstance(root, Bool)
    assert root.span == (0, 10)
    assert root.must[1].span == (2, 10)


def test_a_term_that_is_only_punctuation_still_parses() -> None:
    root = parse("alpha ...").root
    assert isinstance(root, Bool)
    assert isinstance(root.must[1], Term)
    assert root.must[1].value == "..."


def test_parse_syntax_leaves_fields_unchecked() -> None:
    assert to_sexpr(parse_syntax("foo:bar").root) == "foo:bar"
