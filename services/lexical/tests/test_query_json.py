"""The versioned JSON tree: round trips, and malformed trees rejected with a path."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chatseek_core.errors import ChatseekError
from chatseek_lexical.query import parse, to_sexpr, tree_from_json, tree_to_json, validate

from .test_query_parser import TREES


@pytest.mark.parametrize(("query", "expected"), TREES)
def test_json_tree_round_trips_exactly(query: str, expected: str) -> None:
    encoded = tree_to_json(parse(query))
    text = json.dumps(encoded)
    decoded = validate(tree_from_json(json.loads(text)))
    assert tree_to_json(decoded) == encoded
    assert to_sexpr(decoded.root) == expected


def test_json_tree_has_version_language_and_spans() -> None:
    encoded = tree_to_json(parse("alpha OR beta"))
    assert encoded["version"] == 1
    assert encoded["language"] == "lucene-v1"
    assert encoded["root"] == {
        "type": "bool",
        "must": [],
        "should": [
            {"type": "term", "field": "text", "value": "alpha", "span": [0, 5]},
            {"type": "term", "field": "text", "value": "beta", "span": [9, 13]},
        ],
        "must_not": [],
        "span": [0, 13],
    }


def test_json_leaves_are_typed_per_field() -> None:
    root = tree_to_json(parse('kind:group date>=7d size:[1MB TO *] /a.*/ b* c?d "e f"'))["root"]
    types = [(c["type"], c["field"]) for c in root["must"]]
    assert types == [
        ("enum", "kind"),
        ("compare", "date"),
        ("range", "size"),
        ("regex", "text"),
        ("prefix", "text"),
        ("wildcard", "text"),
        ("phrase", "text"),
    ]


def _tree(root: Any) -> dict[str, Any]:
    return {"version": 1, "language": "lucene-v1", "root": root}


def test_a_tree_without_spans_is_accepted() -> None:
    tree = _tree(
        {
            "type": "bool",
            "must": [
                {"type": "term", "field": "text", "value": "invoice"},
                {"type": "enum", "field": "has", "value": "file"},
                {"type": "range", "field": "date", "lower": "2026-03-01", "upper": None},
            ],
        }
    )
    decoded = validate(tree_from_json(tree))
    assert to_sexpr(decoded.root) == "(+invoice +has=file +date:[2026-03-01 TO *])"


def test_a_term_on_an_enum_field_becomes_an_enum_leaf() -> None:
    decoded = validate(tree_from_json(_tree({"type": "term", "field": "kind", "value": "Bot"})))
    assert tree_to_json(decoded)["root"]["type"] == "enum"
    assert to_sexpr(decoded.root) == "kind=bot"


LEAF = {"type": "term", "field": "text", "value": "a"}

MALFORMED: list[tuple[Any, str, str]] = [
    ([], "SYNTAX_ERROR", "$"),
    ("alpha", "SYNTAX_ERROR", "$"),
    ({"version": 1, "language": "lucene-v1"}, "SYNTAX_ERROR", "$.root"),
    ({"version": 2, "language": "lucene-v1", "root": LEAF}, "INVALID_VALUE", "$.version"),
    ({"version": True, "language": "lucene-v1", "root": LEAF}, "INVALID_VALUE", "$.version"),
    ({"version": 1, "language": "lucene", "root": LEAF}, "INVALID_VALUE", "$.language"),
    ({"version": 1, "language": "lucene-v1", "root": LEAF, "x": 1}, "SYNTAX_ERROR", "$.x"),
    (_tree([LEAF]), "SYNTAX_ERROR", "$.root"),
    (_tree({"type": "fuzzy", "field": "text", "value": "a"}), "SYNTAX_ERROR", "$.root.type"),
    (_tree({"field": "text", "value": "a"}), "SYNTAX_ERROR", "$.root.type"),
    (_tree({"type": "term", "field": "text"}), "SYNTAX_ERROR", "$.root.value"),
    (_tree({"type": "term", "field": 3, "value": "a"}), "SYNTAX_ERROR", "$.root.field"),
    (_tree({**LEAF, "extra": 1}), "SYNTAX_ERROR", "$.root.extra"),
    (_tree({**LEAF, "span": [3, 1]}), "SYNTAX_ERROR", "$.root.span"),
    (_tree({**LEAF, "span": [0]}), "SYNTAX_ERROR", "$.root.span"),
    (_tree({**LEAF, "span": [True, 2]}), "SYNTAX_ERROR", "$.root.span"),
    (_tree({"type": "bool"}), "SYNTAX_ERROR", "$.root"),
    (_tree({"type": "bool", "must": LEAF}), "SYNTAX_ERROR", "$.root.must"),
    (_tree({"type": "bool", "must": [LEAF, 5]}), "SYNTAX_ERROR", "$.root.must[1]"),
    (
        _tree({"type": "bool", "should": [{"type": "bool", "must_not": [{"type": "x"}]}]}),
        "SYNTAX_ERROR",
        "$.root.should[0].must_not[0].type",
    ),
    (
        _tree({"type": "range", "field": "date", "lower": 5, "upper": None}),
        "SYNTAX_ERROR",
        "$.root.lower",
    ),
    (
        _tree({"type": "range", "field": "date", "lower": None, "include_lower": "yes"}),
        "SYNTAX_ERROR",
        "$.root.include_lower",
    ),
    (_tree({**LEAF, "boost": 2}), "UNSUPPORTED_OPERATOR", "$.root.boost"),
    (
        _tree({"type": "phrase", "field": "text", "value": "a b", "slop": 2}),
        "UNSUPPORTED_OPERATOR",
        "$.root.slop",
    ),
]


@pytest.mark.parametrize(("obj", "reason", "path"), MALFORMED)
def test_malformed_json_tree_names_the_path(obj: Any, reason: str, path: str) -> None:
    with pytest.raises(ChatseekError) as caught:
        validate(tree_from_json(obj))
    assert caught.value.reason == reason
    assert caught.value.metadata["path"] == path


@pytest.mark.parametrize(
    ("root", "reason"),
    [
        ({"type": "term", "field": "Text", "value": "a"}, "UNKNOWN_FIELD"),
        ({"type": "enum", "field": "kind", "value": "groups"}, "INVALID_VALUE"),
        ({"type": "enum", "field": "text", "value": "a"}, "INVALID_VALUE"),
        ({"type": "compare", "field": "date", "op": "!=", "value": "7d"}, "INVALID_VALUE"),
        ({"type": "compare", "field": "text", "op": ">", "value": "a"}, "INVALID_VALUE"),
        ({"type": "regex", "field": "text", "pattern": "(a"}, "SYNTAX_ERROR"),
        ({"type": "regex", "field": "body", "pattern": "a&b"}, "UNSUPPORTED_REGEX"),
        ({"type": "range", "field": "size", "lower": "big", "upper": None}, "INVALID_VALUE"),
        ({"type": "term", "field": "topic", "value": "-3"}, "INVALID_VALUE"),
    ],
)
def test_json_tree_goes_through_the_same_validator_as_text(root: Any, reason: str) -> None:
    with pytest.raises(ChatseekError) as caught:
        validate(tree_from_json(_tree(root)))
    assert caught.value.reason == reason


def _nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = dict(LEAF)
    for _ in range(depth):
        node = {"type": "bool", "must": [node, LEAF]}
    return node


def test_json_tree_depth_budget_is_enforced_while_decoding() -> None:
    assert tree_from_json(_tree(_nested(32)))
    with pytest.raises(ChatseekError) as caught:
        tree_from_json(_tree(_nested(33)))
    assert caught.value.metadata["budget"] == "depth"


def test_json_tree_node_budget_is_enforced_while_decoding() -> None:
    wide = {"type": "bool", "should": [LEAF] * 300}
    with pytest.raises(ChatseekError) as caught:
        tree_from_json(_tree(wide))
    assert caught.value.metadata["budget"] == "nodes"
