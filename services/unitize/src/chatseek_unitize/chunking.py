"""Cutting one reconstructed conversation into chunks of about ``target_chars``.

Invariants:
* Chunks break only at message boundaries and hold one ``render_line`` line per message
  (sender names included; an album's later photos as its indented continuation lines), in
  ``chrono_key`` order; together they cover every unit member of the conversation exactly
  once.
* A chunk closes before the line that would take it past ``target_chars``, never inside an
  album; a single longer message is a chunk of its own. A short tail (under
  ``TAIL_MIN_FRACTION`` of the target) joins the chunk before it when the two stay within
  ``TAIL_MERGE_MAX_FRACTION`` of the target.
* A conversation without any words (media only, no caption or extracted text) has no chunks.
* ``content_hash`` is computed as for units, so equal text is embedded once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from chatseek_core.errors import InvalidValue
from chatseek_unitize.cutting import chrono_key, is_unit_member, render_line, same_album
from chatseek_unitize.model import RECIPE_VERSION, Msg, content_hash

__all__ = [
    "DEFAULT_TARGET_CHARS",
    "TAIL_MERGE_MAX_FRACTION",
    "TAIL_MIN_FRACTION",
    "Chunk",
    "chunk_conversation",
]

DEFAULT_TARGET_CHARS = 1200
TAIL_MIN_FRACTION = 0.25
TAIL_MERGE_MAX_FRACTION = 1.25


@dataclass(frozen=True, slots=True)
class Chunk:
    """A run of consecutive conversation messages rendered as text.

    Attributes:
        first_msg_id: The first message of the chunk.
        last_msg_id: The last message of the chunk.
        msg_ids: Every message of the chunk, in text order.
        text: One rendered line per message, joined by newlines.
        content_hash: ``content_hash(RECIPE_VERSION, text)``.
    """

    first_msg_id: int
    last_msg_id: int
    msg_ids: tuple[int, ...]
    text: str
    content_hash: str


def _has_words(m: Msg) -> bool:
    return bool(m.text.strip() or (m.media_text or "").strip())


def _make(run: list[tuple[Msg, str]]) -> Chunk:
    text = "\n".join(line for _, line in run)
    ids = tuple(m.msg_id for m, _ in run)
    return Chunk(ids[0], ids[-1], ids, text, content_hash(RECIPE_VERSION, text))


def _width(run: list[tuple[Msg, str]]) -> int:
    return sum(len(line) for _, line in run) + len(run) - 1


def chunk_conversation(
    msgs: Iterable[Msg], target_chars: int = DEFAULT_TARGET_CHARS
) -> list[Chunk]:
    """Cut a conversation's messages into chunks of about ``target_chars`` characters.

    Args:
        msgs: The conversation's messages (any order; service and empty ones are skipped).
        target_chars: The size a chunk closes at (see the module invariants).

    Returns:
        Chunks in conversation order; empty when no message has any words.

    Raises:
        InvalidValue: ``target_chars`` below 1.
    """
    if target_chars < 1:
        raise InvalidValue("target_chars must be at least 1.")
    members = sorted((m for m in msgs if is_unit_member(m)), key=chrono_key)
    if not any(_has_words(m) for m in members):
        return []
    runs: list[list[tuple[Msg, str]]] = []
    current: list[tuple[Msg, str]] = []
    chars = 0
    for m in members:
        joins_album = bool(current) and same_album(current[-1][0], m)
        line = render_line(m, continues_album=joins_album)
        if current and not joins_album and chars + 1 + len(line) > target_chars:
            runs.append(current)
            current, chars = [], 0
        chars = len(line) if not current else chars + 1 + len(line)
        current.append((m, line))
    runs.append(current)
    if len(runs) > 1:
        tail, before = runs[-1], runs[-2]
        small = _width(tail) < target_chars * TAIL_MIN_FRACTION
        if small and _width(before) + 1 + _width(tail) <= target_chars * TAIL_MERGE_MAX_FRACTION:
            runs[-2:] = [before + tail]
    return [_make(run) for run in runs]
