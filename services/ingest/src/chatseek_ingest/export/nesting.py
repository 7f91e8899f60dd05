"""How deep arrays and objects nest, followed byte by byte outside strings.

ijson's cost per value grows with its depth, so the reader stops at ``MAX_NESTING``: before
feeding a chunk (``Nesting``) and in its second passes (``NestingLimited``).
"""

from __future__ import annotations

import re

from chatseek_ingest.export.parser import JsonFile

__all__ = ["MAX_NESTING", "Nesting", "NestingLimited"]

# Arrays and objects nest about ten levels deep in real exports; ijson's cost per value grows
# with its depth, so a file nested a million levels deep would parse for days.
MAX_NESTING = 64

# An escape inside a string: the backslash and the byte it escapes (JSON escapes are ASCII).
_ESCAPE_RE = re.compile(rb"\\.", re.DOTALL)
# What decides nesting once escapes are gone: quotes and brackets.
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_OPENERS = frozenset(b"[{")
_CLOSERS = frozenset(b"]}")
_QUOTE = ord('"')
_BACKSLASH = ord("\\")


class Nesting:
    """How deep arrays and objects nest outside strings, followed chunk by chunk.

    A chunk is reduced in passes over bytes before anything is counted: escapes dropped, then
    every byte but quotes and brackets; split at the quotes, every other piece is outside the
    strings. A backslash outside a string is not JSON, and the parser stops there, so it may
    be read as an escape here.
    """

    __slots__ = ("_carry", "_depth")

    def __init__(self) -> None:
        self._depth = 0
        # The opening of a string the previous chunk left open (with its pending escape).
        self._carry = b""

    def too_deep_at(self, chunk: bytes) -> int | None:
        """Follow ``chunk``; the offset in it of the first bracket past ``MAX_NESTING``, if any.

        After a hit the state is spent: the reader stops there.
        """
        start, carry = self._depth, self._carry
        buf = carry + chunk
        unescaped = _ESCAPE_RE.sub(b"", buf)
        # Split at quotes, the pieces alternate outside and inside strings, outside first.
        pieces = unescaped.translate(None, _NOT_STRUCTURE).split(b'"')
        brackets = b"".join(pieces[::2])
        if len(pieces) % 2:
            self._carry = b""
        else:  # an odd number of quotes: the chunk ends inside a string
            self._carry = b'"\\' if unescaped.endswith(b"\\") else b'"'
        opens = brackets.count(b"[") + brackets.count(b"{")
        if self._depth + opens <= MAX_NESTING:
            self._depth += 2 * opens - len(brackets)
            return None
        for bracket in brackets:
            self._depth += 1 if bracket in _OPENERS else -1
            if self._depth > MAX_NESTING:
                return _deep_offset(buf, start) - len(carry)
        return None


def _deep_offset(buf: bytes, depth: int) -> int:
    """Where in ``buf`` (starting at ``depth``) a bracket first nests past ``MAX_NESTING``."""
    in_string = escape = False
    for offset, byte in enumerate(buf):
        if in_string:
            if escape:
                escape = False
            elif byte == _BACKSLASH:
                escape = True
            elif byte == _QUOTE:
                in_string = False
        elif byte == _QUOTE:
            in_string = True
        elif byte in _OPENERS:
            depth += 1
            if depth > MAX_NESTING:
                return offset
        elif byte in _CLOSERS:
            depth -= 1
    return len(buf)


class NestingLimited:
    """A binary file whose reads end where arrays or objects nest past ``MAX_NESTING``."""

    __slots__ = ("_done", "_file", "_nesting")

    def __init__(self, file: JsonFile) -> None:
        self._file = file
        self._nesting = Nesting()
        self._done = False

    def read(self, size: int = -1) -> bytes:
        if self._done:
            return b""
        chunk = self._file.read(size)
        deep = self._nesting.too_deep_at(chunk)
        if deep is None:
            return chunk
        self._done = True
        return chunk[:deep]
