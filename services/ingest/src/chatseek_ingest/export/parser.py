"""ijson plumbing: the push parser the reader feeds, the event parser of its second passes.

ijson's C stages are chained directly where this ijson allows it (probed once at import),
halving parse time; otherwise the portable ``items_coro`` pipeline is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import ijson

__all__ = [
    "CHUNK_BYTES",
    "JSON_SPACE",
    "PARSE_ERRORS",
    "Event",
    "Feed",
    "JsonFile",
    "Sink",
    "parse_events",
    "pipeline",
    "skip_bom",
]

CHUNK_BYTES = 64 * 1024

_UTF8_BOM = b"\xef\xbb\xbf"
# yajl lets some invalid UTF-8 through (overlong forms, code points past U+10FFFF) and Python's
# decoder then raises UnicodeDecodeError instead of ijson's own error.
PARSE_ERRORS = (ijson.JSONError, UnicodeDecodeError)
JSON_SPACE = b" \t\r\n"

Event = tuple[str, str, str | int | float | bool | None]
"""ijson's ``(prefix, event, value)``; the value is a key, a scalar (floats, not ``Decimal``),
or None for the events that open and close containers."""


class Feed(Protocol):
    """A push parser: ``send`` it the document's bytes in pieces, then ``close`` it."""

    def send(self, data: bytes, /) -> None: ...

    def close(self) -> None: ...


class Sink(Protocol):
    """Where a push parser puts each completed value (``ijson.sendable_list``)."""

    def send(self, value: object, /) -> None: ...


class _Direct:
    """Hands a C coroutine to the previous ijson stage as its ``send`` target.

    ijson's C stages call a target that is one of their own coroutines directly, without a
    Python-level ``send`` call per event; this halves parse time.
    """

    __slots__ = ("send",)

    def __init__(self, target: object) -> None:
        self.send = target


# ijson ships no types: its backend module and coroutines stay ``Any`` here.
try:
    _C_BACKEND: Any = ijson.get_backend("yajl2_c")
except ImportError:
    _C_BACKEND = None


def _direct_pipeline(target: Sink, prefix: str, map_type: Callable[[], object] | None) -> Feed:
    items = _C_BACKEND.items_basecoro(target, prefix, map_type)
    parse = _C_BACKEND.parse_basecoro(_Direct(items))
    feed: Feed = _C_BACKEND.basic_parse_basecoro(_Direct(parse), use_float=True)
    return feed


def _direct_pipeline_works() -> bool:
    if _C_BACKEND is None:
        return False
    out = ijson.sendable_list()
    try:
        feed = _direct_pipeline(out, "", None)
        feed.send(b'{"a": [1, {"b": 2.5}]}')
        feed.close()
    # A probe of ijson internals: any failure just selects the portable pipeline.
    except Exception:
        return False
    return list(out) == [{"a": [1, {"b": 2.5}]}]


_FAST_PIPELINE = _direct_pipeline_works()


def pipeline(target: Sink, prefix: str, map_type: Callable[[], object] | None = None) -> Feed:
    """A push parser: ``send(bytes)`` then ``close()``; completed values go to ``target``."""
    if _FAST_PIPELINE:
        return _direct_pipeline(target, prefix, map_type)
    feed: Feed = ijson.items_coro(target, prefix, map_type=map_type, use_float=True)
    return feed


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class JsonFile(Protocol):
    """An export's JSON file as the passes read it: from its start, with seeks back."""

    def read(self, size: int = -1, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...

    def close(self) -> None: ...


def parse_events(f: _Readable) -> Iterator[Event]:
    """ijson's ``(prefix, event, value)`` events of ``f``, from the C backend when present."""
    if _C_BACKEND is not None:
        events: Iterator[Event] = _C_BACKEND.parse(f, use_float=True)
    else:
        events = ijson.parse(f, use_float=True)
    return events


def skip_bom(f: JsonFile) -> int:
    """Position ``f`` after a UTF-8 BOM, if any; returns the offset of the JSON text."""
    start = len(_UTF8_BOM) if f.read(len(_UTF8_BOM)) == _UTF8_BOM else 0
    f.seek(start)
    return start
