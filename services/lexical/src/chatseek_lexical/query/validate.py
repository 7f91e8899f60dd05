"""The one validator of query trees, for parsed text and for JSON trees alike.

Invariants:
* ``validate`` returns a typed tree: enum fields hold ``EnumValue`` leaves, ``date:>=x`` and
  ``size:<x`` become ``Compare``; everything else keeps its shape.
* Checks run field by field in tree order and the first failure wins: an unknown field is an
  ``UnknownField``; a value or leaf type a field does not take is an ``InvalidValue`` whose
  message starts "invalid value for <field>"; patterns are checked against the pattern and
  automaton budgets. Name resolution and dates relative to a timezone happen at execution.
"""

from __future__ import annotations

import chatseek_lexical.query.dates as dates
import chatseek_lexical.query.values as values
from chatseek_core.errors import InvalidValue, UnknownField
from chatseek_lexical.query.ast import (
    Bool,
    Compare,
    EnumValue,
    Leaf,
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
from chatseek_lexical.query.fields import FIELDS, FieldKind, FieldSpec, close_fields
from chatseek_lexical.query.limits import DEFAULT_BUDGETS, Budgets, exceeded
from chatseek_lexical.query.patterns import compile_regex, compile_wildcard

__all__ = ["COMPARE_OPS", "check_shape", "invalid", "leaf_type", "validate"]

COMPARE_OPS = (">=", "<=", ">", "<")
_LEAF_TYPES: dict[type, str] = {
    Term: "term",
    Phrase: "phrase",
    Prefix: "prefix",
    Wildcard: "wildcard",
    Regex: "regex",
    Range: "range",
    Compare: "compare",
    EnumValue: "enum",
    MatchAll: "match_all",
}
_DESCRIBE = {
    "term": "a term",
    "phrase": "a phrase",
    "prefix": "a prefix pattern",
    "wildcard": "a wildcard pattern",
    "regex": "a regular expression",
    "range": "a range",
    "compare": "a comparison",
    "enum": "an enum value",
}


def leaf_type(leaf: Leaf) -> str:
    """The JSON ``type`` of a leaf (``term``, ``phrase``, ``prefix``…)."""
    return _LEAF_TYPES[type(leaf)]


def _meta(span: Span, **extra: str) -> dict[str, str]:
    return {"span": f"{span[0]},{span[1]}", **extra}


def invalid(
    field: str, message: str, span: Span, hint: str = "", candidates: tuple[str, ...] = ()
) -> InvalidValue:
    """The ``InvalidValue`` for ``field``: message "invalid value for <field>: …"."""
    return InvalidValue(
        f"invalid value for {field}: {message}",
        hint=hint or f"see the values {field} takes in the query language reference",
        metadata=_meta(span, field=field),
        candidates=list(candidates),
    )


def check_shape(tree: Tree, budgets: Budgets = DEFAULT_BUDGETS) -> None:
    """Enforce the depth and node budgets on a tree of any origin.

    Raises:
        QueryLimit: deeper than ``budgets.depth`` Boolean levels or more than
            ``budgets.nodes`` nodes.
    """
    depth = 0
    count = 0
    stack: list[tuple[Node, int]] = [(tree.root, 1)]
    while stack:
        node, level = stack.pop()
        count += 1
        if isinstance(node, Bool):
            depth = max(depth, level)
            stack.extend((child, level + 1) for child in node.must + node.should + node.must_not)
    span = tree.root.span
    if depth > budgets.depth:
        raise exceeded("depth", budgets.depth, f"the query nests {depth} groups deep", span)
    if count > budgets.nodes:
        raise exceeded("nodes", budgets.nodes, f"the query has {count} nodes", span)


def _spec(leaf: Leaf) -> FieldSpec:
    assert not isinstance(leaf, MatchAll)
    spec = FIELDS.get(leaf.field)
    if spec is None:
        close = close_fields(leaf.field)
        hint = (
            f"field names are case-sensitive: did you mean {close[0]}?"
            if close
            else "known fields: " + ", ".join(FIELDS)
        )
        raise UnknownField(
            f"unknown field {leaf.field!r}",
            hint=hint,
            metadata=_meta(leaf.span, field=leaf.field),
            candidates=close or list(FIELDS),
        )
    return spec


def _value_of(leaf: Leaf) -> str | None:
    if isinstance(leaf, Term | Phrase | EnumValue):
        return leaf.value
    return None


def _split_compare(value: str) -> tuple[str, str] | None:
    for op in COMPARE_OPS:
        if value.startswith(op):
            return op, value[len(op) :]
    return None


def _check_ordered(spec: FieldSpec, value: str, span: Span) -> None:
    try:
        if spec.kind is FieldKind.DATE:
            dates.parse_date(value)
        else:
            values.parse_size(value)
    except ValueError as exc:
        raise invalid(spec.name, str(exc), span) from exc


def _ordered(spec: FieldSpec, leaf: Leaf) -> Leaf:
    if isinstance(leaf, Term | Phrase):
        split = _split_compare(leaf.value)
        if split is not None:
            op, rest = split
            _check_ordered(spec, rest, leaf.span)
            return Compare(leaf.field, op, rest, leaf.span)
        _check_ordered(spec, leaf.value, leaf.span)
        return Term(leaf.field, leaf.value, leaf.span)
    if isinstance(leaf, Compare):
        if leaf.op not in COMPARE_OPS:
            raise invalid(spec.name, f"{leaf.op!r} is not a comparison", leaf.span)
        _check_ordered(spec, leaf.value, leaf.span)
        return leaf
    if isinstance(leaf, Range):
        for bound in (leaf.lower, leaf.upper):
            if bound is not None:
                _check_ordered(spec, bound, leaf.span)
        return leaf
    raise _wrong_leaf(spec, leaf)


def _wrong_leaf(spec: FieldSpec, leaf: Leaf) -> InvalidValue:
    kind = leaf_type(leaf)
    if spec.kind is FieldKind.ENUM:
        return invalid(
            spec.name,
            f"{_DESCRIBE.get(kind, kind)} is not accepted; use one of: " + ", ".join(spec.values),
            leaf.span,
            candidates=spec.values,
        )
    accepted = ", ".join(_DESCRIBE[k] for k in sorted(spec.leaves))
    return invalid(
        spec.name,
        f"{_DESCRIBE.get(kind, kind)} is not accepted here (accepted: {accepted})",
        leaf.span,
    )


def _enum(spec: FieldSpec, leaf: Leaf) -> Leaf:
    value = _value_of(leaf)
    if value is None:
        raise _wrong_leaf(spec, leaf)
    if spec.name == "in":
        try:
            scope = values.parse_in(value)
        except ValueError as exc:
            raise invalid(spec.name, str(exc), leaf.span, candidates=spec.values) from exc
        canonical = scope.provider or "all"
        if scope.account:
            canonical += "/" + scope.account
        return EnumValue(leaf.field, canonical, leaf.span)
    folded = value.strip().lower()
    if folded not in spec.values:
        raise invalid(
            spec.name,
            f"{value!r} is not one of: " + ", ".join(spec.values),
            leaf.span,
            candidates=spec.values,
        )
    return EnumValue(leaf.field, folded, leaf.span)


def _textual(spec: FieldSpec, leaf: Leaf, budgets: Budgets) -> Leaf:
    kind = leaf_type(leaf)
    if kind not in spec.leaves:
        raise _wrong_leaf(spec, leaf)
    if isinstance(leaf, Regex):
        compile_regex(leaf.pattern, leaf.span, budgets)
    elif isinstance(leaf, Wildcard):
        compile_wildcard(leaf.pattern, leaf.span, budgets, folded=False)
    elif isinstance(leaf, Prefix) and len(leaf.value) > budgets.pattern_chars:
        raise exceeded("pattern_chars", budgets.pattern_chars, "the prefix is too long", leaf.span)
    return leaf


def _leaf(leaf: Leaf, budgets: Budgets) -> Leaf:
    if isinstance(leaf, MatchAll):
        return leaf
    spec = _spec(leaf)
    if spec.kind in (FieldKind.DATE, FieldKind.SIZE):
        return _ordered(spec, leaf)
    if spec.kind is FieldKind.ENUM:
        return _enum(spec, leaf)
    if spec.kind is FieldKind.TOPIC:
        value = _value_of(leaf)
        if value is None or isinstance(leaf, EnumValue):
            raise _wrong_leaf(spec, leaf)
        try:
            topic = values.parse_topic(value)
        except ValueError as exc:
            raise invalid(spec.name, str(exc), leaf.span) from exc
        return Term(leaf.field, str(topic), leaf.span)
    return _textual(spec, leaf, budgets)


def _node(node: Node, budgets: Budgets) -> Node:
    if isinstance(node, Bool):
        return Bool(
            tuple(_node(n, budgets) for n in node.must),
            tuple(_node(n, budgets) for n in node.should),
            tuple(_node(n, budgets) for n in node.must_not),
            node.span,
        )
    return _leaf(node, budgets)


def validate(tree: Tree, budgets: Budgets = DEFAULT_BUDGETS) -> Tree:
    """Check every field, value and pattern of ``tree``; return the typed tree.

    Raises:
        QueryLimit: depth, node, pattern or automaton budgets.
        UnknownField: a field outside the registry.
        InvalidValue: a value or leaf type the field does not take.
        QuerySyntaxError / UnsupportedRegex: a regular expression that does not parse.
    """
    check_shape(tree, budgets)
    return Tree(_node(tree.root, budgets), source=tree.source)
