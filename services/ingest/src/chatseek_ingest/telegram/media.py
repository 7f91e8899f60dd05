"""A Telethon message's media as the ``ExportMedia`` an export would give (no I/O)."""

from __future__ import annotations

from typing import Any

from telethon.tl import types

from chatseek_ingest.model import ExportMedia

__all__ = ["message_media"]


def _text_of(value: Any) -> str:
    """Plain text of a ``TextWithEntities`` or of a plain string (older layers)."""
    return str(getattr(value, "text", value) or "")


def _photo_size(photo: Any) -> tuple[int | None, int | None, int | None]:
    best: tuple[int, int, int] | None = None
    for size in getattr(photo, "sizes", None) or []:
        w, h = getattr(size, "w", None), getattr(size, "h", None)
        if w is None or h is None:
            continue
        if isinstance(size, types.PhotoSizeProgressive):
            nbytes = max(size.sizes) if size.sizes else 0
        else:
            nbytes = int(getattr(size, "size", 0) or len(getattr(size, "bytes", b"") or b""))
        if best is None or w * h > best[0] * best[1]:
            best = (w, h, nbytes)
    if best is None:
        return None, None, None
    return best[0], best[1], best[2] or None


def _document(media: Any) -> ExportMedia:
    doc = media.document
    extra: dict[str, Any] = {}
    if media.ttl_seconds:
        extra["ttl_s"] = media.ttl_seconds
    if not isinstance(doc, types.Document):
        return ExportMedia(kind="document", extra=extra | {"not_included": "unavailable"})
    kind = "document"
    file_name = None
    width = height = duration = None
    for attr in doc.attributes:
        if isinstance(attr, types.DocumentAttributeFilename):
            file_name = attr.file_name
        elif isinstance(attr, types.DocumentAttributeSticker):
            kind = "sticker"
            extra["emoji"] = attr.alt
        elif isinstance(attr, types.DocumentAttributeVideo):
            width, height, duration = attr.w, attr.h, int(attr.duration)
            if kind == "document":
                kind = "video_note" if attr.round_message else "video"
        elif isinstance(attr, types.DocumentAttributeAudio):
            duration = int(attr.duration)
            if attr.voice:
                kind = "voice"
            elif kind == "document":
                kind = "audio"
                for key in ("performer", "title"):
                    if getattr(attr, key):
                        extra[key] = getattr(attr, key)
        elif isinstance(attr, types.DocumentAttributeImageSize):
            width, height = attr.w, attr.h
    if any(isinstance(a, types.DocumentAttributeAnimated) for a in doc.attributes):
        kind = "sticker" if kind == "sticker" else "animation"
    return ExportMedia(
        kind=kind,
        file_name=file_name,
        mime=doc.mime_type or None,
        size=doc.size,
        width=width,
        height=height,
        duration_s=duration,
        extra=extra,
    )


def _poll(media: Any) -> ExportMedia:
    poll = media.poll
    results = media.results
    voters = {r.option: r for r in (getattr(results, "results", None) or [])}
    answers = []
    for answer in poll.answers:
        counted = voters.get(answer.option)
        answers.append(
            {
                "text": _text_of(answer.text),
                "voters": counted.voters if counted is not None else None,
                "chosen": bool(counted.chosen) if counted is not None else False,
            }
        )
    extra = {
        "question": _text_of(poll.question),
        "closed": bool(poll.closed),
        "total_voters": getattr(results, "total_voters", None),
        "answers": answers,
    }
    return ExportMedia(kind="poll", extra=extra)


def _geo(point: Any) -> dict[str, Any]:
    if isinstance(point, types.GeoPoint):
        return {"latitude": point.lat, "longitude": point.long}
    return {}


def message_media(media: Any) -> ExportMedia | None:
    """The ``ExportMedia`` of a Telethon message's media; None for a kind not kept (web pages)."""
    if isinstance(media, types.MessageMediaPhoto):
        extra: dict[str, Any] = {"ttl_s": media.ttl_seconds} if media.ttl_seconds else {}
        if not isinstance(media.photo, types.Photo):
            return ExportMedia(kind="photo", extra=extra | {"not_included": "unavailable"})
        width, height, size = _photo_size(media.photo)
        return ExportMedia(kind="photo", size=size, width=width, height=height, extra=extra)
    if isinstance(media, types.MessageMediaDocument):
        return _document(media)
    if isinstance(media, types.MessageMediaPoll):
        return _poll(media)
    if isinstance(media, types.MessageMediaContact):
        extra = {
            "first_name": media.first_name or None,
            "last_name": media.last_name or None,
            "phone_number": media.phone_number or None,
        }
        return ExportMedia(kind="contact", extra=extra)
    if isinstance(media, types.MessageMediaVenue):
        extra = _geo(media.geo) | {"place_name": media.title, "address": media.address}
        return ExportMedia(kind="venue", extra=extra)
    if isinstance(media, types.MessageMediaGeoLive):
        return ExportMedia(kind="location", extra=_geo(media.geo) | {"live_period_s": media.period})
    if isinstance(media, types.MessageMediaGeo):
        return ExportMedia(kind="location", extra=_geo(media.geo))
    if isinstance(media, types.MessageMediaGame):
        game = media.game
        return ExportMedia(
            kind="game", extra={"title": game.title, "description": game.description}
        )
    if isinstance(media, types.MessageMediaInvoice):
        extra = {
            "title": media.title,
            "description": media.description,
            "currency": media.currency,
            "amount": media.total_amount,
        }
        return ExportMedia(kind="invoice", extra=extra)
    if isinstance(media, types.MessageMediaToDo):
        todo = media.todo
        items = [{"id": item.id, "text": _text_of(item.title)} for item in todo.list]
        return ExportMedia(kind="todo", extra={"title": _text_of(todo.title), "items": items})
    return None
