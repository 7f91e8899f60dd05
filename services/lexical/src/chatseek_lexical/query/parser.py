"""Text → syntax tree: Lucene's query syntax with the precedence rules of profile v1.

Invariants:
* Acceptance follows Lucene's classic grammar token for token (longest match, the Range and
  Boost lexical states); only ``in:`` and ``mime:`` values may also contain ``/``.
* Explicit ``AND`` binds tighter than ``OR``; juxtaposition (default AND) binds loosest, so
  ``a OR b c`` is ``(a OR b) AND c``. Inside an ``OR`` a bare clause is optional.
* No recursion on input structure: any depth parses, then the depth budget rejects it. Checks
  run in order: syntax, size budgets, unsupported operators, then ``validate``.
* Every node and error carries a ``[start, end)`` span in UTF-16 code units.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from chatseek_core.errors import QuerySyntaxError, UnsupportedOperator
from chatseek_lexical.query.ast import (
    Bool,
    Compare,
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
from chatseek_lexical.query.fields import DEFAULT_FIELD, FIELDS, FieldKind
from chatseek_lexical.query.limits import DEFAULT_BUDGETS, Budgets, exceeded
from chatseek_lexical.query.validate import validate

__all__ = ["parse", "parse_syntax"]

log = logging.getLogger(__name__)

_WS = " \t\n\r\u3000"
_NOT_TERM_START = frozenset(' \t\n\r\u3000+-!():^[]"{}~*?\\/')
_TERM_EXTRA = "+-"
_WILD = "*?"
_DIGITS = "0123456789"
_SURROGATE = re.compile("[\ud800-\udfff]")
_COMPARE_TERM = re.compile(r"^([A-Za-z]+)(>=|<=|>|<|=)(.*)$", re.DOTALL)
_MIN_SHOULD = re.compile(r"^@\d+$")
_JAVA_FLOAT = re.compile(
    r"^\s*[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)\s*$"
)
_HEX = frozenset("0123456789abcdefABCDEF")
_INTERVAL_FIELD = "fn"

# token kinds, in Lucene's declaration order (earlier wins a tie in length)
AND, OR, NOT, PLUS, MINUS, BAREOPER = "AND", "OR", "NOT", "PLUS", "MINUS", "BAREOPER"
LPAREN, RPAREN, COLON, STAR, CARAT = "LPAREN", "RPAREN", "COLON", "STAR", "CARAT"
QUOTED, TERM, FUZZY, PREFIXTERM, WILDTERM = "QUOTED", "TERM", "FUZZY", "PREFIXTERM", "WILDTERM"
REGEXP, RANGEIN, RANGEEX, NUMBER = "REGEXP", "RANGEIN", "RANGEEX", "NUMBER"
RANGE_TO, RANGEIN_END, RANGEEX_END = "RANGE_TO", "RANGEIN_END", "RANGEEX_END"
RANGE_QUOTED, RANGE_GOOP, EOF = "RANGE_QUOTED", "RANGE_GOOP", "EOF"

_CLAUSE_START = frozenset(
    {TERM, STAR, PREFIXTERM, WILDTERM, REGEXP, BAREOPER, QUOTED, RANGEIN, RANGEEX, LPAREN}
)
_TERM_TOKENS = frozenset({TERM, STAR, PREFIXTERM, WILDTERM, REGEXP, BAREOPER})
_RANGE_BOUND = frozenset({RANGE_GOOP, RANGE_QUOTED, RANGE_TO})
_DESCRIBE = {
    AND: "AND",
    OR: "OR",
    NOT: "NOT",
    PLUS: "'+'",
    MINUS: "'-'",
    RPAREN: "')'",
    COLON: "':'",
    CARAT: "'^'",
    FUZZY: "'~'",
    EOF: "end of the query",
}


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str
    image: str
    start: int
    end: int


class _Offsets:
    """Maps code-point offsets of the query to UTF-16 offsets."""

    def __init__(self, text: str) -> None:
        table = [0]
        for char in text:
            table.append(table[-1] + (2 if ord(char) > 0xFFFF else 1))
        self.table = table

    def span(self, start: int, end: int) -> Span:
        return (self.table[start], self.table[end])


def _error(message: str, span: Span, hint: str = "") -> QuerySyntaxError:
    return QuerySyntaxError(
        f"syntax error at {span[0]}: {message}",
        hint=hint or "check the query syntax: quote phrases, escape special characters with \\",
        metadata={"span": f"{span[0]},{span[1]}"},
    )


# --- lexer ---


class _Lexer:
    """Lucene's classic token manager: DEFAULT, Range and Boost lexical states."""

    def __init__(self, text: str, offsets: _Offsets) -> None:
        self.text = text
        self.n = len(text)
        self.offsets = offsets

    def _unit(self, i: int, extra: str) -> int:
        """Length of one term unit at ``i`` (an escaped pair or one allowed char), else 0."""
        if i >= self.n:
            return 0
        char = self.text[i]
        if char == "\\":
            return 2 if i + 1 < self.n else 0
        if char not in _NOT_TERM_START or char in extra:
            return 1
        return 0

    def _run(self, i: int, first: str, rest: str) -> int:
        size = self._unit(i, first)
        if size == 0:
            return 0
        j = i + size
        while True:
            step = self._unit(j, rest)
            if step == 0:
                return j - i
            j += step

    def _tail(self, i: int, rest: str) -> int:
        j = i
        while True:
            step = self._unit(j, rest)
            if step == 0:
                return j - i
            j += step

    def _quoted(self, i: int) -> int:
        j = i + 1
        while j < self.n:
            char = self.text[j]
            if char == "\\":
                if j + 1 >= self.n:
                    return 0
                j += 2
                continue
            if char == '"':
                return j + 1 - i
            j += 1
        return 0

    def _regexp(self, i: int) -> int:
        last = 0
        j = i + 1
        while j < self.n:
            if self.text[j] == "/":
                last = j + 1 - i
                if self.text[j - 1] != "\\":
                    break
            j += 1
        return last

    def _range_quoted(self, i: int) -> int:
        last = 0
        j = i + 1
        while j < self.n:
            if self.text[j] == '"':
                escaped = self.text[j - 1] == "\\" and j - 1 > i
                if j > i + 1:
                    last = j + 1 - i
                if not escaped:
                    break
            j += 1
        return last

    def _default(self, i: int, slashes: bool) -> tuple[str, int]:
        text = self.text
        char = text[i]
        found: list[tuple[str, int]] = []
        if text.startswith("AND", i):
            found.append((AND, 3))
        if text.startswith("&&", i):
            found.append((AND, 2))
        if text.startswith("OR", i) or text.startswith("||", i):
            found.append((OR, 2))
        if text.startswith("NOT", i):
            found.append((NOT, 3))
        if char == "!":
            found.append((NOT, 1))
        if char == "+":
            found.append((PLUS, 1))
        if char == "-":
            found.append((MINUS, 1))
        if char in "+-!" and i + 1 < self.n and text[i + 1] in _WS:
            found.append((BAREOPER, 2))
        single = {"(": LPAREN, ")": RPAREN, ":": COLON, "*": STAR, "^": CARAT}
        if char in single:
            found.append((single[char], 1))
        if char == '"':
            found.append((QUOTED, self._quoted(i)))
        rest = _TERM_EXTRA + ("/" if slashes else "")
        term = self._run(i, "", rest)
        found.append((TERM, term))
        if char == "~":
            found.append((FUZZY, 1 + self._tail(i + 1, _TERM_EXTRA)))
        if char == "*":
            found.append((PREFIXTERM, 1))
        elif term and i + term < self.n and text[i + term] == "*":
            found.append((PREFIXTERM, term + 1))
        found.append((WILDTERM, self._run(i, _WILD, rest + _WILD)))
        if char == "/":
            found.append((REGEXP, self._regexp(i)))
        if char == "[":
            found.append((RANGEIN, 1))
        if char == "{":
            found.append((RANGEEX, 1))
        best_kind, best_len = "", 0
        for kind, size in found:
            if size > best_len:
                best_kind, best_len = kind, size
        return best_kind, best_len

    def _range(self, i: int) -> tuple[str, int]:
        text = self.text
        char = text[i]
        goop = 0
        while i + goop < self.n and text[i + goop] not in " ]}":
            goop += 1
        if char in _WS and goop <= 1:
            return "", -1
        found: list[tuple[str, int]] = []
        if text.startswith("TO", i):
            found.append((RANGE_TO, 2))
        if char == "]":
            found.append((RANGEIN_END, 1))
        if char == "}":
            found.append((RANGEEX_END, 1))
        if char == '"':
            found.append((RANGE_QUOTED, self._range_quoted(i)))
        found.append((RANGE_GOOP, goop))
        best_kind, best_len = "", 0
        for kind, size in found:
            if size > best_len:
                best_kind, best_len = kind, size
        return best_kind, best_len

    def _boost(self, i: int) -> tuple[str, int]:
        j = i
        while j < self.n and self.text[j] in _DIGITS:
            j += 1
        if j == i:
            return "", 0
        if j + 1 < self.n and self.text[j] == "." and self.text[j + 1] in _DIGITS:
            j += 1
            while j < self.n and self.text[j] in _DIGITS:
                j += 1
        return NUMBER, j - i

    def tokens(self) -> list[_Tok]:
        out: list[_Tok] = []
        state = "default"
        i = 0
        while True:
            if state != "boost":
                while i < self.n and self.text[i] in _WS:
                    if state == "range":
                        kind, size = self._range(i)
                        if size != -1:
                            break
                    i += 1
            if i >= self.n:
                if state == "boost":
                    span = self.offsets.span(self.n, self.n)
                    raise _error("a boost '^' must be followed by a number", span)
                out.append(_Tok(EOF, "", self.n, self.n))
                return out
            if state == "default":
                kind, size = self._default(i, self._slashes(out))
            elif state == "range":
                kind, size = self._range(i)
            else:
                kind, size = self._boost(i)
            if size <= 0:
                raise self._lexical_error(i, state)
            tok = _Tok(kind, self.text[i : i + size], i, i + size)
            out.append(tok)
            i += size
            if kind == CARAT:
                state = "boost"
            elif kind in (RANGEIN, RANGEEX):
                state = "range"
            elif kind in (RANGEIN_END, RANGEEX_END, NUMBER):
                state = "default"

    def _slashes(self, out: list[_Tok]) -> bool:
        if len(out) < 2 or out[-1].kind != COLON or out[-2].kind != TERM:
            return False
        spec = FIELDS.get(out[-2].image)
        return spec is not None and spec.slash_values

    def _lexical_error(self, i: int, state: str) -> QuerySyntaxError:
        span = self.offsets.span(i, min(i + 1, self.n))
        char = self.text[i]
        if state == "boost":
            return _error("a boost '^' must be followed by a number", span)
        if char == '"':
            return _error("unterminated quoted phrase", span, 'close the phrase with "')
        if char == "/":
            return _error(
                "unterminated regular expression",
                span,
                "close the regex with /, or escape a literal slash as \\/",
            )
        if char == "\\":
            return _error("the query cannot end with a lone backslash", span)
        return _error(f"unexpected character {char!r}", span, f"escape it as \\{char}")


# --- escapes ---


def discard_escapes(image: str, span: Span) -> str:
    """Lucene's escape removal: ``\\x`` → ``x``, ``\\uXXXX`` → that UTF-16 code unit.

    Raises:
        QuerySyntaxError: a trailing backslash or a malformed ``\\u`` escape.
    """
    if "\\" not in image:
        return image
    out: list[str] = []
    i = 0
    while i < len(image):
        char = image[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        if i + 1 >= len(image):
            raise _error("a term cannot end with an escape character", span)
        nxt = image[i + 1]
        if nxt == "u":
            digits = image[i + 2 : i + 6]
            if len(digits) < 4:
                raise _error("truncated unicode escape sequence", span)
            if any(d not in _HEX for d in digits):
                raise _error("non-hex character in unicode escape sequence", span)
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(nxt)
        i += 2
    joined = "".join(out)
    if _SURROGATE.search(joined):
        joined = joined.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return joined


def _wildcard_image(image: str, span: Span) -> str:
    """A wildcard term with escapes kept only where they matter (``\\*``, ``\\?``, ``\\\\``)."""
    out: list[str] = []
    i = 0
    while i < len(image):
        char = image[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        end = i + 6 if image[i + 1 : i + 2] == "u" else i + 2
        literal = discard_escapes(image[i:end], span)
        out.append("".join("\\" + c if c in "*?\\" else c for c in literal))
        i = end
    return "".join(out)


# --- parser ---


@dataclass(slots=True)
class _Item:
    conj: str | None
    mod: str | None
    node: Node
    start: int
    end: int


@dataclass(slots=True)
class _Frame:
    default_field: str
    conj: str | None = None
    mod: str | None = None
    start: int = 0
    open_tok: _Tok | None = None
    item_start: int = 0
    items: list[_Item] = field(default_factory=list)


@dataclass(slots=True)
class _Unsupported:
    operator: str
    message: str
    hint: str
    start: int
    end: int


def _occur(mod: str | None, default: str) -> str:
    if mod == PLUS:
        return "must"
    if mod in (MINUS, NOT):
        return "must_not"
    return default


def _bool(items: list[tuple[str | None, Node]], default: str, span: Span) -> Bool:
    groups: dict[str, list[Node]] = {"must": [], "should": [], "must_not": []}
    for mod, node in items:
        groups[_occur(mod, default)].append(node)
    return Bool(tuple(groups["must"]), tuple(groups["should"]), tuple(groups["must_not"]), span)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.offsets = _Offsets(text)
        self.toks = _Lexer(text, self.offsets).tokens()
        self.pos = 0
        self.unsupported: list[_Unsupported] = []

    @property
    def tok(self) -> _Tok:
        return self.toks[self.pos]

    def peek(self, ahead: int = 1) -> _Tok:
        return self.toks[min(self.pos + ahead, len(self.toks) - 1)]

    def advance(self) -> _Tok:
        tok = self.toks[self.pos]
        if tok.kind != EOF:
            self.pos += 1
        return tok

    def span(self, start: int, end: int) -> Span:
        return self.offsets.span(start, end)

    def unexpected(self, expected: str) -> QuerySyntaxError:
        tok = self.tok
        wordy = any(ch.isalpha() for ch in tok.image)
        what = _DESCRIBE.get(tok.kind) or ("term" if wordy else repr(tok.image))
        return _error(f"unexpected {what}, expected {expected}", self.span(tok.start, tok.end))

    def note(self, operator: str, message: str, hint: str, start: int, end: int) -> None:
        self.unsupported.append(_Unsupported(operator, message, hint, start, end))

    # --- grammar ---

    def parse(self) -> Node:
        frames = [_Frame(DEFAULT_FIELD)]
        while True:
            frame = frames[-1]
            conj: str | None = None
            if frame.items and self.tok.kind in (AND, OR):
                conj = self.advance().kind
            mod_tok = self.advance() if self.tok.kind in (PLUS, MINUS, NOT) else None
            mod = mod_tok.kind if mod_tok else None
            start = mod_tok.start if mod_tok else self.tok.start
            clause_start = self.tok.start
            field_name = frame.default_field
            field_tok: _Tok | None = None
            if self.tok.kind in (TERM, STAR) and self.peek().kind == COLON:
                field_tok = self.advance()
                self.advance()
                field_name = discard_escapes(
                    field_tok.image, self.span(field_tok.start, field_tok.end)
                )
            if self.tok.kind == LPAREN:
                open_tok = self.advance()
                frames.append(_Frame(field_name, conj, mod, clause_start, open_tok, start))
                continue
            if self.tok.kind not in _CLAUSE_START:
                expected = "a term, a phrase or '('"
                if conj:
                    expected += f" after {conj}"
                raise self.unexpected(expected)
            node = self.clause(field_name, field_tok, clause_start)
            frame.items.append(_Item(conj, mod, node, start, self.toks[self.pos - 1].end))
            while True:
                if self.tok.kind == RPAREN:
                    if len(frames) == 1:
                        raise self.unexpected("a term or the end of the query")
                    closed = frames.pop()
                    close_tok = self.advance()
                    node = self.close_group(closed, close_tok)
                    frames[-1].items.append(
                        _Item(
                            closed.conj,
                            closed.mod,
                            node,
                            closed.item_start,
                            self.toks[self.pos - 1].end,
                        )
                    )
                    continue
                if self.tok.kind == EOF:
                    if len(frames) > 1:
                        unclosed = frames[-1].open_tok
                        assert unclosed is not None
                        raise _error(
                            "missing ')' for this '('",
                            self.span(unclosed.start, unclosed.end),
                            "close every group with )",
                        )
                    return self.finish(frames[0])
                break
            if self.tok.kind not in _CLAUSE_START and self.tok.kind not in (
                AND,
                OR,
                PLUS,
                MINUS,
                NOT,
            ):
                raise self.unexpected("an operator, a term or the end of the query")

    def finish(self, frame: _Frame) -> Node:
        start = frame.items[0].start
        end = frame.items[-1].end
        mod, node = self.build(frame.items, self.span(start, end))
        return self.apply_mod(mod, node, self.span(start, end))

    def close_group(self, frame: _Frame, close_tok: _Tok) -> Node:
        span = self.span(frame.start, close_tok.end)
        mod, node = self.build(frame.items, span)
        node = self.apply_mod(mod, node, span)
        if self.tok.kind == CARAT:
            caret = self.advance()
            number = self.advance()
            self.note(
                "boost",
                "unsupported operator: boost (^) changes scores only",
                "remove ^N; ordering here never changes which messages match",
                caret.start,
                number.end,
            )
        nxt = self.tok
        if nxt.kind == TERM and nxt.start == close_tok.end and _MIN_SHOULD.match(nxt.image):
            self.note(
                "minimum_should_match",
                "unsupported operator: minimum-should-match (@N)",
                "list the required alternatives explicitly with AND / OR",
                close_tok.end,
                nxt.end,
            )
        return node

    def apply_mod(self, mod: str | None, node: Node, span: Span) -> Node:
        if mod in (MINUS, NOT):
            return Bool((), (), (node,), span)
        return node

    def build(self, items: list[_Item], outer: Span) -> tuple[str | None, Node]:
        """Group a flat clause list by precedence: juxtaposition < OR < AND."""
        disj: list[list[list[_Item]]] = []
        for item in items:
            if item.conj is None:
                disj.append([[item]])
            elif item.conj == OR:
                disj[-1].append([item])
            else:
                disj[-1][-1].append(item)
        top: list[tuple[str | None, Node, int, int]] = []
        for group in disj:
            ors: list[tuple[str | None, Node, int, int]] = []
            for ands in group:
                if len(ands) == 1:
                    only = ands[0]
                    ors.append((only.mod, only.node, only.start, only.end))
                    continue
                start, end = ands[0].start, ands[-1].end
                span = outer if len(group) == 1 and len(disj) == 1 else self.span(start, end)
                node = _bool([(i.mod, i.node) for i in ands], "must", span)
                ors.append((None, node, start, end))
            if len(ors) == 1:
                top.append(ors[0])
                continue
            start, end = ors[0][2], ors[-1][3]
            span = outer if len(disj) == 1 else self.span(start, end)
            top.append((None, _bool([(m, n) for m, n, _, _ in ors], "should", span), start, end))
        if len(top) == 1:
            return top[0][0], top[0][1]
        return None, _bool([(m, n) for m, n, _, _ in top], "must", outer)

    def clause(self, field_name: str, field_tok: _Tok | None, start: int) -> Node:
        tok = self.tok
        if tok.kind in (RANGEIN, RANGEEX):
            return self.range_clause(field_name, start)
        if tok.kind == QUOTED:
            self.advance()
            value = discard_escapes(tok.image[1:-1], self.span(tok.start, tok.end))
            if self.tok.kind == FUZZY:
                fuzzy = self.advance()
                self.note(
                    "proximity",
                    'unsupported operator: proximity ("…"~N)',
                    "use an exact phrase, or several words joined with AND",
                    fuzzy.start,
                    fuzzy.end,
                )
            self.boost()
            return Phrase(field_name, value, self.span(start, self.toks[self.pos - 1].end))
        if field_tok is None and tok.kind == TERM:
            compared = self.comparison(tok, start)
            if compared is not None:
                return compared
        self.advance()
        fuzzy_tok = self.advance() if self.tok.kind == FUZZY else None
        if self.boost() and self.tok.kind == FUZZY:
            fuzzy_tok = self.advance()
        if fuzzy_tok is not None:
            if tok.kind == TERM:
                self.check_fuzzy(fuzzy_tok)
            self.note(
                "fuzzy",
                "unsupported operator: fuzzy matching (~)",
                "spell the word out, or use a wildcard such as invoic*",
                fuzzy_tok.start,
                fuzzy_tok.end,
            )
        if field_name == _INTERVAL_FIELD and field_tok is not None:
            nxt = self.tok
            if nxt.kind == LPAREN and nxt.start == tok.end:
                self.note(
                    "intervals",
                    "unsupported operator: interval functions (fn:…)",
                    "use phrases and Boolean operators",
                    field_tok.start,
                    nxt.end,
                )
        span = self.span(start, tok.end)
        return self.term_leaf(tok, field_name, span)

    def term_leaf(self, tok: _Tok, field_name: str, span: Span) -> Node:
        tok_span = self.span(tok.start, tok.end)
        if tok.kind == STAR:
            if field_name == "*":
                return MatchAll(span)
            return Wildcard(field_name, "*", span)
        if tok.kind == PREFIXTERM:
            return Prefix(field_name, discard_escapes(tok.image[:-1], tok_span), span)
        if tok.kind == WILDTERM:
            return Wildcard(field_name, _wildcard_image(tok.image, tok_span), span)
        if tok.kind == REGEXP:
            return Regex(field_name, tok.image[1:-1], span)
        if tok.kind == BAREOPER:
            return Term(field_name, tok.image[0], span)
        return Term(field_name, discard_escapes(tok.image, tok_span), span)

    def boost(self) -> bool:
        if self.tok.kind != CARAT:
            return False
        caret = self.advance()
        number = self.advance()
        self.note(
            "boost",
            "unsupported operator: boost (^) changes scores only",
            "remove ^N; ordering here never changes which messages match",
            caret.start,
            number.end,
        )
        return True

    def check_fuzzy(self, tok: _Tok) -> None:
        slop = tok.image[1:]
        if not _JAVA_FLOAT.match(slop):
            return
        cleaned = slop.strip().rstrip("fFdD")
        try:
            value = float(cleaned)
        except ValueError:
            return
        span = self.span(tok.start, tok.end)
        if value < 0:
            raise _error("the similarity of a fuzzy term cannot be negative", span)
        if value >= 1 and value != int(value):
            raise _error("fractional edit distances are not allowed", span)

    def comparison(self, tok: _Tok, start: int) -> Node | None:
        found = _COMPARE_TERM.match(tok.image)
        if not found:
            return None
        name, op, rest = found.groups()
        spec = FIELDS.get(name)
        if spec is None:
            return None
        ordered = spec.kind in (FieldKind.DATE, FieldKind.SIZE)
        if op != "=" and not ordered:
            return None
        self.advance()
        end = tok.end
        value_span = self.span(tok.start, tok.end)
        if rest:
            value = discard_escapes(rest, value_span)
        elif self.tok.kind == QUOTED and self.tok.start == tok.end:
            quoted = self.advance()
            end = quoted.end
            value = discard_escapes(quoted.image[1:-1], self.span(quoted.start, quoted.end))
        else:
            value = ""
        span = self.span(start, end)
        if op == "=":
            return Term(name, value, span)
        return Compare(name, op, value, span)

    def range_clause(self, field_name: str, start: int) -> Node:
        open_tok = self.advance()
        bounds: list[str | None] = []
        for index in range(2):
            if self.tok.kind not in _RANGE_BOUND:
                raise self.unexpected("a range bound")
            bound = self.advance()
            bounds.append(self.bound(bound))
            if index == 0:
                if self.tok.kind != RANGE_TO:
                    raise self.unexpected("TO")
                self.advance()
        if self.tok.kind not in (RANGEIN_END, RANGEEX_END):
            raise self.unexpected("']' or '}'")
        close = self.advance()
        self.boost()
        return Range(
            field_name,
            bounds[0],
            bounds[1],
            open_tok.kind == RANGEIN,
            close.kind == RANGEIN_END,
            self.span(start, close.end),
        )

    def bound(self, tok: _Tok) -> str | None:
        span = self.span(tok.start, tok.end)
        if tok.kind == RANGE_QUOTED:
            value = discard_escapes(tok.image[1:-1], span)
        else:
            value = discard_escapes(tok.image, span)
        return None if value == "*" else value


# --- public ---


def _measure(root: Node) -> tuple[int, int]:
    """(depth, node count) of a tree, without recursion."""
    depth = 0
    count = 0
    stack: list[tuple[Node, int]] = [(root, 1)]
    while stack:
        node, level = stack.pop()
        count += 1
        if isinstance(node, Bool):
            depth = max(depth, level)
            stack.extend((child, level + 1) for child in node.must + node.should + node.must_not)
    return depth, count


def parse_syntax(text: str, budgets: Budgets = DEFAULT_BUDGETS) -> Tree:
    """Parse ``text`` into an untyped tree: syntax, size budgets and unsupported operators.

    Raises:
        QuerySyntaxError: the text is not valid query syntax (span of the offending token).
        QueryLimit: the query is longer, deeper or bigger than its budgets.
        UnsupportedOperator: fuzzy, proximity, boost, minimum-should-match or intervals.
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > budgets.query_bytes:
        whole = (0, len(text.encode("utf-16-le", "surrogatepass")) // 2)
        raise exceeded("query_bytes", budgets.query_bytes, f"the query has {size} bytes", whole)
    offsets = _Offsets(text)
    lone = _SURROGATE.search(text)
    if lone:
        raise _error(
            "the query is not valid Unicode (lone surrogate)",
            offsets.span(lone.start(), lone.end()),
        )
    if not text.strip(_WS):
        raise _error("the query is empty", (0, offsets.table[-1]), "type at least one word")
    parser = _Parser(text)
    root = parser.parse()
    depth, count = _measure(root)
    if depth > budgets.depth:
        raise exceeded("depth", budgets.depth, f"the query nests {depth} groups deep", root.span)
    if count > budgets.nodes:
        raise exceeded("nodes", budgets.nodes, f"the query has {count} nodes", root.span)
    if parser.unsupported:
        first = parser.unsupported[0]
        span = parser.span(first.start, first.end)
        raise UnsupportedOperator(
            first.message,
            hint=first.hint,
            metadata={"span": f"{span[0]},{span[1]}", "operator": first.operator},
        )
    return Tree(root, source=text)


def parse(text: str, budgets: Budgets = DEFAULT_BUDGETS) -> Tree:
    """Parse and validate a query: the typed tree every consumer (compile, JSON) works on.

    Raises:
        QuerySyntaxError, QueryLimit, UnsupportedOperator: see ``parse_syntax``.
        UnknownField: a field name is not in the registry (names are case-sensitive).
        InvalidValue: a value does not fit its field (enum, date, size, topic, leaf type).
        UnsupportedRegex: a regex uses ``&`` or ``~``.
    """
    tree = parse_syntax(text, budgets)
    typed = validate(tree, budgets)
    log.debug("parsed query into %d bytes of tree", len(text))
    return typed
