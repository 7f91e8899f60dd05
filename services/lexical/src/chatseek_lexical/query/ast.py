"""The syntax tree of the strict query language (Lucene profile v1).

Owns the node types and their compact s-expression rendering. Invariants:
* A tree is immutable; every node carries a ``[start, end)`` span in UTF-16 code units of the
  query text it came from (``(0, 0)`` for trees built from JSON without spans).
* ``Bool`` holds Lucene's three occurrences; its result set is the intersection of ``must``,
  or the union of ``should`` when there is no ``must``, minus every ``must_not``; a ``Bool``
  with neither ``must`` nor ``should`` (pure negative) matches nothing.
* Leaves are typed: ``EnumValue`` only on enum fields, ``Compare`` only on ordered fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

__all__ = [
    "LANGUAGE",
    "TREE_VERSION",
    "Bool",
    "Compare",
    "EnumValue",
    "Leaf",
    "MatchAll",
    "Node",
    "Phrase",
    "Prefix",
    "Range",
    "Regex",
    "Span",
    "Term",
    "Tree",
    "Wildcard",
    "children",
    "leaves",
    "to_sexpr",
]

TREE_VERSION = 1
LANGUAGE = "lucene-v1"

Span = tuple[int, int]


@dataclass(frozen=True, slots=True, eq=False)
class Bool:
    """A Boolean group: required, optional and prohibited clauses."""

    must: tuple[Node, ...]
    should: tuple[Node, ...]
    must_not: tuple[Node, ...]
    span: Span


@dataclass(frozen=True, slots=True, eq=False)
class MatchAll:
    """``*:*``: every message in scope (its ``field`` is ``*``)."""

    span: Span
    field: ClassVar[str] = "*"


@dataclass(frozen=True, slots=True, eq=False)
class Term:
    """A bare term: words for ``text``, a whole value for keyword and name fields."""

    field: str
    value: str
    span: Span


@dataclass(frozen=True, slots=True, eq=False)
class Phrase:
    """A quoted phrase: consecutive words for ``text``, an exact value elsewhere."""

    field: str
    value: str
    span: Span


@dataclass(frozen=True, slots=True, eq=False)
class Prefix:
    """``value*``: a literal prefix (escapes already removed)."""

    field: str
    value: str
    span: Span


@dataclass(frozen=True, slots=True, eq=False)
class Wildcard:
    """A wildcard pattern: ``*`` any run, ``?`` one character, ``\\`` escapes the next one."""

    field: str
    pattern: str
    span: Span


@dataclass(frozen=True, slots=True, eq=False)
class Regex:
    """``/pattern/`` in Lucene regular-expression syntax, matched against a whole value."""

    field: str
    pattern: str
    span: Span


@dataclass(frozen=True, slots=True, eq=False)
class Range:
    """``[lower TO upper]`` / ``{…}`` / mixed; ``None`` is an open end (``*``)."""

    field: str
    lower: str | None
    upper: str | None
    include_lower: bool
    include_upper: bool
    span: Span


@dataclass(frozen=True, slots=True, eq=False)
class Compare:
    """``field>value`` and friends; ``op`` is one of ``> >= < <=``."""

    field: str
    op: str
    value: str
    span: Span


@dataclass(frozen=True, slots=True, eq=False)
class EnumValue:
    """One value of an enum field (``kind``, ``has``, ``in``, ``preset``), already validated."""

    field: str
    value: str
    span: Span


Leaf = MatchAll | Term | Phrase | Prefix | Wildcard | Regex | Range | Compare | EnumValue
Node = Bool | Leaf


@dataclass(frozen=True, slots=True, eq=False)
class Tree:
    """A parsed or decoded query: its root and, when parsed, the source text."""

    root: Node
    source: str | None = None
    version: int = TREE_VERSION
    language: str = LANGUAGE


def children(node: Node) -> tuple[Node, ...]:
    """The direct children of ``node`` (empty for a leaf)."""
    if isinstance(node, Bool):
        return node.must + node.should + node.must_not
    return ()


def leaves(node: Node) -> list[Leaf]:
    """Every leaf under ``node`` in source order within each occurrence group."""
    out: list[Leaf] = []
    stack: list[Node] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Bool):
            stack.extend(reversed(children(current)))
        else:
            out.append(current)
    return out


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _atom(value: str) -> str:
    plain = value and all(ch.isalnum() or ch in "-_.@'" for ch in value)
    return value if plain else _quote(value)


def _field(field: str) -> str:
    return "" if field == "text" else field + ":"


def to_sexpr(node: Node) -> str:
    """A compact, Lucene-like rendering: ``(+alpha -beta (gamma delta))``.

    ``+`` marks a required clause, ``-`` a prohibited one, a bare clause is optional; the field
    prefix is left out for ``text``. Used by tests and debug logs; never parsed back.
    """
    if isinstance(node, Bool):
        parts = [f"+{to_sexpr(n)}" for n in node.must]
        parts += [to_sexpr(n) for n in node.should]
        parts += [f"-{to_sexpr(n)}" for n in node.must_not]
        return "(" + " ".join(parts) + ")"
    if isinstance(node, MatchAll):
        return "*:*"
    if isinstance(node, Term):
        return _field(node.field) + _atom(node.value)
    if isinstance(node, Phrase):
        return _field(node.field) + _quote(node.value)
    if isinstance(node, Prefix):
        return _field(node.field) + _atom(node.value) + "*"
    if isinstance(node, Wildcard):
        return _field(node.field) + "w" + _quote(node.pattern)
    if isinstance(node, Regex):
        return _field(node.field) + "/" + node.pattern + "/"
    if isinstance(node, Range):
        low = "*" if node.lower is None else _atom(node.lower)
        high = "*" if node.upper is None else _atom(node.upper)
        opener = "[" if node.include_lower else "{"
        closer = "]" if node.include_upper else "}"
        return f"{_field(node.field)}{opener}{low} TO {high}{closer}"
    if isinstance(node, Compare):
        return f"{node.field}{node.op}{_atom(node.value)}"
    return f"{node.field}={_atom(node.value)}"
