"""Lucene regular expressions and wildcards, translated to RE2 (a bounded automaton) and GLOB.

Invariants:
* The dialect is Lucene's ``RegExp``: ``. | * + ? {n,m} ( ) [...] [^...] "literal"``,
  ``\\`` escapes (``\\d \\s \\w`` and negations), ``@`` any string, ``#`` nothing,
  ``<n-m>`` decimal intervals; ``&`` and ``~`` have no RE2 form and raise ``UnsupportedRegex``.
* Patterns match whole values and ``.`` matches newlines. Every non-alphanumeric literal is
  emitted as ``\\x{…}``, so no character of the user's pattern can change its structure.
* Programs over the automaton budget raise ``QueryLimit``; ``prefix`` is a literal every
  match starts with ("" when none), for index range scans.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import re2

from chatseek_core.errors import QuerySyntaxError, UnsupportedRegex
from chatseek_lexical.query.limits import Budgets, exceeded

__all__ = [
    "Pattern",
    "compile_regex",
    "compile_wildcard",
    "fold",
    "prefix_successor",
    "wildcard_glob",
    "wildcard_parts",
]

RE2_MAX_MEM = 32 * 1024 * 1024
MAX_CODEPOINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)
INT32_MAX = 2**31 - 1
_NEVER = r"[^\x00-\x{10FFFF}]"
_CLASSES = {"d": r"\d", "D": r"\D", "s": r"\s", "S": r"\S", "w": r"\w", "W": r"\W"}
_STAR = object()
_ONE = object()


@dataclass(frozen=True, slots=True)
class Pattern:
    """A compiled whole-value pattern, its RE2 source and its literal prefix."""

    regex: re2._Regexp
    source: str
    prefix: str

    def matches(self, value: str) -> bool:
        """Whether the whole of ``value`` matches."""
        return self.regex.fullmatch(value) is not None


def fold(text: str) -> str:
    """``normalise`` without whitespace folding: NFKD, marks removed, NFC, lower-case."""
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return unicodedata.normalize("NFC", stripped).lower()


def _lit(char: str) -> str:
    if char.isascii() and char.isalnum():
        return char
    return f"\\x{{{ord(char):x}}}"


def _lits(text: str) -> str:
    return "".join(_lit(ch) for ch in text)


def _syntax(message: str, span: tuple[int, int]) -> QuerySyntaxError:
    return QuerySyntaxError(
        f"regular expression syntax error: {message}",
        hint='Lucene regex syntax: . * + ? {n,m} | ( ) [a-z] "literal"; escape others with \\',
        metadata={"span": f"{span[0]},{span[1]}"},
    )


# --- regex AST ---


@dataclass(frozen=True, slots=True)
class _Piece:
    """One translated sub-expression: RE2 source, a literal prefix, whether it is only literal."""

    source: str
    prefix: str
    literal: bool


def _seq(items: list[_Piece]) -> _Piece:
    prefix = ""
    literal = True
    for item in items:
        if not literal:
            break
        prefix += item.prefix
        literal = item.literal
    return _Piece("".join(i.source for i in items), prefix, literal)


def _alt(items: list[_Piece]) -> _Piece:
    if len(items) == 1:
        return items[0]
    common = items[0].prefix
    for item in items[1:]:
        size = 0
        while size < min(len(common), len(item.prefix)) and common[size] == item.prefix[size]:
            size += 1
        common = common[:size]
    return _Piece("(?:" + "|".join(i.source for i in items) + ")", common, False)


def _opaque(source: str) -> _Piece:
    return _Piece(source, "", False)


def _same_length_range(low: str, high: str) -> str:
    """RE2 source matching every digit string of ``len(low)`` between ``low`` and ``high``."""
    if low == high:
        return low
    if len(low) == 1:
        return f"[{low}-{high}]"
    if low[0] == high[0]:
        return low[0] + _same_length_range(low[1:], high[1:])
    rest = len(low) - 1
    if low[1:] == "0" * rest and high[1:] == "9" * rest:
        return f"[{low[0]}-{high[0]}][0-9]{{{rest}}}"
    parts = [low[0] + "(?:" + _same_length_range(low[1:], "9" * rest) + ")"]
    if int(high[0]) - int(low[0]) > 1:
        parts.append(f"[{int(low[0]) + 1}-{int(high[0]) - 1}][0-9]{{{rest}}}")
    parts.append(high[0] + "(?:" + _same_length_range("0" * rest, high[1:]) + ")")
    return "(?:" + "|".join(parts) + ")"


def _interval(low: int, high: int, digits: int) -> str:
    if digits > 0:
        return "(?:" + _same_length_range(str(low).zfill(digits), str(high).zfill(digits)) + ")"
    parts = []
    for width in range(len(str(low)), len(str(high)) + 1):
        start = max(low, 10 ** (width - 1) if width > 1 else 0)
        end = min(high, 10**width - 1)
        if start <= end:
            parts.append(_same_length_range(str(start), str(end)))
    return "0*(?:" + "|".join(parts) + ")"


class _RegexParser:
    """Recursive descent over Lucene's RegExp grammar, emitting RE2 pieces.

    Nesting is bounded by the caller's pattern-length budget (1024 characters).
    """

    def __init__(self, source: str, span: tuple[int, int]) -> None:
        self.s = source
        self.i = 0
        self.span = span

    def more(self) -> bool:
        return self.i < len(self.s)

    def peek(self, chars: str) -> bool:
        return self.more() and self.s[self.i] in chars

    def match(self, char: str) -> bool:
        if self.more() and self.s[self.i] == char:
            self.i += 1
            return True
        return False

    def next(self) -> str:
        if not self.more():
            raise _syntax("unexpected end of the pattern", self.span)
        char = self.s[self.i]
        self.i += 1
        return char

    def parse(self) -> _Piece:
        if not self.s:
            return _Piece("", "", True)
        piece = self.union()
        if self.more():
            raise _syntax(f"unexpected {self.s[self.i]!r} at offset {self.i}", self.span)
        return piece

    def union(self) -> _Piece:
        items = [self.inter()]
        while self.match("|"):
            items.append(self.inter())
        return _alt(items)

    def inter(self) -> _Piece:
        piece = self.concat()
        if self.peek("&"):
            raise UnsupportedRegex(
                "unsupported regex operator: & (intersection)",
                hint="split the condition into two clauses joined with AND",
                metadata={"span": f"{self.span[0]},{self.span[1]}", "operator": "&"},
            )
        return piece

    def concat(self) -> _Piece:
        items = [self.repeat()]
        while self.more() and not self.peek(")|&"):
            items.append(self.repeat())
        return _seq(items)

    def repeat(self) -> _Piece:
        piece = self.complement()
        while self.peek("?*+{"):
            op = self.next()
            group = "(?:" + piece.source + ")"
            if op == "?":
                piece = _opaque(group + "?")
            elif op == "*":
                piece = _opaque(group + "*")
            elif op == "+":
                piece = _Piece(group + "+", piece.prefix, False)
            else:
                piece = self.counted(piece, group)
        return piece

    def counted(self, piece: _Piece, group: str) -> _Piece:
        low = self.integer()
        high: int | None = low
        if self.match(","):
            high = self.integer() if self.peek("0123456789") else None
        if not self.match("}"):
            raise _syntax(f"expected '}}' at offset {self.i}", self.span)
        if high is not None and low > high:
            return _opaque(_NEVER)
        bound = "" if high == low else ("," if high is None else f",{high}")
        prefix = piece.prefix if low >= 1 else ""
        return _Piece(f"{group}{{{low}{bound}}}", prefix, False)

    def integer(self) -> int:
        start = self.i
        while self.peek("0123456789"):
            self.i += 1
        if start == self.i:
            raise _syntax(f"integer expected at offset {self.i}", self.span)
        value = int(self.s[start : self.i])
        if value > INT32_MAX:
            raise _syntax(f"number out of range at offset {start}", self.span)
        return value

    def complement(self) -> _Piece:
        if self.peek("~"):
            raise UnsupportedRegex(
                "unsupported regex operator: ~ (complement)",
                hint="use NOT with a separate clause instead of a complemented pattern",
                metadata={"span": f"{self.span[0]},{self.span[1]}", "operator": "~"},
            )
        return self.char_class()

    def char_class(self) -> _Piece:
        if not self.match("["):
            return self.simple()
        negate = self.match("^")
        parts = [self.class_item()]
        while self.more() and not self.peek("]"):
            parts.append(self.class_item())
        if not self.match("]"):
            raise _syntax(f"expected ']' at offset {self.i}", self.span)
        return _opaque("[" + ("^" if negate else "") + "".join(parts) + "]")

    def predefined(self) -> str | None:
        if self.peek("\\") and self.i + 1 < len(self.s) and self.s[self.i + 1] in _CLASSES:
            char = self.s[self.i + 1]
            self.i += 2
            return _CLASSES[char]
        return None

    def char(self) -> str:
        self.match("\\")
        return self.next()

    def class_item(self) -> str:
        predefined = self.predefined()
        if predefined is not None:
            return predefined
        low = self.char()
        if self.match("-"):
            high = self.char()
            if ord(low) > ord(high):
                raise _syntax(f"invalid character range {low}-{high}", self.span)
            return _lit(low) + "-" + _lit(high)
        return _lit(low)

    def simple(self) -> _Piece:
        if self.match("."):
            return _opaque(".")
        if self.match("#"):
            return _opaque(_NEVER)
        if self.match("@"):
            return _opaque(".*")
        if self.match('"'):
            start = self.i
            while self.more() and not self.peek('"'):
                self.i += 1
            if not self.match('"'):
                raise _syntax(f"expected '\"' at offset {self.i}", self.span)
            text = self.s[start : self.i - 1]
            return _Piece(_lits(text), text, True)
        if self.match("("):
            if self.match(")"):
                return _Piece("", "", True)
            inner = self.union()
            if not self.match(")"):
                raise _syntax(f"expected ')' at offset {self.i}", self.span)
            return _Piece("(?:" + inner.source + ")", inner.prefix, inner.literal)
        if self.match("<"):
            return self.interval()
        predefined = self.predefined()
        if predefined is not None:
            return _opaque(predefined)
        char = self.char()
        return _Piece(_lit(char), char, True)

    def interval(self) -> _Piece:
        start = self.i
        while self.more() and not self.peek(">"):
            self.i += 1
        if not self.match(">"):
            raise _syntax(f"expected '>' at offset {self.i}", self.span)
        body = self.s[start : self.i - 1]
        dash = body.find("-")
        if dash <= 0 or dash == len(body) - 1 or dash != body.rfind("-"):
            raise _syntax(f"interval syntax error at offset {start}", self.span)
        low_text, high_text = body[:dash], body[dash + 1 :]
        low, high = _java_int(low_text, self.span), _java_int(high_text, self.span)
        digits = len(low_text) if len(low_text) == len(high_text) else 0
        low, high = min(low, high), max(low, high)
        return _opaque(_interval(low, high, digits))


def _java_int(text: str, span: tuple[int, int]) -> int:
    digits = text[1:] if text.startswith("+") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise _syntax(f"interval bound {text!r} is not a number", span)
    value = int(digits)
    if value > INT32_MAX:
        raise _syntax(f"interval bound {text!r} is out of range", span)
    return value


# --- wildcards ---


def wildcard_parts(pattern: str) -> list[object]:
    """Split a Lucene wildcard into literal characters and the ``*`` / ``?`` markers.

    A backslash makes the next character literal; a trailing lone backslash is literal.
    """
    parts: list[object] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            parts.append(pattern[index + 1])
            index += 2
            continue
        parts.append(_STAR if char == "*" else _ONE if char == "?" else char)
        index += 1
    return parts


def _fold_literals(parts: list[object]) -> list[object]:
    out: list[object] = []
    run = ""
    for part in parts:
        if isinstance(part, str):
            run += part
            continue
        out.extend(fold(run))
        run = ""
        out.append(part)
    out.extend(fold(run))
    return out


def wildcard_glob(pattern: str, *, folded: bool) -> str:
    """The SQLite GLOB pattern equal to the wildcard ``pattern`` (literals bracket-escaped)."""
    parts = wildcard_parts(pattern)
    if folded:
        parts = _fold_literals(parts)
    out = []
    for part in parts:
        if part is _STAR:
            out.append("*")
        elif part is _ONE:
            out.append("?")
        else:
            char = str(part)
            out.append(f"[{char}]" if char in "*?[" else char)
    return "".join(out)


# --- compile ---


def _compile(source: str, prefix: str, span: tuple[int, int], budgets: Budgets) -> Pattern:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = RE2_MAX_MEM
    full = "(?s:" + source + ")"
    try:
        compiled = re2.compile(full, options)
    except re2.error as exc:
        detail = str(exc)
        if "repetition" in detail or "too large" in detail or "too big" in detail:
            raise exceeded(
                "automaton_states", budgets.automaton_states, "the pattern is too big", span
            ) from exc
        raise UnsupportedRegex(
            "unsupported regular expression",
            hint="keep to Lucene regex syntax",
            metadata={"span": f"{span[0]},{span[1]}"},
        ) from exc
    if compiled.programsize > budgets.automaton_states:
        raise exceeded(
            "automaton_states",
            budgets.automaton_states,
            f"the pattern compiles to {compiled.programsize} states",
            span,
        )
    return Pattern(compiled, full, prefix)


def compile_regex(pattern: str, span: tuple[int, int], budgets: Budgets) -> Pattern:
    """Translate and compile a Lucene regex (without the slashes).

    Raises:
        QuerySyntaxError: the pattern is not valid Lucene regex syntax.
        UnsupportedRegex: it uses ``&`` or ``~``.
        QueryLimit: it is longer than the pattern budget or bigger than the automaton budget.
    """
    if len(pattern) > budgets.pattern_chars:
        raise exceeded("pattern_chars", budgets.pattern_chars, "the pattern is too long", span)
    piece = _RegexParser(pattern, span).parse()
    return _compile(piece.source, piece.prefix, span, budgets)


def compile_wildcard(
    pattern: str, span: tuple[int, int], budgets: Budgets, *, folded: bool
) -> Pattern:
    """Compile a Lucene wildcard; ``folded`` folds its literals like indexed words.

    Raises:
        QueryLimit: longer than the pattern budget or bigger than the automaton budget.
    """
    if len(pattern) > budgets.pattern_chars:
        raise exceeded("pattern_chars", budgets.pattern_chars, "the pattern is too long", span)
    parts = wildcard_parts(pattern)
    if folded:
        parts = _fold_literals(parts)
    source = []
    prefix = ""
    literal_run = True
    for part in parts:
        if part is _STAR:
            source.append(".*")
            literal_run = False
        elif part is _ONE:
            source.append(".")
            literal_run = False
        else:
            source.append(_lit(str(part)))
            if literal_run:
                prefix += str(part)
    return _compile("".join(source), prefix, span, budgets)


def prefix_successor(prefix: str) -> str | None:
    """The smallest string greater than every string starting with ``prefix``; None if none."""
    chars = list(prefix)
    while chars:
        code = ord(chars[-1]) + 1
        if SURROGATES[0] <= code <= SURROGATES[1]:
            code = SURROGATES[1] + 1
        if code <= MAX_CODEPOINT:
            chars[-1] = chr(code)
            return "".join(chars)
        chars.pop()
    return None
