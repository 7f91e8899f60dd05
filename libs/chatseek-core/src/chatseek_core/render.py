"""The one text form of a message: the line units are made of and snippets are cut from.

Invariants:
* A message is exactly one line, ``[YYYY-MM-DD HH:MM] Sender: <marker> <media text> <text>``
  (UTC): unitize indexes and embeds units of these lines and fusion shows snippets of them, so
  a hit reads like its unit. Changing the output changes every unit's text (and forces a
  re-embedding): it needs a new ``RECIPE_VERSION`` in unitize.
* Anything with the ``RenderedMessage`` attributes renders (unitize's ``Msg``, fusion's
  ``MessageRow``); nothing here reads a database.
* ``without_repeated_dates`` may shorten lines after rendering, for a reader of one passage:
  a line whose date the line before shows keeps only its time.
* An album (one media group, ``grouped_id``, at most ``ALBUM_MAX`` items) is one line group:
  the first photo carries time and sender, each further photo is a line of its own starting
  with ``ALBUM_INDENT``.
* ``indexed_text`` is what the word indexes of units read: the lines without their stamps, the
  stamps' dates as words once.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Iterable, Sequence
from typing import Protocol

__all__ = [
    "ALBUM_INDENT",
    "ALBUM_MAX",
    "MEDIA_TEXT_MAX_CHARS",
    "UNKNOWN_SENDER",
    "RenderedMessage",
    "date_words",
    "indexed_text",
    "one_line",
    "render_line",
    "render_lines",
    "same_album",
    "without_repeated_dates",
]

MEDIA_TEXT_MAX_CHARS = 4000
UNKNOWN_SENDER = "unknown"
ALBUM_INDENT = "    "
"""What starts the line of an album's second and later photos in place of time and sender."""
ALBUM_MAX = 10
"""The most photos (videos, files) Telegram puts in one album."""
ELLIPSIS = "…"
SECONDS_PER_MINUTE = 60
MINUTES_PER_DAY = 24 * 60
_DAY_CACHE_SIZE = 4_096
# A stamp is its day's date and the minute's clock; days repeat far more than minutes, and the
# 1,440 clocks are made once: a cut renders a minute once or twice, so a cache of whole stamps
# (tried: 4,096 to 65,536 of them) mostly missed and paid ``gmtime`` and a format each time.
_CLOCKS = tuple(f"{h:02d}:{m:02d}" for h in range(24) for m in range(60))

# Marker label per media kind; kinds in _INLINE_KINDS show their media_text inside the marker,
# kinds in _FILE_KINDS show the file name there.
_MARKER_LABELS = {
    "photo": "photo",
    "video": "video",
    "voice": "voice",
    "video_note": "video message",
    "audio": "audio",
    "sticker": "sticker",
    "animation": "GIF",
    "document": "document",
    "poll": "poll",
    "contact": "contact",
    "location": "location",
    "venue": "venue",
}
_INLINE_KINDS = frozenset({"poll", "contact", "location", "venue"})
_FILE_KINDS = frozenset({"document", "audio"})


class RenderedMessage(Protocol):
    """What a message needs to render: unitize's ``Msg`` and fusion's ``MessageRow`` both fit.

    Attributes:
        date: Send time, unix seconds UTC.
        sender_name: Display name of the sender; may be empty.
        text: Message text or media caption; may be empty.
        media_kind: photo, video, voice, video_note, audio, sticker, animation, document,
            poll, contact, location, venue; None for plain text.
        file_name: Attached file's name, when there is one.
        media_text: Text read out of the media; for poll, contact, location and venue the
            question or description.
        grouped_id: The album (media group) the message belongs to, or None.
    """

    @property
    def date(self) -> int: ...
    @property
    def sender_name(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def media_kind(self) -> str | None: ...
    @property
    def file_name(self) -> str | None: ...
    @property
    def media_text(self) -> str | None: ...
    @property
    def grouped_id(self) -> int | None: ...


def same_album(a: RenderedMessage, b: RenderedMessage) -> bool:
    """Whether ``a`` and ``b`` are photos (or videos, files) of one album (media group)."""
    return a.grouped_id is not None and a.grouped_id == b.grouped_id


@functools.lru_cache(maxsize=_DAY_CACHE_SIZE)
def _day_stamp(day: int) -> str:
    t = time.gmtime(day * MINUTES_PER_DAY * SECONDS_PER_MINUTE)
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}"


def _minute_stamp(minute: int) -> str:
    """``YYYY-MM-DD HH:MM`` (UTC) of the ``minute``-th minute since the epoch."""
    day, clock = divmod(minute, MINUTES_PER_DAY)
    return f"{_day_stamp(day)} {_CLOCKS[clock]}"


def one_line(text: str) -> str:
    """``text`` with line breaks and runs of whitespace folded to one space, stripped."""
    # Most text is one line already: printable means its only whitespace is the ASCII space
    # (every other whitespace character is a control or a separator), so no double, leading
    # or trailing space leaves it as it is, without splitting it into words and joining them.
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return " ".join(text.split())


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + ELLIPSIS


def _marker(m: RenderedMessage) -> str:
    kind = m.media_kind
    if not kind:
        return ""
    label = _MARKER_LABELS.get(kind, kind.replace("_", " "))
    detail = ""
    if kind in _INLINE_KINDS and m.media_text:
        detail = _clip(one_line(m.media_text), MEDIA_TEXT_MAX_CHARS)
    elif kind in _FILE_KINDS and m.file_name:
        detail = one_line(m.file_name)
    return f"[{label}: {detail}]" if detail else f"[{label}]"


def render_line(m: RenderedMessage, *, continues_album: bool = False) -> str:
    """One message as one line: ``[YYYY-MM-DD HH:MM] Sender: <marker> <media text> <text>``.

    The time is UTC. Media shows as a visible marker (``[photo]``, ``[voice]``,
    ``[document: name.pdf]``, ``[poll: question]``); text read out of the media follows its
    marker (inside it for poll, contact, location and venue), clipped at
    ``MEDIA_TEXT_MAX_CHARS``; the message text or caption comes last. Line breaks and runs of
    whitespace fold to one space so a message is always exactly one line. An empty sender
    name renders as ``UNKNOWN_SENDER``. ``continues_album`` renders the line of an album's
    second or later photo: ``ALBUM_INDENT`` and the body, without time and sender (the
    album's first line carries them).
    """
    parts = []
    marker = _marker(m)
    if marker:
        parts.append(marker)
        if m.media_text and m.media_kind not in _INLINE_KINDS:
            parts.append(_clip(one_line(m.media_text), MEDIA_TEXT_MAX_CHARS))
    elif m.media_text:
        parts.append(_clip(one_line(m.media_text), MEDIA_TEXT_MAX_CHARS))
    if m.text:
        parts.append(one_line(m.text))
    body = " ".join(p for p in parts if p)
    if continues_album:
        return ALBUM_INDENT + body
    name = one_line(m.sender_name) or UNKNOWN_SENDER
    stamp = _minute_stamp(m.date // SECONDS_PER_MINUTE)
    return f"[{stamp}] {name}: {body}" if body else f"[{stamp}] {name}:"


def render_lines(seq: Sequence[RenderedMessage]) -> list[str]:
    """The lines of ``seq`` in order, one per message, an album's photos as one line group.

    A message right after another photo of its album renders with ``continues_album`` (no
    time or sender of its own); every other message renders as ``render_line`` does.
    """
    return [
        render_line(m, continues_album=i > 0 and same_album(seq[i - 1], m))
        for i, m in enumerate(seq)
    ]


_STAMP = re.compile(r"^\[(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2})\]")


def without_repeated_dates(lines: Sequence[str]) -> list[str]:
    """Rendered message lines with the date left out of a line whose date the line before
    already showed (``[2024-05-01 10:02] Ann: …`` then ``[10:05] Bob: …``)."""
    out: list[str] = []
    shown: str | None = None
    for line in lines:
        match = _STAMP.match(line)
        if match is not None:
            if match.group(1) == shown:
                line = f"[{match.group(2)}]{line[match.end() :]}"
            shown = match.group(1)
        out.append(line)
    return out


_MONTHS = (
    ("january", "январь"),
    ("february", "февраль"),
    ("march", "март"),
    ("april", "апрель"),
    ("may", "май"),
    ("june", "июнь"),
    ("july", "июль"),
    ("august", "август"),
    ("september", "сентябрь"),
    ("october", "октябрь"),
    ("november", "ноябрь"),
    ("december", "декабрь"),
)


def date_words(text: str) -> str:
    """The dates of the time stamps of rendered ``text`` as a question words them: each year,
    the English and Russian name of each month, and each day of the month without its leading
    zero, once each, in order of first appearance. A stamp says ``2023-10-03``; a question says
    "October 3, 2023"."""
    return _worded(_unstamped(text)[1])


def indexed_text(text: str) -> str:
    """Rendered ``text`` as the word indexes of units read it: each line without its time stamp,
    then the stamps' dates as words (``date_words``) on a line of their own.

    A stamp's digits in every line made a fifth of a unit's tokens, and matched any number a
    question holds ("10" of every line sent at 10 o'clock or on the 10th); its date, worded once,
    still answers "what did we say on October 3".
    """
    lines, dates = _unstamped(text)
    lines.append(_worded(dates))
    return "\n".join(lines)


def _unstamped(text: str) -> tuple[list[str], list[str]]:
    """The lines of ``text`` with the stamp (``[YYYY-MM-DD HH:MM] ``) that starts a line cut
    off, and the distinct dates of those stamps in order. A stamp elsewhere in a line (quoted
    in a message) stays."""
    lines = text.split("\n")
    dates: dict[str, None] = {}
    match = _STAMP.match
    for k, line in enumerate(lines):
        if line[:1] == "[" and (stamp := match(line)) is not None:
            end = stamp.end()
            if line[end : end + 1] == " ":
                dates[stamp.group(1)] = None
                lines[k] = line[end + 1 :]
    return lines, list(dates)


def _worded(dates: Iterable[str]) -> str:
    years: dict[str, None] = {}
    months: dict[int, None] = {}
    days: dict[str, None] = {}
    for date in dates:
        years[date[:4]] = None
        if 1 <= (m := int(date[5:7])) <= 12:
            months[m] = None
        if 1 <= (d := int(date[8:10])) <= 31:
            days[str(d)] = None
    return " ".join([*years, *(name for m in months for name in _MONTHS[m - 1]), *days])
