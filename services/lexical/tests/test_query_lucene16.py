"""Lucene precedence semantics on the 16-document conformance fixture.

Document ``d`` (message id ``d + 1``) holds alpha/beta/gamma/delta for bits 0–3 of ``d``; even
documents are alice's in the legacy group "fixture-group", odd ones bob's in the private chat
"bob"; document 0 is a photo without words. Expected sets are written as predicates over a
document, independently of the parser; a property test also checks the SQL against a small
reference evaluator of the parsed tree for generated queries.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatseek_core import db
from chatseek_core.errors import ChatseekError
from chatseek_core.text import words
from chatseek_lexical.query import SearchRequest, parse, search
from chatseek_lexical.query.ast import (
    Bool,
    EnumValue,
    Leaf,
    MatchAll,
    Node,
    Phrase,
    Prefix,
    Term,
    Wildcard,
)

from .conftest_query import LUCENE16, build_store

WORDS = ("alpha", "beta", "gamma", "delta")


@dataclass(frozen=True)
class Doc:
    id: int
    words: tuple[str, ...]
    sender: str
    kind: str

    @property
    def text(self) -> str:
        return " ".join(self.words)

    def has(self, *names: str) -> bool:
        return all(name in self.words for name in names)


DOCS = [
    Doc(
        d,
        tuple(w for bit, w in enumerate(WORDS) if d >> bit & 1),
        "alice" if d % 2 == 0 else "bob",
        "group" if d % 2 == 0 else "private",
    )
    for d in range(16)
]


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[db.Connection]:
    connection = build_store(Path(tmp_path_factory.mktemp("lucene16")), LUCENE16)
    yield connection
    connection.close()


def found(conn: db.Connection, query: str) -> list[int]:
    envelope = search(conn, SearchRequest(query, limit=100, timezone="UTC"))
    return sorted(item.msg_id - 1 for item in envelope.items)


Pred = Callable[[Doc], bool]

CASES: list[tuple[str, Pred]] = [
    ("alpha", lambda d: d.has("alpha")),
    ("alpha beta", lambda d: d.has("alpha", "beta")),
    ("alpha OR beta", lambda d: d.has("alpha") or d.has("beta")),
    ("alpha OR beta gamma", lambda d: (d.has("alpha") or d.has("beta")) and d.has("gamma")),
    ("alpha OR beta AND gamma", lambda d: d.has("alpha") or d.has("beta", "gamma")),
    ("alpha AND beta OR gamma", lambda d: d.has("alpha", "beta") or d.has("gamma")),
    (
        "alpha beta OR gamma delta",
        lambda d: d.has("alpha") and (d.has("beta") or d.has("gamma")) and d.has("delta"),
    ),
    ("alpha -beta", lambda d: d.has("alpha") and not d.has("beta")),
    ("alpha NOT beta", lambda d: d.has("alpha") and not d.has("beta")),
    ("alpha AND NOT beta", lambda d: d.has("alpha") and not d.has("beta")),
    ("alpha !beta", lambda d: d.has("alpha") and not d.has("beta")),
    ("alpha OR -beta", lambda d: d.has("alpha") and not d.has("beta")),
    (
        "alpha OR NOT beta OR gamma",
        lambda d: (d.has("alpha") or d.has("gamma")) and not d.has("beta"),
    ),
    ("+alpha OR beta", lambda d: d.has("alpha")),
    ("+alpha beta", lambda d: d.has("alpha", "beta")),
    ("-alpha", lambda d: False),
    ("NOT alpha", lambda d: False),
    ("-alpha -beta", lambda d: False),
    ("-alpha OR -beta", lambda d: False),
    (
        "(alpha OR beta) AND (gamma OR delta)",
        lambda d: (d.has("alpha") or d.has("beta")) and (d.has("gamma") or d.has("delta")),
    ),
    (
        "alpha AND (beta OR gamma) -delta",
        lambda d: d.has("alpha") and (d.has("beta") or d.has("gamma")) and not d.has("delta"),
    ),
    (
        "(alpha -beta) OR (gamma -delta)",
        lambda d: (d.has("alpha") and not d.has("beta")) or (d.has("gamma") and not d.has("delta")),
    ),
    ("alpha AND (-beta)", lambda d: False),
    ("-(alpha OR beta) gamma", lambda d: d.has("gamma") and not (d.has("alpha") or d.has("beta"))),
    ("alpha && beta || gamma", lambda d: d.has("alpha", "beta") or d.has("gamma")),
    ("alpha - beta", lambda d: d.has("alpha", "beta")),
    ("*:*", lambda d: True),
    ("*:* -alpha", lambda d: not d.has("alpha")),
    ("*", lambda d: bool(d.words)),
    ("text:*", lambda d: bool(d.words)),
    ("al*", lambda d: d.has("alpha")),
    ("?eta", lambda d: d.has("beta")),
    ("*ta", lambda d: d.has("beta") or d.has("delta")),
    ("/.*ta/", lambda d: d.has("beta") or d.has("delta")),
    ("/(alpha|gamma)/ -delta", lambda d: (d.has("alpha") or d.has("gamma")) and not d.has("delta")),
    ('"alpha beta"', lambda d: d.has("alpha", "beta")),
    ('"alpha gamma"', lambda d: d.has("alpha", "gamma") and not d.has("beta")),
    ('"gamma alpha"', lambda d: False),
    ('""', lambda d: False),
    ('alpha ""', lambda d: d.has("alpha")),
    ("from:alice", lambda d: d.sender == "alice"),
    ("from:bob alpha", lambda d: d.sender == "bob" and d.has("alpha")),
    ("from:(alice OR bob) delta", lambda d: d.has("delta")),
    ("kind:group", lambda d: d.kind == "group"),
    ("kind:private OR gamma", lambda d: d.kind == "private" or d.has("gamma")),
    ('body:"alpha beta"', lambda d: d.text == "alpha beta"),
    ('body:""', lambda d: d.text == ""),
    ("body:alpha*", lambda d: d.text.startswith("alpha")),
    ("body:/.*delta/", lambda d: d.text.endswith("delta")),
    ("text:[beta TO delta]", lambda d: d.has("beta") or d.has("delta")),
    ("text:{beta TO delta}", lambda d: False),
    ("text:[alpha TO beta}", lambda d: d.has("alpha")),
    ("date:[2024-01-05 TO 2024-01-08]", lambda d: 4 <= d.id <= 7),
    ("date:{2024-01-05 TO 2024-01-08}", lambda d: 5 <= d.id <= 6),
    ("date>=2024-01-15", lambda d: d.id >= 14),
    ("has:photo", lambda d: d.id == 0),
    ("has:attachment OR alpha", lambda d: d.id == 0 or d.has("alpha")),
]


@pytest.mark.parametrize(("query", "predicate"), CASES)
def test_query_matches_the_lucene_precedence_result_set(
    conn: db.Connection, query: str, predicate: Pred
) -> None:
    assert found(conn, query) == [d.id for d in DOCS if predicate(d)]


# --- reference evaluator of a parsed tree over the 16 documents


def _leaf(node: Leaf, doc: Doc) -> bool | None:
    if isinstance(node, MatchAll):
        return True
    if isinstance(node, EnumValue):
        return doc.kind == node.value
    if node.field == "from":
        assert isinstance(node, Term)
        return doc.sender == node.value
    if node.field == "body":
        assert isinstance(node, Phrase)
        return doc.text == node.value
    if isinstance(node, Term | Phrase):
        tokens = words(node.value)
        if not tokens:
            return None
        if isinstance(node, Term):
            return all(t in doc.words for t in tokens)
        size = len(tokens)
        return any(list(doc.words[i : i + size]) == tokens for i in range(len(doc.words)))
    if isinstance(node, Prefix):
        return any(w.startswith(node.value) for w in doc.words)
    assert isinstance(node, Wildcard)
    return any(fnmatch.fnmatchcase(w, node.pattern) for w in doc.words)


def evaluate(node: Node, doc: Doc) -> bool | None:
    """Lucene set semantics; None for a clause that analyses to nothing (dropped)."""
    if not isinstance(node, Bool):
        return _leaf(node, doc)
    must = [r for r in (evaluate(c, doc) for c in node.must) if r is not None]
    should = [r for r in (evaluate(c, doc) for c in node.should) if r is not None]
    must_not = [r for r in (evaluate(c, doc) for c in node.must_not) if r is not None]
    if not must and not should:
        return False if must_not else None
    matched = all(must) if must else any(should)
    return matched and not any(must_not)


_BASE = st.sampled_from(
    [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "nope",
        "al*",
        "?eta",
        "g*a",
        '"alpha beta"',
        '"beta gamma"',
        '"..."',
        "from:alice",
        "from:bob",
        "kind:group",
        "kind:private",
        'body:"alpha beta"',
        "*:*",
    ]
)
_LEAF = st.tuples(st.sampled_from(["", "", "", "+", "-", "!", "NOT "]), _BASE).map("".join)
_OPS = st.sampled_from([" ", " ", " AND ", " OR ", " && ", " || "])


def _combine(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, _OPS, inner).map("".join),
        st.tuples(st.sampled_from(["", "-", "+", "NOT "]), inner).map(lambda t: f"{t[0]}({t[1]})"),
    )


QUERIES = st.recursive(_LEAF, _combine, max_leaves=10)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=QUERIES)
def test_sql_agrees_with_the_reference_evaluator_of_the_tree(
    conn: db.Connection, query: str
) -> None:
    try:
        tree = parse(query)
    except ChatseekError as exc:
        assert exc.reason == "QUERY_LIMIT"
        return
    expected = [d.id for d in DOCS if evaluate(tree.root, d)]
    assert found(conn, query) == expected
