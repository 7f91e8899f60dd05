"""A message's attachment: photo, file, poll, contact, place, location, to-do, game, invoice.

A file path that would leave the export folder becomes ``None`` plus an ``unsafe_media_path``
warning; Telegram's "(File not included…)" placeholders say why a file is absent.
"""

from __future__ import annotations

import posixpath
from typing import Any

from chatseek_ingest.export.chat import Chat
from chatseek_ingest.export.fields import BadField, need_str, opt_int, opt_str, runs_text
from chatseek_ingest.export.source import path_problem
from chatseek_ingest.model import ExportMedia, ExportWarning

__all__ = ["MEDIA_KEYS", "parse_media"]

_MEDIA_TYPE_KINDS = {
    "sticker": "sticker",
    "video_message": "video_note",
    "voice_message": "voice",
    "animation": "animation",
    "video_file": "video",
    "audio_file": "audio",
}
MEDIA_KEYS = frozenset(
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


class _Paths:
    """Reads the file paths of one message, refusing unsafe ones into ``refused``."""

    __slots__ = ("_cur", "_index", "_msg_id", "_raw", "_root_real", "refused")

    def __init__(
        self,
        cur: Chat,
        raw: dict[str, Any],
        msg_id: int,
        index: int,
        root_real: str,
        refused: list[ExportWarning],
    ) -> None:
        self._cur = cur
        self._raw = raw
        self._msg_id = msg_id
        self._index = index
        self._root_real = root_real
        self.refused = refused

    def path(self, key: str) -> tuple[str | None, dict[str, Any]]:
        """The safe, normalised path at ``key`` (or None) and what to record about its absence."""
        value = need_str(self._raw.get(key), key)
        absent = _placeholder(value)
        if absent is not None:
            return None, {"missing": absent}
        problem = path_problem(self._root_real, value)
        if problem is None:
            return posixpath.normpath(value), {}
        cur = self._cur
        self.refused.append(
            ExportWarning(
                kind="unsafe_media_path",
                message=f"message {self._msg_id}: media path refused: {problem}",
                chat_id=cur.chat_id,
                msg_id=self._msg_id,
                location=f"{cur.message_location(self._index)}.{key}",
            )
        )
        return None, {"missing": "refused", "refused": problem}


def parse_media(
    cur: Chat,
    raw: dict[str, Any],
    msg_id: int,
    index: int,
    root_real: str,
    refused: list[ExportWarning],
) -> ExportMedia:
    """The attachment of ``raw``; unsafe paths become ``None`` plus a warning in ``refused``.

    Raises:
        BadField: a media field of the wrong shape.
    """
    get = raw.get
    paths = _Paths(cur, raw, msg_id, index, root_real, refused)
    ttl = opt_int(get("self_destruct_period_seconds"), "self_destruct_period_seconds")
    if "photo" in raw:
        return _photo(raw, paths, ttl)
    if "file" in raw or "media_type" in raw:
        return _file(raw, paths, ttl)
    if "poll" in raw:
        return ExportMedia(kind="poll", extra=_poll(get("poll")))
    if "contact_information" in raw:
        return _contact(raw, paths)
    if "place_name" in raw or "address" in raw:
        extra = _geo(get("location_information"))
        extra["place_name"] = opt_str(get("place_name"), "place_name")
        extra["address"] = opt_str(get("address"), "address")
        return ExportMedia(kind="venue", extra=extra)
    if "location_information" in raw:
        extra = _geo(get("location_information"))
        period = opt_int(get("live_location_period_seconds"), "live_location_period_seconds")
        if period is not None:
            extra["live_period_s"] = period
        return ExportMedia(kind="location", extra=extra)
    if "todo_list" in raw:
        return ExportMedia(kind="todo", extra=_todo(get("todo_list")))
    if "game_title" in raw:
        extra = {
            "title": opt_str(get("game_title"), "game_title"),
            "description": opt_str(get("game_description"), "game_description"),
        }
        return ExportMedia(kind="game", extra=extra)
    info = get("invoice_information")
    if type(info) is not dict:
        raise BadField("'invoice_information' is not an object")
    return ExportMedia(kind="invoice", extra=dict(info))


def _photo(raw: dict[str, Any], paths: _Paths, ttl: int | None) -> ExportMedia:
    get = raw.get
    path, extra = paths.path("photo")
    if ttl is not None:
        extra["ttl_s"] = ttl
    media = ExportMedia(
        kind="photo",
        file_name=posixpath.basename(path) if path else None,
        size=opt_int(get("photo_file_size"), "photo_file_size"),
        path=path,
        width=opt_int(get("width"), "width"),
        height=opt_int(get("height"), "height"),
        extra=extra,
    )
    return media


def _file(raw: dict[str, Any], paths: _Paths, ttl: int | None) -> ExportMedia:
    get = raw.get
    path, extra = paths.path("file") if "file" in raw else (None, {})
    media_type = opt_str(get("media_type"), "media_type")
    kind = _MEDIA_TYPE_KINDS.get(media_type or "", "document")
    if kind == "sticker" and "sticker_emoji" in raw:
        extra["emoji"] = opt_str(get("sticker_emoji"), "sticker_emoji")
    if kind == "audio":
        for key in ("performer", "title"):
            if key in raw:
                extra[key] = opt_str(get(key), key)
    if ttl is not None:
        extra["ttl_s"] = ttl
    if "thumbnail" in raw:
        thumbnail = paths.path("thumbnail")[0]
        if thumbnail is not None:
            extra["thumbnail"] = thumbnail
    file_name = opt_str(get("file_name"), "file_name")
    media = ExportMedia(
        kind=kind,
        file_name=file_name or (posixpath.basename(path) if path else None),
        mime=opt_str(get("mime_type"), "mime_type"),
        size=opt_int(get("file_size"), "file_size"),
        path=path,
        width=opt_int(get("width"), "width"),
        height=opt_int(get("height"), "height"),
        duration_s=opt_int(get("duration_seconds"), "duration_seconds"),
        extra=extra,
    )
    return media


def _contact(raw: dict[str, Any], paths: _Paths) -> ExportMedia:
    info = raw.get("contact_information")
    if type(info) is not dict:
        raise BadField("'contact_information' is not an object")
    extra = {k: opt_str(info.get(k), k) for k in ("first_name", "last_name")}
    extra["phone_number"] = opt_str(info.get("phone_number"), "phone_number")
    path = None
    if "contact_vcard" in raw:
        path, more = paths.path("contact_vcard")
        extra.update(more)
    media = ExportMedia(
        kind="contact",
        file_name=posixpath.basename(path) if path else None,
        path=path,
        extra=extra,
    )
    return media


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


def _geo(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if type(value) is not dict:
        raise BadField("'location_information' is not an object")
    lat, lon = value.get("latitude"), value.get("longitude")
    if not isinstance(lat, int | float) or not isinstance(lon, int | float):
        raise BadField("'location_information' lacks numeric coordinates")
    return {"latitude": float(lat), "longitude": float(lon)}


def _poll(value: object) -> dict[str, Any]:
    if type(value) is not dict:
        raise BadField("'poll' is not an object")
    answers = value.get("answers") or []
    if type(answers) is not list:
        raise BadField("'poll.answers' is not a list")
    out = []
    for answer in answers:
        if type(answer) is not dict:
            raise BadField("a poll answer is not an object")
        out.append(
            {
                "text": runs_text(answer.get("text"), "poll.answers.text"),
                "voters": opt_int(answer.get("voters"), "poll.answers.voters"),
                "chosen": bool(answer.get("chosen", False)),
            }
        )
    return {
        "question": runs_text(value.get("question"), "poll.question"),
        "closed": bool(value.get("closed", False)),
        "total_voters": opt_int(value.get("total_voters"), "poll.total_voters"),
        "answers": out,
    }


def _todo(value: object) -> dict[str, Any]:
    if type(value) is not dict:
        raise BadField("'todo_list' is not an object")
    items = value.get("answers") or []
    if type(items) is not list:
        raise BadField("'todo_list.answers' is not a list")
    out = []
    for item in items:
        if type(item) is not dict:
            raise BadField("a to-do item is not an object")
        out.append(
            {
                "id": opt_int(item.get("id"), "todo_list.answers.id"),
                "text": runs_text(item.get("text"), "todo_list.answers.text"),
            }
        )
    return {"title": runs_text(value.get("title"), "todo_list.title"), "items": out}
