"""Streaming reader of Telegram Desktop JSON exports (single chat or whole account).

Owns turning ``result.json`` / ``messages.json`` into ``ExportChat`` / ``ExportMessage`` /
``ExportWarning`` records in file order, in bounded memory: ijson's C parser builds the document
in 64 KiB steps and every complete message is handed out and dropped from the partial tree.
Invariants: a chat header precedes its messages; a media path never escapes the export folder;
a file cut mid-write yields its complete prefix then one ``truncated`` warning; anything else
malformed raises ``MalformedExport`` naming the file, the JSON path and the byte range (a JSON
syntax error after the complete messages before it). A bad message whose id is known is skipped
with a warning; a message without an integer id, a non-object message, a broken chat header, a
non-array ``messages``/``list`` or values nested past ``MAX_NESTING`` abort. Chat keys may come
in any order: messages wait (at most ``max_pending``) for the header, then a second streaming
pass over the file looks the header up.
"""

from __future__ import annotations

import calendar
import hashlib
import itertools
import logging
import os
import posixpath
import re
import unicodedata
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, BinaryIO, Protocol

import ijson

from chatseek_core.errors import InvalidArgument, MalformedExport, NotFound, StorageError
from chatseek_ingest.model import ExportChat, ExportMedia, ExportMessage, ExportWarning

__all__ = [
    "CHUNK_BYTES",
    "EXPORT_FILE_NAMES",
    "MAX_PENDING_MESSAGES",
    "ExportRecord",
    "ExportSource",
    "export_slug",
    "iter_export",
    "open_export",
    "resolve_media",
]

log = logging.getLogger(__name__)

CHUNK_BYTES = 64 * 1024
MAX_PENDING_MESSAGES = 10_000
MAX_UNDECIDED_BYTES = 1024 * 1024
MAX_PRUNE_DEPTH = 4
# Arrays and objects nest about ten levels deep in real exports; ijson's cost per value grows
# with its depth, so a file nested a million levels deep would parse for days.
MAX_NESTING = 64
# Ids and unix times written as strings: enough digits for any of them, few enough that the
# marked id of a channel still fits SQLite's 64-bit integers.
MAX_DIGITS = 18
# 9999-12-31T23:59:59Z, the last second a date can be shown; earlier than 1970 is no message.
MAX_UNIXTIME = 253_402_300_799
MAX_QUOTED_CHARS = 64
MAX_SLUG_CHARS = 48
SLUG_HASH_CHARS = 8
SUPERGROUP_ID_OFFSET = 1_000_000_000_000
GENERAL_TOPIC_ID = 1
EXPORT_FILE_NAMES = ("result.json", "messages.json")

ExportRecord = ExportChat | ExportMessage | ExportWarning

_UTF8_BOM = b"\xef\xbb\xbf"
# yajl lets some invalid UTF-8 through (overlong forms, code points past U+10FFFF) and Python's
# decoder then raises UnicodeDecodeError instead of ijson's own error.
_PARSE_ERRORS = (ijson.JSONError, UnicodeDecodeError)
_JSON_SPACE = b" \t\r\n"

# A complete JSON string; possessive, so a scan never backtracks into one.
_STRING_RE = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
# Text outside strings and whole strings, anchored at the start: it stops at a string left open
# and never starts a match at a quote inside a string, so it runs in linear time.
_STRUCTURE_RE = re.compile(rb'(?:[^"]++|"(?:[^"\\]++|\\.)*+")*+', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_OPENERS = frozenset(b"[{")
_CLOSERS = frozenset(b"]}")
_QUOTE = ord('"')
_BACKSLASH = ord("\\")

_CHAT_TYPES = {
    "personal_chat": "private",
    "bot_chat": "bot",
    "replies": "bot",
    "verification_codes": "bot",
    "saved_messages": "saved",
    "private_group": "group",
    "private_supergroup": "supergroup",
    "public_supergroup": "supergroup",
    "private_channel": "channel",
    "public_channel": "channel",
}
_NAMELESS_TITLES = {"saved_messages": "Saved Messages", "replies": "Replies"}
_CHAT_KEYS = frozenset({"name", "type", "id", "messages"})
_ACCOUNT_KEYS = frozenset(
    {
        "about",
        "personal_information",
        "profile_pictures",
        "stories",
        "profile_music",
        "contacts",
        "frequent_contacts",
        "sessions",
        "web_sessions",
        "other_data",
        "chats",
        "left_chats",
    }
)
_CHAT_SECTIONS = ("chats", "left_chats")
_FORUM_ACTIONS = frozenset({"topic_created", "topic_edit"})

_MEDIA_TYPE_KINDS = {
    "sticker": "sticker",
    "video_message": "video_note",
    "voice_message": "voice",
    "animation": "animation",
    "video_file": "video",
    "audio_file": "audio",
}
_MEDIA_KEYS = frozenset(
    {
        "photo",
        "file",
        "media_type",
        "poll",
        "contact_information",
        "location_information",
        "place_name",
        "todo_list",
        "game_title",
        "invoice_information",
    }
)
_PLAIN_KEYS = frozenset(
    {
        "id",
        "type",
        "date",
        "date_unixtime",
        "edited",
        "edited_unixtime",
        "from",
        "from_id",
        "text",
        "text_entities",
        "reply_to_message_id",
    }
)
_SERVICE_COMMON = frozenset(
    {
        "id",
        "type",
        "date",
        "date_unixtime",
        "edited",
        "edited_unixtime",
        "actor",
        "actor_id",
        "from",
        "from_id",
        "action",
        "text",
        "text_entities",
        "photo",
        "photo_file_size",
        "width",
        "height",
        "reply_to_message_id",
        "reply_to_peer_id",
    }
)
# A scheme URL, a www. host or a t.me link; only run when a cheap substring test hits.
_URL_RE = re.compile(r"\b[a-z][a-z0-9+.-]*://\S|\bwww\.\w|\bt\.me/\w", re.IGNORECASE)
_SLUG_JUNK_RE = re.compile(r"[^a-z0-9]+")
_CYRILLIC_LATIN = {
    "а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "е": "e", "ё": "e", "ж": "zh",
    "з": "z", "и": "i", "й": "y", "к": "k", "л": "l", "м": "m", "н": "n", "о": "o",
    "п": "p", "р": "r", "с": "s", "т": "t", "у": "u", "ф": "f", "х": "kh", "ц": "ts",
    "ч": "ch", "ш": "sh", "щ": "shch", "ъ": "", "ы": "y", "ь": "", "э": "e", "ю": "yu",
    "я": "ya", "і": "i", "ї": "yi", "є": "ye", "ґ": "g", "ў": "u",
}  # fmt: skip
_TRANSLIT = str.maketrans(_CYRILLIC_LATIN)


# --- public API ---


@dataclass(frozen=True, slots=True)
class ExportSource:
    """An export located on disk.

    Attributes:
        json_path: the JSON file to stream.
        root: the export folder; media paths are relative to it and must stay inside it.
        size: the JSON file's size in bytes when opened.
        label: how warnings and errors name the file (the user's own path when the service
            reads an uploaded copy); ``json_path`` when empty.
    """

    json_path: Path
    root: Path
    size: int
    label: str = ""


def open_export(path: Path) -> ExportSource:
    """Locate the JSON file of a Telegram Desktop export.

    Args:
        path: an export folder holding ``result.json`` (preferred) or ``messages.json``, or the
            JSON file itself (its folder is then the export root).

    Returns:
        The source to pass to ``iter_export``; nothing is parsed yet.

    Raises:
        NotFound: ``path`` does not exist.
        MalformedExport: a folder without either JSON file.
    """
    p = Path(path).expanduser().resolve()
    if p.is_dir():
        for name in EXPORT_FILE_NAMES:
            candidate = p / name
            if candidate.is_file():
                return ExportSource(json_path=candidate, root=p, size=candidate.stat().st_size)
        raise MalformedExport(
            f"{p}: no {' or '.join(EXPORT_FILE_NAMES)} in this folder",
            hint="Point at the folder Telegram Desktop wrote (Export chat history, JSON format).",
            metadata={"file": str(p), "expected": "|".join(EXPORT_FILE_NAMES)},
        )
    if p.is_file():
        return ExportSource(json_path=p, root=p.parent, size=p.stat().st_size)
    raise NotFound(f"{p}: no such file or folder", metadata={"file": str(p)})


def iter_export(
    source: ExportSource, *, max_pending: int = MAX_PENDING_MESSAGES
) -> Iterator[ExportRecord]:
    """Stream the records of an export in file order.

    Each chat yields its ``ExportChat`` first, then its messages (and warnings about them) in
    file order, then the next chat follows. A supergroup whose history shows a forum topic
    action is yielded again with ``type="forum"`` just before that message.

    Args:
        source: from ``open_export``.
        max_pending: messages held while a chat's header has not been read yet (keys after
            ``messages``); past it the header is looked up by a second streaming pass.

    Raises:
        InvalidArgument: ``max_pending`` below 1.
        NotFound: the JSON file vanished; StorageError: it cannot be read.
        MalformedExport: not JSON, invalid UTF-8, a top level of neither export shape, a
            message without an integer id or not an object, a chat without an integer id and
            a type, a ``chats``/``list``/``messages`` of the wrong JSON type. Raised lazily, at
            the point of the stream where the problem is met.
    """
    if max_pending < 1:
        raise InvalidArgument("max_pending must be at least 1", metadata={"max_pending": "1"})
    return _Reader(source, max_pending).run()


def resolve_media(root: Path, rel: str) -> Path | None:
    """The absolute path of a media file named inside an export, or ``None`` when unsafe.

    Args:
        root: the export folder.
        rel: the path as the export wrote it.

    Returns:
        The resolved path (symlinks followed) when it stays inside ``root``; ``None`` for an
        absolute path, a ``..`` component, a NUL, or a path resolving outside ``root``.
        Whether the file exists is not checked.
    """
    root_real = os.path.realpath(root)
    if _path_problem(root_real, rel) is not None:
        return None
    return Path(os.path.realpath(os.path.join(root_real, rel)))


def export_slug(path: Path, chat_title: str | None = None) -> str:
    """A stable tag suffix for ``import:<slug>``: lower-case ``a-z``, ``0-9`` and ``-``.

    Args:
        path: the export folder or JSON file; its folder name is the slug's source.
        chat_title: when given, the slug is made from it instead.

    Returns:
        At most ``MAX_SLUG_CHARS`` characters; Cyrillic is transliterated, accents dropped;
        text with no Latin or Cyrillic letters or digits gives ``export-<hash>``.
    """
    if chat_title and chat_title.strip():
        base = chat_title
    else:
        p = Path(path).expanduser().resolve()
        if p.name in EXPORT_FILE_NAMES:
            base = p.parent.name
        elif p.suffix.lower() == ".json":
            base = p.stem
        else:
            base = p.name
    folded = base.lower().translate(_TRANSLIT)
    ascii_only = "".join(
        ch for ch in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(ch)
    )
    slug = _SLUG_JUNK_RE.sub("-", ascii_only).strip("-")[:MAX_SLUG_CHARS].strip("-")
    if slug:
        return slug
    digest = hashlib.sha1(base.encode("utf-8")).hexdigest()[:SLUG_HASH_CHARS]
    return f"export-{digest}"


# --- parser plumbing ---


class _Direct:
    """Hands a C coroutine to the previous ijson stage as its ``send`` target.

    ijson's C stages call a target that is one of their own coroutines directly, without a
    Python-level ``send`` call per event; this halves parse time.
    """

    __slots__ = ("send",)

    def __init__(self, target: Any) -> None:
        self.send = target


try:
    _C_BACKEND: Any = ijson.get_backend("yajl2_c")
except ImportError:
    _C_BACKEND = None


def _direct_pipeline(target: Any, prefix: str, map_type: Callable[[], Any] | None) -> Any:
    items = _C_BACKEND.items_basecoro(target, prefix, map_type)
    parse = _C_BACKEND.parse_basecoro(_Direct(items))
    return _C_BACKEND.basic_parse_basecoro(_Direct(parse), use_float=True)


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


def _pipeline(target: Any, prefix: str, map_type: Callable[[], Any] | None = None) -> Any:
    """A push parser: ``send(bytes)`` then ``close()``; completed values go to ``target``."""
    if _FAST_PIPELINE:
        return _direct_pipeline(target, prefix, map_type)
    return ijson.items_coro(target, prefix, map_type=map_type, use_float=True)


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def _parse_events(f: _Readable) -> Iterator[tuple[str, str, Any]]:
    if _C_BACKEND is not None:
        events: Iterator[tuple[str, str, Any]] = _C_BACKEND.parse(f, use_float=True)
    else:
        events = ijson.parse(f, use_float=True)
    return events


def _skip_bom(f: BinaryIO) -> int:
    """Position ``f`` after a UTF-8 BOM, if any; returns the offset of the JSON text."""
    start = len(_UTF8_BOM) if f.read(len(_UTF8_BOM)) == _UTF8_BOM else 0
    f.seek(start)
    return start


# --- field readers (raise _BadField; the message is then skipped) ---


class _BadField(Exception):
    """A message field of the wrong shape; the message is skipped with a warning."""


class _TopicIndex:
    """msg id -> forum topic id, compact: two int64 arrays while ids ascend, a dict otherwise."""

    __slots__ = ("_ids", "_topics", "_other")

    def __init__(self) -> None:
        self._ids = array("q")
        self._topics = array("q")
        self._other: dict[int, int] = {}

    def add(self, msg_id: int, topic: int) -> None:
        if not self._ids or msg_id > self._ids[-1]:
            self._ids.append(msg_id)
            self._topics.append(topic)
        else:
            self._other[msg_id] = topic

    def get(self, msg_id: int) -> int | None:
        i = bisect_left(self._ids, msg_id)
        if i < len(self._ids) and self._ids[i] == msg_id:
            return int(self._topics[i])
        return self._other.get(msg_id)


def _digits(text: str) -> int | None:
    """The value of ``text`` when it is at most ``MAX_DIGITS`` ASCII digits, else ``None``."""
    if len(text) <= MAX_DIGITS and text.isascii() and text.isdigit():
        return int(text)
    return None


def _in_range(unixtime: int, name: str) -> int:
    if not 0 <= unixtime <= MAX_UNIXTIME:
        raise _BadField(f"'{name}' is out of range")
    return unixtime


def _unix(unixtime: Any, iso: Any, name: str) -> int | None:
    if unixtime is not None:
        value = _digits(unixtime) if type(unixtime) is str else unixtime
        if type(value) is not int:
            raise _BadField(f"'{name}_unixtime' is not a number")
        return _in_range(value, f"{name}_unixtime")
    if iso is None:
        return None
    if type(iso) is not str:
        raise _BadField(f"'{name}' is not a date string")
    try:
        stamp = datetime.fromisoformat(iso)
    except ValueError:
        raise _BadField(f"'{name}' is not an ISO date") from None
    if stamp.tzinfo is None:
        return _in_range(calendar.timegm(stamp.timetuple()), name)
    return _in_range(int(stamp.timestamp()), name)


def _peer(value: Any, name: str) -> tuple[str | None, int | None]:
    """``user123`` / ``channel123`` / ``chat123`` / a bare number -> (kind, bare id)."""
    if value is None:
        return None, None
    if type(value) is int:
        return "user", value
    if type(value) is str:
        if value.startswith("user"):
            kind, digits = "user", value[4:]
        elif value.startswith("channel"):
            kind, digits = "channel", value[7:]
        elif value.startswith("chat"):
            kind, digits = "chat", value[4:]
        else:
            kind, digits = "user", value
        bare = _digits(digits)
        if bare is not None:
            return kind, bare
    raise _BadField(f"'{name}' is not a peer id")


def _marked(kind: str | None, bare: int | None) -> int | None:
    if bare is None:
        return None
    if kind == "channel":
        return -(SUPERGROUP_ID_OFFSET + bare)
    if kind == "chat":
        return -bare
    return bare


def _opt_str(value: Any, name: str) -> str | None:
    if value is None or type(value) is str:
        return value
    raise _BadField(f"'{name}' is not a string")


def _opt_int(value: Any, name: str) -> int | None:
    if value is None or type(value) is int:
        return value
    raise _BadField(f"'{name}' is not an integer")


def _text(entities: Any, text: Any) -> tuple[str, list[dict[str, Any]], bool]:
    """Plain text, entities and whether a link entity is present, from runs or a string."""
    if type(text) is str and (
        type(entities) is not list
        or not entities
        or (len(entities) == 1 and type(entities[0]) is dict and entities[0].get("type") == "plain")
    ):
        return text, [], False
    runs = entities if type(entities) is list and entities else text
    if type(runs) is str:
        return runs, [], False
    if runs is None or (type(runs) is list and not runs):
        return "", [], False
    if type(runs) is not list:
        raise _BadField("'text' is neither a string nor a list of runs")
    parts: list[str] = []
    out: list[dict[str, Any]] = []
    link = False
    for run in runs:
        if type(run) is str:
            parts.append(run)
            continue
        if type(run) is not dict:
            raise _BadField("a text run is neither a string nor an object")
        piece = run.get("text", "")
        kind = run.get("type", "plain")
        if type(piece) is not str or type(kind) is not str:
            raise _BadField("a text run has a non-string 'type' or 'text'")
        parts.append(piece)
        if kind == "plain":
            continue
        entity: dict[str, Any] = {"type": kind, "text": piece}
        if kind == "link":
            entity["href"] = piece
            link = True
        elif kind == "text_link":
            href = run.get("href")
            if type(href) is str:
                entity["href"] = href
            link = True
        elif kind == "mention_name":
            user_id = run.get("user_id")
            if type(user_id) is int:
                entity["user_id"] = user_id
            elif type(user_id) is str and _digits(user_id) is not None:
                entity["user_id"] = int(user_id)
        elif kind == "custom_emoji":
            document_id = run.get("document_id")
            if document_id is not None:
                entity["document_id"] = str(document_id)
        elif kind == "pre":
            language = run.get("language")
            if type(language) is str and language:
                entity["language"] = language
        out.append(entity)
    return "".join(parts), out, link


def _reactions(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    if type(value) is not list:
        raise _BadField("'reactions' is not a list")
    out: dict[str, int] = {}
    for reaction in value:
        if type(reaction) is not dict:
            raise _BadField("a reaction is not an object")
        count = reaction.get("count")
        kind = reaction.get("type")
        if type(count) is not int or type(kind) is not str:
            raise _BadField("a reaction lacks an integer 'count' or a 'type'")
        if kind == "emoji":
            key = reaction.get("emoji")
            if type(key) is not str:
                raise _BadField("an emoji reaction lacks its 'emoji'")
        elif kind == "custom_emoji":
            key = f"custom:{reaction.get('document_id')}"
        else:
            key = kind
        out[key] = out.get(key, 0) + count
    return out


def _buttons(value: Any) -> tuple[list[list[dict[str, Any]]], bool]:
    if value is None:
        return [], False
    if type(value) is not list:
        raise _BadField("'inline_bot_buttons' is not a list of rows")
    rows: list[list[dict[str, Any]]] = []
    url = False
    for row in value:
        if type(row) is not list:
            raise _BadField("an inline button row is not a list")
        out: list[dict[str, Any]] = []
        for button in row:
            if type(button) is not dict:
                raise _BadField("an inline button is not an object")
            kind = button.get("type", "")
            label = button.get("text", "")
            if type(kind) is not str or type(label) is not str:
                raise _BadField("an inline button has a non-string 'type' or 'text'")
            entry: dict[str, Any] = {"type": kind, "text": label}
            data = button.get("data")
            if data is not None:
                entry["data"] = data
                url = url or (kind == "url" and type(data) is str)
            if "button_id" in button:
                entry["button_id"] = button["button_id"]
            out.append(entry)
        rows.append(out)
    return rows, url


def _placeholder(value: str) -> str | None:
    """Why a file is absent when ``value`` is Telegram's "(File ...)" text, else ``None``."""
    if not value.endswith(")"):
        return None
    at = value.find("(File ")
    if at == -1:
        at = value.find("(Photo ")
    if at == -1 or (at > 0 and value[at - 1] != " "):
        return None
    if "not included" in value:
        return "not_included"
    if "exceeds maximum size" in value:
        return "too_large"
    return "unavailable"


def _path_problem(root_real: str, rel: str) -> str | None:
    """Why ``rel`` may not be opened under ``root_real``, or ``None`` when it is safe."""
    if not rel:
        return "the path is empty"
    if "\x00" in rel:
        return "the path contains a NUL byte"
    windows = PureWindowsPath(rel)
    if PurePosixPath(rel).is_absolute() or windows.drive or windows.root:
        return "the path is absolute"
    if ".." in rel.replace("\\", "/").split("/"):
        return "the path climbs out with '..'"
    real = os.path.realpath(os.path.join(root_real, rel))
    if real != root_real and not real.startswith(root_real + os.sep):
        return "the path resolves outside the export folder"
    return None


def _geo(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if type(value) is not dict:
        raise _BadField("'location_information' is not an object")
    lat, lon = value.get("latitude"), value.get("longitude")
    if not isinstance(lat, int | float) or not isinstance(lon, int | float):
        raise _BadField("'location_information' lacks numeric coordinates")
    return {"latitude": float(lat), "longitude": float(lon)}


def _runs_text(value: Any, name: str) -> str:
    """A string that newer exports may write as a list of text runs (poll questions)."""
    if value is None:
        return ""
    return _text(None, value)[0] if type(value) is list else _need_str(value, name)


def _clipped(value: str | None) -> str | None:
    """``value`` short enough to quote in a warning (a hostile file may hold megabytes)."""
    if value is None or len(value) <= MAX_QUOTED_CHARS:
        return value
    return value[:MAX_QUOTED_CHARS] + "…"


def _need_str(value: Any, name: str) -> str:
    if type(value) is not str:
        raise _BadField(f"'{name}' is not a string")
    return value


# --- the reader ---


class _Nesting:
    """How deep arrays and objects nest outside strings, followed chunk by chunk."""

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
        match = _STRUCTURE_RE.match(buf)
        end = match.end() if match else 0
        if end < len(buf):
            escapes = len(buf) - len(buf.rstrip(b"\\"))
            self._carry = b'"\\' if escapes % 2 else b'"'
        else:
            self._carry = b""
        brackets = _STRING_RE.sub(b"", buf[:end]).translate(None, _NOT_BRACKETS)
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


class _NestingLimited:
    """A binary file whose reads end where arrays or objects nest past ``MAX_NESTING``."""

    __slots__ = ("_done", "_file", "_nesting")

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._nesting = _Nesting()
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


class _Chat:
    """State of the chat object being streamed."""

    __slots__ = (
        "section",
        "index",
        "obj",
        "location",
        "header",
        "chat_id",
        "skip",
        "orphan",
        "consumed",
        "forum",
        "roots",
        "topics",
    )

    def __init__(self, section: str, index: int, obj: dict[str, Any]) -> None:
        self.section = section
        self.index = index
        self.obj = obj
        self.location = f"{section}.list[{index}]" if section else ""
        self.header: ExportChat | None = None
        self.chat_id: int | None = None
        self.skip = False
        self.orphan = False
        self.consumed = 0
        self.forum = False
        self.roots: set[int] = set()
        self.topics = _TopicIndex()

    def message_location(self, index: int) -> str:
        return f"{self.location}.messages[{index}]" if self.location else f"messages[{index}]"


class _Reader:
    """One streaming pass over an export; ``run()`` is the record generator."""

    def __init__(self, source: ExportSource, max_pending: int) -> None:
        self._src = source
        self._label = source.label or str(source.json_path)
        self._max_pending = max_pending
        self._root: dict[str, Any] = {}
        self._done = ijson.sendable_list()
        make_map = itertools.chain([self._root], iter(dict, None)).__next__
        # The first map the builder creates is the document root, so the partial tree stays
        # reachable from here while the C parser fills it in.
        self._feed = _pipeline(self._done, "", make_map)
        self._fed = 0
        self._chunk = (0, 0)
        self._nesting = _Nesting()
        self._shape: str | None = None
        self._chat: _Chat | None = None
        self._next_index: dict[str, int] = {}
        self._section_consumed: dict[str, int] = {}
        self._root_real = os.path.realpath(source.root)
        self._chats = 0
        self._messages = 0
        self._warnings = 0

    # --- driving ---

    def run(self) -> Iterator[ExportRecord]:
        try:
            f = open(self._src.json_path, "rb")
        except FileNotFoundError:
            raise NotFound(f"{self._label}: no such file", metadata={"file": self._label}) from None
        except OSError as exc:
            raise StorageError(
                f"{self._label}: cannot open ({exc.strerror})", metadata={"file": self._label}
            ) from None
        truncated_at: int | None = None
        with f:
            self._fed = self._check_start(f)
            while True:
                chunk = f.read(CHUNK_BYTES)
                if not chunk:
                    break
                nul = chunk.find(b"\x00")
                if nul != -1:
                    # JSON never holds a raw NUL: a crash mid-write left zero-filled blocks.
                    chunk = chunk[:nul]
                    truncated_at = self._fed + nul
                if chunk:
                    deep = self._nesting.too_deep_at(chunk)
                    if deep is not None:
                        if deep:
                            yield from self._send(chunk[:deep])
                        raise self._malformed(
                            self._where(),
                            f"arrays or objects nested deeper than {MAX_NESTING} levels "
                            f"(at byte {self._fed})",
                            offset=self._fed,
                        )
                    yield from self._send(chunk)
                if truncated_at is not None:
                    break
            if truncated_at is None:
                try:
                    self._feed.close()
                except _PARSE_ERRORS:
                    # Every byte fed was accepted, so only the end is missing: premature EOF or
                    # a token (string, escape, number, UTF-8 sequence) cut in half.
                    truncated_at = self._fed
        if truncated_at is None:
            yield from self._counted(self._advance(final=True))
        else:
            yield from self._counted(self._finish_truncated(truncated_at))
        log.info(
            "export %s read: %d chats, %d messages, %d warnings%s",
            self._label,
            self._chats,
            self._messages,
            self._warnings,
            "" if truncated_at is None else " (truncated)",
        )

    def _send(self, chunk: bytes) -> Iterator[ExportRecord]:
        """Feed ``chunk``; hand out what it completes (before a syntax error, what preceded it)."""
        self._chunk = (self._fed, self._fed + len(chunk))
        try:
            self._feed.send(chunk)
        except _PARSE_ERRORS as exc:
            error = self._syntax_error(exc)
            # What the parser built before the problem is complete: hand it out first.
            yield from self._counted(self._advance(final=False))
            raise error from None
        self._fed += len(chunk)
        yield from self._counted(self._advance(final=False))

    def _counted(self, records: Iterator[ExportRecord]) -> Iterator[ExportRecord]:
        for record in records:
            if type(record) is ExportMessage:
                self._messages += 1
            elif type(record) is ExportChat:
                self._chats += 1
            else:
                self._warnings += 1
            yield record

    def _check_start(self, f: BinaryIO) -> int:
        start = _skip_bom(f)
        head = f.read(CHUNK_BYTES).lstrip(_JSON_SPACE)
        f.seek(start)
        if head.startswith(b"{"):
            return start
        if not head:
            problem = "the file is empty"
        elif head.startswith(b"["):
            problem = "the top level is an array"
        else:
            problem = "the file is not JSON"
        raise self._malformed("top level", problem, offset=start)

    def _advance(self, final: bool) -> Iterator[ExportRecord]:
        if self._shape is None:
            self._shape = self._decide_shape(final)
            if self._shape is None:
                return
        if self._shape == "chat":
            cur = self._chat or self._open_chat("", 0, self._root)
            yield from self._pump(cur, finished=final)
        else:
            yield from self._pump_account(final)

    def _decide_shape(self, final: bool) -> str | None:
        for key in self._root:
            if key in _CHAT_KEYS:
                return "chat"
            if key in _ACCOUNT_KEYS:
                return "account"
        for value in self._root.values():
            _prune(value, MAX_PRUNE_DEPTH)
        if final or self._fed > MAX_UNDECIDED_BYTES:
            raise self._malformed("top level", "the top-level object has neither shape")
        return None

    def _pump_account(self, final: bool) -> Iterator[ExportRecord]:
        root = self._root
        last = next(reversed(root)) if root else None
        for key in list(root):
            complete = final or key != last
            if key in _CHAT_SECTIONS:
                yield from self._pump_section(key, root[key], complete)
            elif not complete:
                _prune(root[key], MAX_PRUNE_DEPTH)
            if complete:
                del root[key]

    def _pump_section(self, name: str, section: Any, complete: bool) -> Iterator[ExportRecord]:
        if type(section) is not dict:
            raise self._malformed(name, "expected an object holding a 'list' array")
        chats = section.get("list")
        if chats is None:
            return
        if type(chats) is not list:
            raise self._malformed(f"{name}.list", "expected an array of chats")
        list_done = complete or next(reversed(section)) != "list"
        while chats:
            obj = chats[0]
            finished = len(chats) > 1 or list_done
            cur = self._chat
            if cur is None or cur.obj is not obj:
                cur = self._open_chat(name, self._next_index.get(name, 0), obj)
            yield from self._pump(cur, finished)
            if not finished:
                return
            del chats[0]
            self._next_index[name] = cur.index + 1
            self._section_consumed[name] = self._section_consumed.get(name, 0) + cur.consumed
            self._chat = None

    def _open_chat(self, section: str, index: int, obj: Any) -> _Chat:
        if type(obj) is not dict:
            where = f"{section}.list[{index}]" if section else "top level"
            raise self._malformed(where, "expected a chat object")
        cur = _Chat(section, index, obj)
        self._chat = cur
        return cur

    def _pump(self, cur: _Chat, finished: bool) -> Iterator[ExportRecord]:
        obj = cur.obj
        if cur.header is None and not cur.skip and not cur.orphan:
            if _header_ready(obj, finished):
                yield self._make_header(cur, obj)
            else:
                pending = obj.get("messages")
                if type(pending) is not list or len(pending) <= self._max_pending:
                    return
                fields, complete = self._lookahead(cur)
                if complete or ("id" in fields and "type" in fields):
                    yield self._make_header(cur, fields)
                else:
                    cur.orphan = True
        msgs = obj.get("messages")
        if msgs is None:
            return
        if type(msgs) is not list:
            raise self._malformed(f"{cur.location}.messages".lstrip("."), "expected an array")
        closed = finished or next(reversed(obj)) != "messages"
        n = len(msgs) if closed else len(msgs) - 1
        if n <= 0:
            return
        batch = msgs[:n]
        del msgs[:n]
        base = cur.consumed
        cur.consumed += n
        if cur.skip or cur.orphan:
            return
        for offset, raw in enumerate(batch):
            yield from self._message(cur, raw, base + offset)

    def _make_header(self, cur: _Chat, fields: dict[str, Any]) -> ExportChat | ExportWarning:
        where = cur.location or "top level"
        raw_id = fields.get("id")
        export_type = fields.get("type")
        name = fields.get("name")
        if type(raw_id) is not int:
            raise self._malformed(where, "a chat needs an integer 'id'")
        if abs(raw_id) >= 10**MAX_DIGITS:
            raise self._malformed(f"{where}.id".lstrip("."), "the chat id is out of range")
        if "type" not in fields or (export_type is not None and type(export_type) is not str):
            raise self._malformed(where, "a chat needs a string 'type'")
        if name is not None and type(name) is not str:
            raise self._malformed(f"{where}.name", "expected a string or null")
        chat_type = _CHAT_TYPES.get(export_type) if export_type is not None else None
        if export_type is None or chat_type is None:
            cur.skip = True
            return ExportWarning(
                kind="skipped",
                message=f"chat {raw_id} of unknown type {_clipped(export_type)!r} skipped",
                location=where,
            )
        username = fields.get("username")
        if type(username) is str:
            username = username.lstrip("@") or None
        header = ExportChat(
            chat_id=_mark_chat(chat_type, raw_id),
            raw_id=raw_id,
            type=chat_type,
            title=name or _NAMELESS_TITLES.get(export_type, ""),
            username=username if type(username) is str else None,
            export_type=export_type,
            is_left=cur.section == "left_chats",
            location=cur.location,
        )
        cur.header = header
        cur.chat_id = header.chat_id
        return header

    def _lookahead(self, cur: _Chat) -> tuple[dict[str, Any], bool]:
        """Read a chat's header keys with a second streaming pass (keys after ``messages``).

        Returns:
            The header fields found and whether the chat object was read to its end.
        """
        item = f"{cur.section}.list.item" if cur.section else ""
        wanted = {(f"{item}.{key}" if item else key): key for key in ("name", "type", "id")}
        seen = -1 if cur.section else 0
        fields: dict[str, Any] = {}
        log.debug("chat %s: header follows its messages; looking it up", cur.location or "root")
        with open(self._src.json_path, "rb") as f:
            _skip_bom(f)
            try:
                for prefix, event, value in _parse_events(_NestingLimited(f)):
                    if prefix == item:
                        if event == "start_map" and cur.section:
                            seen += 1
                        elif event == "end_map" and seen == cur.index:
                            return fields, True
                    elif seen == cur.index and event not in ("start_map", "start_array"):
                        key = wanted.get(prefix)
                        if key is not None and event != "map_key":
                            fields[key] = value
            except _PARSE_ERRORS:
                pass
        return fields, False

    # --- messages ---

    def _message(self, cur: _Chat, raw: Any, index: int) -> Iterator[ExportRecord]:
        if type(raw) is not dict:
            raise self._malformed(cur.message_location(index), "expected a message object")
        msg_id = raw.get("id")
        if type(msg_id) is not int:
            raise self._malformed(cur.message_location(index), "a message needs an integer 'id'")
        header = cur.header
        if (
            header is not None
            and header.type == "supergroup"
            and type(raw.get("action")) is str
            and raw["action"] in _FORUM_ACTIONS
        ):
            cur.forum = True
            cur.header = replace(header, type="forum")
            yield cur.header
        try:
            message, refused = self._normalise(cur, raw, msg_id, index)
        except _BadField as bad:
            yield ExportWarning(
                kind="skipped",
                message=f"message {msg_id} skipped: {bad}",
                chat_id=cur.chat_id,
                msg_id=msg_id,
                location=cur.message_location(index),
            )
            return
        yield from refused
        yield message

    def _normalise(
        self, cur: _Chat, raw: dict[str, Any], msg_id: int, index: int
    ) -> tuple[ExportMessage, list[ExportWarning]]:
        """The message, and warnings about media paths refused in it.

        Raises:
            _BadField: a field of the wrong shape.
        """
        get = raw.get
        raw_type = get("type", "message")
        if type(raw_type) is not str:
            raise _BadField("'type' is not a string")
        if raw_type == "unsupported":
            raise _BadField("Telegram Desktop could not export this message (unsupported)")
        service = raw_type == "service"
        unixtime = get("date_unixtime")
        fast = _digits(unixtime) if type(unixtime) is str else None
        if fast is not None and fast <= MAX_UNIXTIME:
            date = fast
        else:
            parsed = _unix(unixtime, get("date"), "date")
            if parsed is None:
                raise _BadField("it has no date")
            date = parsed
        edit_date = None
        if "edited_unixtime" in raw or "edited" in raw:
            edit_date = _unix(get("edited_unixtime"), get("edited"), "edited")
        action = None
        if service:
            action = _opt_str(get("action"), "action")
            if "actor" in raw or "actor_id" in raw:
                name, peer = get("actor"), get("actor_id")
            else:
                name, peer = get("from"), get("from_id")
        else:
            name, peer = get("from"), get("from_id")
        sender_kind, sender_id = _peer(peer, "from_id")
        if name is None:
            name = ""
        elif type(name) is not str:
            raise _BadField("'from' is not a string")
        text, entities, has_link = _text(get("text_entities"), get("text"))
        if (
            not has_link
            and ("://" in text or "www." in text or "t.me/" in text)
            and _URL_RE.search(text) is not None
        ):
            has_link = True
        reply_to = get("reply_to_message_id")
        if reply_to is not None and type(reply_to) is not int:
            raise _BadField("'reply_to_message_id' is not an integer")
        reply_peer = forwarded_from = forwarded_from_id = saved_from = via_bot = author = None
        reactions: dict[str, int] = {}
        buttons: list[list[dict[str, Any]]] = []
        media = None
        refused: list[ExportWarning] = []
        if not raw.keys() <= _PLAIN_KEYS:
            if "reply_to_peer_id" in raw:
                reply_peer = _marked(*_peer(get("reply_to_peer_id"), "reply_to_peer_id"))
            forwarded_from = _opt_str(get("forwarded_from"), "forwarded_from")
            if "forwarded_from_id" in raw:
                forwarded_from_id = _marked(*_peer(get("forwarded_from_id"), "forwarded_from_id"))
            saved_from = _opt_str(get("saved_from"), "saved_from")
            via_bot = _opt_str(get("via_bot"), "via_bot")
            author = _opt_str(get("author"), "author")
            if "reactions" in raw:
                reactions = _reactions(get("reactions"))
            if "inline_bot_buttons" in raw:
                buttons, url_button = _buttons(get("inline_bot_buttons"))
                has_link = has_link or url_button
            if not _MEDIA_KEYS.isdisjoint(raw):
                media = self._media(cur, raw, msg_id, index, refused)
        topic_id = None
        if cur.forum:
            topic_id = _topic(cur, msg_id, reply_to, reply_peer, action)
        # Positional, in field order (pinned by a test): keywords cost a third more per message.
        message = ExportMessage(
            cur.chat_id if cur.chat_id is not None else 0,
            msg_id,
            date,
            "service" if service else "message",
            edit_date,
            sender_id,
            sender_kind,
            name,
            text,
            entities,
            reply_to,
            reply_peer,
            topic_id,
            forwarded_from,
            forwarded_from_id,
            saved_from,
            via_bot,
            author,
            reactions,
            sum(reactions.values()) if reactions else 0,
            action,
            {k: v for k, v in raw.items() if k not in _SERVICE_COMMON} if service else {},
            media,
            has_link,
            buttons,
            raw_type,
        )
        return message, refused

    def _media(
        self, cur: _Chat, raw: dict[str, Any], msg_id: int, index: int, refused: list[ExportWarning]
    ) -> ExportMedia:
        """The attachment of ``raw``; unsafe paths become ``None`` plus a warning in ``refused``.

        Raises:
            _BadField: a media field of the wrong shape.
        """
        get = raw.get

        def file_path(key: str) -> tuple[str | None, dict[str, Any]]:
            value = _need_str(get(key), key)
            absent = _placeholder(value)
            if absent is not None:
                return None, {"missing": absent}
            problem = _path_problem(self._root_real, value)
            if problem is None:
                return posixpath.normpath(value), {}
            refused.append(
                ExportWarning(
                    kind="unsafe_media_path",
                    message=f"message {msg_id}: media path refused: {problem}",
                    chat_id=cur.chat_id,
                    msg_id=msg_id,
                    location=f"{cur.message_location(index)}.{key}",
                )
            )
            return None, {"missing": "refused", "refused": problem}

        ttl = _opt_int(get("self_destruct_period_seconds"), "self_destruct_period_seconds")
        if "photo" in raw:
            path, extra = file_path("photo")
            if ttl is not None:
                extra["ttl_s"] = ttl
            media = ExportMedia(
                kind="photo",
                file_name=posixpath.basename(path) if path else None,
                size=_opt_int(get("photo_file_size"), "photo_file_size"),
                path=path,
                width=_opt_int(get("width"), "width"),
                height=_opt_int(get("height"), "height"),
                extra=extra,
            )
            return media
        if "file" in raw or "media_type" in raw:
            path, extra = file_path("file") if "file" in raw else (None, {})
            media_type = _opt_str(get("media_type"), "media_type")
            kind = _MEDIA_TYPE_KINDS.get(media_type or "", "document")
            if kind == "sticker" and "sticker_emoji" in raw:
                extra["emoji"] = _opt_str(get("sticker_emoji"), "sticker_emoji")
            if kind == "audio":
                for key in ("performer", "title"):
                    if key in raw:
                        extra[key] = _opt_str(get(key), key)
            if ttl is not None:
                extra["ttl_s"] = ttl
            if "thumbnail" in raw:
                thumbnail = file_path("thumbnail")[0]
                if thumbnail is not None:
                    extra["thumbnail"] = thumbnail
            file_name = _opt_str(get("file_name"), "file_name")
            media = ExportMedia(
                kind=kind,
                file_name=file_name or (posixpath.basename(path) if path else None),
                mime=_opt_str(get("mime_type"), "mime_type"),
                size=_opt_int(get("file_size"), "file_size"),
                path=path,
                width=_opt_int(get("width"), "width"),
                height=_opt_int(get("height"), "height"),
                duration_s=_opt_int(get("duration_seconds"), "duration_seconds"),
                extra=extra,
            )
            return media
        if "poll" in raw:
            return ExportMedia(kind="poll", extra=_poll(get("poll")))
        if "contact_information" in raw:
            info = get("contact_information")
            if type(info) is not dict:
                raise _BadField("'contact_information' is not an object")
            extra = {k: _opt_str(info.get(k), k) for k in ("first_name", "last_name")}
            extra["phone_number"] = _opt_str(info.get("phone_number"), "phone_number")
            path = None
            if "contact_vcard" in raw:
                path, more = file_path("contact_vcard")
                extra.update(more)
            media = ExportMedia(
                kind="contact",
                file_name=posixpath.basename(path) if path else None,
                path=path,
                extra=extra,
            )
            return media
        if "place_name" in raw or "address" in raw:
            extra = _geo(get("location_information"))
            extra["place_name"] = _opt_str(get("place_name"), "place_name")
            extra["address"] = _opt_str(get("address"), "address")
            return ExportMedia(kind="venue", extra=extra)
        if "location_information" in raw:
            extra = _geo(get("location_information"))
            period = _opt_int(get("live_location_period_seconds"), "live_location_period_seconds")
            if period is not None:
                extra["live_period_s"] = period
            return ExportMedia(kind="location", extra=extra)
        if "todo_list" in raw:
            return ExportMedia(kind="todo", extra=_todo(get("todo_list")))
        if "game_title" in raw:
            extra = {
                "title": _opt_str(get("game_title"), "game_title"),
                "description": _opt_str(get("game_description"), "game_description"),
            }
            return ExportMedia(kind="game", extra=extra)
        info = get("invoice_information")
        if type(info) is not dict:
            raise _BadField("'invoice_information' is not an object")
        return ExportMedia(kind="invoice", extra=dict(info))

    # --- endings and errors ---

    def _finish_truncated(self, at: int) -> Iterator[ExportRecord]:
        cur = self._chat
        where = f"byte {at}"
        if cur is not None:
            msgs = cur.obj.get("messages")
            pending = msgs if type(msgs) is list else []
            complete = self._complete_count(cur, pending)
            if cur.header is None and not cur.skip and not cur.orphan:
                if "id" in cur.obj and "type" in cur.obj:
                    yield self._make_header(cur, cur.obj)
                else:
                    cur.orphan = True
            if cur.header is not None and not cur.skip and not cur.orphan:
                for offset, raw in enumerate(pending[:complete]):
                    yield from self._message(cur, raw, cur.consumed + offset)
            last = cur.consumed + complete - 1
            where = f"{cur.message_location(last) if last >= 0 else cur.location} ({where})"
            if cur.orphan:
                lost = cur.consumed + complete
                yield ExportWarning(
                    kind="skipped",
                    message=f"{lost} messages dropped: the file ends before their chat's id/type",
                    location=cur.location or "top level",
                )
        yield ExportWarning(
            kind="truncated",
            message=(
                f"{self._label} ends mid-write at byte {at}; "
                "everything up to the last complete message was read"
            ),
            chat_id=cur.chat_id if cur is not None else None,
            location=where.lstrip(". "),
        )

    def _complete_count(self, cur: _Chat, pending: list[Any]) -> int:
        """How many of ``pending`` (the undrained tail of a cut chat) are complete objects."""
        if not pending:
            return 0
        if next(reversed(cur.obj)) != "messages":
            return len(pending)
        prefix = f"{cur.section}.list.item.messages.item" if cur.section else "messages.item"
        total = self._count_items(prefix)
        done_here = total - self._section_consumed.get(cur.section, 0) - cur.consumed
        return max(0, min(len(pending), done_here))

    def _count_items(self, prefix: str) -> int:
        """Complete values at ``prefix`` in the bytes fed so far (a second, counting pass)."""
        out = ijson.sendable_list()
        feed = _pipeline(out, prefix)
        count = 0
        with open(self._src.json_path, "rb") as f:
            left = self._fed - _skip_bom(f)
            try:
                while left > 0:
                    chunk = f.read(min(CHUNK_BYTES, left))
                    if not chunk:
                        break
                    left -= len(chunk)
                    feed.send(chunk)
                    count += len(out)
                    del out[:]
                feed.close()
            except _PARSE_ERRORS:
                pass
        return count + len(out)

    def _where(self) -> str:
        """JSON path of the innermost chat or message the partial tree holds."""
        root = self._root
        if self._done:
            return "after the top-level object"
        if not root:
            return "top level"
        last = next(reversed(root))
        if last in _CHAT_KEYS and self._shape != "account":
            obj, location = root, ""
        elif last in _CHAT_SECTIONS and type(root[last]) is dict:
            chats = root[last].get("list")
            if type(chats) is not list or not chats or type(chats[-1]) is not dict:
                return f"{last}.list" if type(chats) is list else last
            obj = chats[-1]
            location = f"{last}.list[{self._next_index.get(last, 0) + len(chats) - 1}]"
        else:
            return last if self._shape == "account" else "top level"
        msgs = obj.get("messages")
        if type(msgs) is not list or not msgs or next(reversed(obj)) != "messages":
            return location or "top level"
        cur = self._chat
        done = cur.consumed if cur is not None and cur.obj is obj else 0
        index = done + len(msgs) - 1
        return f"{location}.messages[{index}]" if location else f"messages[{index}]"

    def _syntax_error(self, exc: Exception) -> MalformedExport:
        lines = str(exc).strip().strip("b'\"").splitlines() or ["invalid JSON"]
        detail = lines[0].split("\\n")[0].strip().rstrip(".")
        if "UTF8" in detail or isinstance(exc, UnicodeDecodeError):
            detail = "invalid UTF-8 bytes"
        start, end = self._chunk
        return self._malformed(self._where(), f"{detail} (in bytes {start}-{end})", offset=start)

    def _malformed(self, where: str, problem: str, offset: int | None = None) -> MalformedExport:
        metadata = {"file": self._label, "location": where}
        if offset is not None:
            metadata["byte_offset"] = str(offset)
        return MalformedExport(
            f"{self._label}: {where}: {problem}; expected a Telegram Desktop JSON export "
            "(a chat object with name/type/id/messages, or an account export with chats.list)",
            hint="Re-export from Telegram Desktop in machine-readable JSON format.",
            metadata=metadata,
        )


def _header_ready(obj: dict[str, Any], finished: bool) -> bool:
    if "id" not in obj or "type" not in obj:
        return finished
    kind = obj.get("type")
    return finished or "name" in obj or (type(kind) is str and kind in _NAMELESS_TITLES)


def _mark_chat(chat_type: str, raw_id: int) -> int:
    if chat_type == "group":
        return -raw_id
    if chat_type in ("supergroup", "forum", "channel"):
        return -(SUPERGROUP_ID_OFFSET + raw_id)
    return raw_id


def _topic(
    cur: _Chat, msg_id: int, reply_to: int | None, reply_peer: int | None, action: str | None
) -> int | None:
    """Forum topic of a message, or ``None`` where the export does not tell.

    Exports keep only ``reply_to_message_id``: a plain post in a topic points at the topic's
    ``topic_created`` service message, a reply points at the replied message (whose topic is
    inherited), and a post without reply is in General. Service messages carry no reply, so
    apart from ``topic_created`` (the topic's root) their topic is unknown.
    """
    if action == "topic_created":
        cur.roots.add(msg_id)
        topic: int | None = msg_id
    elif reply_to is None:
        topic = None if action is not None else GENERAL_TOPIC_ID
    elif reply_peer is not None:
        topic = None
    elif reply_to in cur.roots:
        topic = reply_to
    else:
        topic = cur.topics.get(reply_to)
    if topic is not None:
        cur.topics.add(msg_id, topic)
    return topic


def _poll(value: Any) -> dict[str, Any]:
    if type(value) is not dict:
        raise _BadField("'poll' is not an object")
    answers = value.get("answers") or []
    if type(answers) is not list:
        raise _BadField("'poll.answers' is not a list")
    out = []
    for answer in answers:
        if type(answer) is not dict:
            raise _BadField("a poll answer is not an object")
        out.append(
            {
                "text": _runs_text(answer.get("text"), "poll.answers.text"),
                "voters": _opt_int(answer.get("voters"), "poll.answers.voters"),
                "chosen": bool(answer.get("chosen", False)),
            }
        )
    return {
        "question": _runs_text(value.get("question"), "poll.question"),
        "closed": bool(value.get("closed", False)),
        "total_voters": _opt_int(value.get("total_voters"), "poll.total_voters"),
        "answers": out,
    }


def _todo(value: Any) -> dict[str, Any]:
    if type(value) is not dict:
        raise _BadField("'todo_list' is not an object")
    items = value.get("answers") or []
    if type(items) is not list:
        raise _BadField("'todo_list.answers' is not a list")
    out = []
    for item in items:
        if type(item) is not dict:
            raise _BadField("a to-do item is not an object")
        out.append(
            {
                "id": _opt_int(item.get("id"), "todo_list.answers.id"),
                "text": _runs_text(item.get("text"), "todo_list.answers.text"),
            }
        )
    return {"title": _runs_text(value.get("title"), "todo_list.title"), "items": out}


def _prune(value: Any, depth: int) -> None:
    """Empty the arrays of a section nobody reads, so it never grows while it streams."""
    if type(value) is list:
        value.clear()
    elif type(value) is dict and depth > 0:
        for child in value.values():
            _prune(child, depth - 1)
