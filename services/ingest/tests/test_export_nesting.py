"""The export reader's nesting guard, chunk by chunk, against a byte-by-byte reading.

Documents are built from JSON's pieces (strings holding brackets, quotes and escapes, runs of
brackets, separators) and cut into chunks anywhere, inside a string or an escape too. The guard
must name the same first bracket past ``MAX_NESTING`` as a reader that follows every byte, and
carry the same depth from chunk to chunk.
"""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from chatseek_ingest.export.nesting import MAX_NESTING, Nesting, NestingLimited

_INSIDE = st.sampled_from(
    ["a", "[", "]", "{", "}", '\\"', "\\\\", "\\n", "\\u005b", "\\/", "й", " ", "'"]
)
_STRING = st.lists(_INSIDE, max_size=8).map(lambda parts: '"' + "".join(parts) + '"')
_RUN = st.integers(1, MAX_NESTING + 8).flatmap(
    lambda n: st.sampled_from(["[" * n, "{" * n, "]" * n, "}" * n])
)
_TOKEN = st.one_of(_STRING, _RUN, st.sampled_from(["[", "]", "{", "}", ",", ":", "1", " ", "\n"]))
_DOCUMENT = st.lists(_TOKEN, max_size=60).map(lambda tokens: "".join(tokens).encode())


def _byte_by_byte(data: bytes) -> tuple[int | None, int]:
    """The offset of the first bracket past ``MAX_NESTING`` (or None) and the depth at the end."""
    depth, in_string, escape = 0, False, False
    for offset, byte in enumerate(data):
        if in_string:
            if escape:
                escape = False
            elif byte == ord("\\"):
                escape = True
            elif byte == ord('"'):
                in_string = False
        elif byte == ord('"'):
            in_string = True
        elif byte in b"[{":
            depth += 1
            if depth > MAX_NESTING:
                return offset, depth
        elif byte in b"]}":
            depth -= 1
    return None, depth


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False) if b > a]


def _first_hit(chunks: list[bytes]) -> int | None:
    nesting = Nesting()
    done = 0
    for chunk in chunks:
        at = nesting.too_deep_at(chunk)
        if at is not None:
            return done + at
        done += len(chunk)
    return None


@settings(max_examples=400, deadline=None)
@given(_DOCUMENT, st.lists(st.integers(0, 10_000), max_size=12))
def test_the_guard_names_the_bracket_a_byte_by_byte_reading_names(
    data: bytes, cuts: list[int]
) -> None:
    expected, depth = _byte_by_byte(data)
    chunks = _chunks(data, cuts)
    assert _first_hit(chunks) == expected
    if expected is None:
        # The state carried to the next chunk: just enough openers to go one level too deep hit
        # where the byte-by-byte reading does (nowhere, when the document ends inside a string).
        tail = b"[" * (MAX_NESTING + 1 - depth)
        assert _first_hit([*chunks, tail]) == _byte_by_byte(data + tail)[0]


def test_a_string_left_open_across_chunks_hides_its_brackets() -> None:
    data = b'["' + b"[" * (MAX_NESTING + 5) + b'\\"' + b"{" * 10 + b'"]'
    for cut in range(1, len(data)):
        assert _first_hit([data[:cut], data[cut:]]) is None


def test_an_escape_cut_in_half_still_escapes() -> None:
    deep = b"[" * (MAX_NESTING + 1)
    data = b'["\\\\' + b'"' + deep  # an escaped backslash, then the string closes
    for cut in range(1, len(data)):
        assert _first_hit([data[:cut], data[cut:]]) == _byte_by_byte(data)[0]
    escaped = b'["\\"' + deep + b'"'  # an escaped quote: the brackets are inside the string
    for cut in range(1, len(escaped)):
        assert _first_hit([escaped[:cut], escaped[cut:]]) is None


def test_reads_through_the_limited_file_end_where_nesting_goes_too_deep() -> None:
    data = b'{"a": "[[[", "b": ' + b"[" * (MAX_NESTING + 3) + b"1" + b"]" * (MAX_NESTING + 3) + b"}"
    limited = NestingLimited(io.BytesIO(data))
    read = b""
    while chunk := limited.read(7):
        read += chunk
    assert read == data[: _byte_by_byte(data)[0]]
