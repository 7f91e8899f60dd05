"""The versioned JSON form of query trees: ``{version: 1, language: "lucene-v1", root}``.

Invariants:
* ``tree_from_json(tree_to_json(t))`` rebuilds ``t`` exactly (spans included).
* Decoding checks structure only (types, keys, spans) and reports the JSON path of the first
  problem (``root.must[1].field``): a malformed shape is ``SYNTAX_ERROR``, a wrong version or
  language ``INVALID_VALUE``. Budgets on depth and nodes are enforced while decoding, before
  any deeper recursion; fields and values are then checked by ``validate`` like parsed text.
* Keys that ask for scoring or fuzziness (``boost``, ``slop``…) are ``UNSUPPORTED_OPERATOR``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chatseek_core.errors import InvalidValue, QuerySyntaxError, UnsupportedOperator
from chatseek_lexical.query.ast import (
    LANGUAGE,
    TREE_VERSION,
    Bool,
    Compare,
    EnumValue,
    MatchAll,
    Node,
    Phrase,
    Prefix,
    Range,
    Regex,
    Span,
    Term,
    Tree,
    Wildcard,
)
from chatseek_lexical.query.limits import DEFAULT_BUDGETS, Budgets, exceeded

__all__ = ["tree_from_json", "tree_to_json"]

NO_SPAN: Span = (0, 0)
_SCORING_KEYS = ("boost", "slop", "fuzziness", "fuzzy", "minimum_should_match", "intervals")
_COMMON = {"type", "span"}
_KEYS: dict[str, set[str]] = {
    "bool": _COMMON | {"must", "should", "must_not"},
    "match_all": _COMMON,
    "term": _COMMON | {"field", "value"},
    "phrase": _COMMON | {"field", "value"},
    "prefix": _COMMON | {"field", "value"},
    "enum": _COMMON | {"field", "value"},
    "wildcard": _COMMON | {"field", "pattern"},
    "regex": _COMMON | {"field", "pattern"},
    "compare": _COMMON | {"field", "op", "value"},
    "range": _COMMON | {"field", "lower", "upper", "include_lower", "include_upper"},
}
_SIMPLE: dict[str, type] = {
    "term": Term,
    "phrase": Phrase,
    "prefix": Prefix,
    "enum": EnumValue,
}


def _span_json(span: Span) -> list[int]:
    return [span[0], span[1]]


def _node_json(node: Node) -> dict[str, Any]:
    if isinstance(node, Bool):
        return {
            "type": "bool",
            "must": [_node_json(n) for n in node.must],
            "should": [_node_json(n) for n in node.should],
            "must_not": [_node_json(n) for n in node.must_not],
            "span": _span_json(node.span),
        }
    if isinstance(node, MatchAll):
        return {"type": "match_all", "span": _span_json(node.span)}
    out: dict[str, Any]
    if isinstance(node, Term | Phrase | Prefix | EnumValue):
        kind = {Term: "term", Phrase: "phrase", Prefix: "prefix", EnumValue: "enum"}[type(node)]
        out = {"type": kind, "field": node.field, "value": node.value}
    elif isinstance(node, Wildcard | Regex):
        kind = "wildcard" if isinstance(node, Wildcard) else "regex"
        out = {"type": kind, "field": node.field, "pattern": node.pattern}
    elif isinstance(node, Compare):
        out = {"type": "compare", "field": node.field, "op": node.op, "value": node.value}
    else:
        out = {
            "type": "range",
            "field": node.field,
            "lower": node.lower,
            "upper": node.upper,
            "include_lower": node.include_lower,
            "include_upper": node.include_upper,
        }
    out["span"] = _span_json(node.span)
    return out


def tree_to_json(tree: Tree) -> dict[str, Any]:
    """The JSON object of ``tree`` (plain dicts, lists, strings, numbers, booleans)."""
    return {"version": tree.version, "language": tree.language, "root": _node_json(tree.root)}


def _shape(message: str, path: str) -> QuerySyntaxError:
    return QuerySyntaxError(
        f"malformed query tree at {path}: {message}",
        hint='a tree is {"version": 1, "language": "lucene-v1", "root": {"type": ...}}',
        metadata={"path": path},
    )


class _Decoder:
    def __init__(self, budgets: Budgets) -> None:
        self.budgets = budgets
        self.count = 0

    def string(self, obj: Mapping[str, Any], key: str, path: str) -> str:
        value = obj.get(key)
        if not isinstance(value, str):
            raise _shape(f"{key!r} must be a string", f"{path}.{key}")
        return value

    def optional(self, obj: Mapping[str, Any], key: str, path: str) -> str | None:
        value = obj.get(key)
        if value is not None and not isinstance(value, str):
            raise _shape(f"{key!r} must be a string or null", f"{path}.{key}")
        return value

    def flag(self, obj: Mapping[str, Any], key: str, path: str) -> bool:
        value = obj.get(key, True)
        if not isinstance(value, bool):
            raise _shape(f"{key!r} must be true or false", f"{path}.{key}")
        return value

    def span(self, obj: Mapping[str, Any], path: str) -> Span:
        value = obj.get("span")
        if value is None:
            return NO_SPAN
        ok = (
            isinstance(value, list)
            and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            and 0 <= value[0] <= value[1]
        )
        if not ok:
            raise _shape("'span' must be [start, end] with 0 <= start <= end", f"{path}.span")
        return (value[0], value[1])

    def node(self, obj: Any, path: str, level: int) -> Node:
        self.count += 1
        if self.count > self.budgets.nodes:
            raise exceeded("nodes", self.budgets.nodes, "the tree has too many nodes")
        if not isinstance(obj, Mapping):
            raise _shape("a node must be an object", path)
        kind = obj.get("type")
        if not isinstance(kind, str) or kind not in _KEYS:
            raise _shape("'type' must be one of " + ", ".join(sorted(_KEYS)), f"{path}.type")
        for key in obj:
            if key in _SCORING_KEYS:
                raise UnsupportedOperator(
                    f"unsupported operator: {key} is not part of this profile",
                    hint="remove it; ordering never changes which messages match",
                    metadata={"path": f"{path}.{key}", "operator": key},
                )
            if key not in _KEYS[kind]:
                raise _shape(f"unknown key {key!r} for a {kind} node", f"{path}.{key}")
        span = self.span(obj, path)
        if kind == "bool":
            return self.bool_node(obj, path, level, span)
        if kind == "match_all":
            return MatchAll(span)
        field = self.string(obj, "field", path)
        if kind in _SIMPLE:
            return _SIMPLE[kind](field, self.string(obj, "value", path), span)  # type: ignore[no-any-return]
        if kind == "wildcard":
            return Wildcard(field, self.string(obj, "pattern", path), span)
        if kind == "regex":
            return Regex(field, self.string(obj, "pattern", path), span)
        if kind == "compare":
            return Compare(
                field, self.string(obj, "op", path), self.string(obj, "value", path), span
            )
        return Range(
            field,
            self.optional(obj, "lower", path),
            self.optional(obj, "upper", path),
            self.flag(obj, "include_lower", path),
            self.flag(obj, "include_upper", path),
            span,
        )

    def bool_node(self, obj: Mapping[str, Any], path: str, level: int, span: Span) -> Bool:
        if level > self.budgets.depth:
            raise exceeded("depth", self.budgets.depth, "the tree nests too deep")
        groups: dict[str, tuple[Node, ...]] = {}
        total = 0
        for key in ("must", "should", "must_not"):
            items = obj.get(key, [])
            if not isinstance(items, list):
                raise _shape(f"{key!r} must be a list", f"{path}.{key}")
            groups[key] = tuple(
                self.node(item, f"{path}.{key}[{index}]", level + 1)
                for index, item in enumerate(items)
            )
            total += len(items)
        if total == 0:
            raise _shape("a bool node needs at least one clause", path)
        return Bool(groups["must"], groups["should"], groups["must_not"], span)


def tree_from_json(obj: Any, budgets: Budgets = DEFAULT_BUDGETS) -> Tree:
    """Decode a JSON tree (already loaded into Python objects); validate it afterwards.

    Raises:
        QuerySyntaxError: malformed shape; ``metadata["path"]`` points at the problem.
        InvalidValue: an unknown ``version`` or ``language``.
        UnsupportedOperator: a scoring or fuzziness key.
        QueryLimit: deeper or bigger than the budgets.
    """
    if not isinstance(obj, Mapping):
        raise _shape("the tree must be an object", "$")
    for key in obj:
        if key not in ("version", "language", "root"):
            raise _shape(f"unknown key {key!r}", f"$.{key}")
    version = obj.get("version")
    if version != TREE_VERSION or isinstance(version, bool):
        raise InvalidValue(
            f"invalid value for version: {version!r}; this server reads version {TREE_VERSION}",
            hint="send the tree version this server returns from parse",
            metadata={"path": "$.version"},
        )
    if obj.get("language") != LANGUAGE:
        raise InvalidValue(
            f"invalid value for language: {obj.get('language')!r}; expected {LANGUAGE!r}",
            hint=f'set "language": "{LANGUAGE}"',
            metadata={"path": "$.language"},
        )
    if "root" not in obj:
        raise _shape("missing 'root'", "$.root")
    return Tree(_Decoder(budgets).node(obj["root"], "$.root", 1))
