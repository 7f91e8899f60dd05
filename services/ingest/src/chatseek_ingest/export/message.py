"""One exported message: validated, normalised to an ``ExportMessage``, or skipped with a warning.

A field of the wrong shape skips its message (``BadField``); a message that is not an object
or has no integer id aborts the export (``MalformedExport``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from chatseek_ingest.export.chat import Chat, forum_topic
from chatseek_ingest.export.fields import (
    MAX_UNIXTIME,
    BadField,
    marked_id,
    opt_str,
    parse_buttons,
    parse_digits,
    parse_peer,
    parse_reactions,
    parse_text,
    parse_unix,
)
from chatseek_ingest.export.media import MEDIA_KEYS, parse_media
from chatseek_ingest.export.source import malformed
from chatseek_ingest.model import ExportChat, ExportMedia, ExportMessage, ExportWarning

__all__ = ["message_records"]

_FORUM_ACTIONS = frozenset({"topic_created", "topic_edit"})
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


_Extras = tuple[
    int | None,
    str | None,
    int | None,
    str | None,
    str | None,
    str | None,
    dict[str, int],
    list[list[dict[str, Any]]],
    ExportMedia | None,
    bool,
]
"""``(reply_peer, forwarded_from, forwarded_from_id, saved_from, via_bot, author, reactions,
buttons, media, url_button)``: a plain tuple, as this runs once per message."""


def message_records(
    cur: Chat, raw: object, index: int, root_real: str, label: str
) -> Iterator[ExportChat | ExportMessage | ExportWarning]:
    """The records of message ``index`` of ``cur``, in the order they are handed out.

    A forum header first when the message shows the supergroup is a forum, then warnings about
    media paths refused in it, then the message (or a warning that it was skipped).

    Raises:
        MalformedExport: ``raw`` is not an object or has no integer id.
    """
    if type(raw) is not dict:
        raise malformed(label, cur.message_location(index), "expected a message object")
    msg_id = raw.get("id")
    if type(msg_id) is not int:
        raise malformed(label, cur.message_location(index), "a message needs an integer 'id'")
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
        message, refused = _normalise(cur, raw, msg_id, index, root_real)
    except BadField as bad:
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
    cur: Chat, raw: dict[str, Any], msg_id: int, index: int, root_real: str
) -> tuple[ExportMessage, list[ExportWarning]]:
    """The message, and warnings about media paths refused in it.

    Raises:
        BadField: a field of the wrong shape.
    """
    get = raw.get
    raw_type = get("type", "message")
    if type(raw_type) is not str:
        raise BadField("'type' is not a string")
    if raw_type == "unsupported":
        raise BadField("Telegram Desktop could not export this message (unsupported)")
    service = raw_type == "service"
    unixtime = get("date_unixtime")
    fast = parse_digits(unixtime) if type(unixtime) is str else None
    date = fast if fast is not None and fast <= MAX_UNIXTIME else _date(raw)
    edit_date = None
    if "edited_unixtime" in raw or "edited" in raw:
        edit_date = parse_unix(get("edited_unixtime"), get("edited"), "edited")
    action, name, sender_kind, sender_id = _sender(raw, service)
    text, entities, has_link = parse_text(get("text_entities"), get("text"))
    if (
        not has_link
        and ("://" in text or "www." in text or "t.me/" in text)
        and _URL_RE.search(text) is not None
    ):
        has_link = True
    reply_to = get("reply_to_message_id")
    if reply_to is not None and type(reply_to) is not int:
        raise BadField("'reply_to_message_id' is not an integer")
    refused: list[ExportWarning] = []
    if raw.keys() <= _PLAIN_KEYS:
        reply_peer = forwarded_from = forwarded_from_id = saved_from = via_bot = author = None
        reactions: dict[str, int] = {}
        buttons: list[list[dict[str, Any]]] = []
        media = None
    else:
        extras = _extras(cur, raw, msg_id, index, root_real, refused)
        reply_peer, forwarded_from, forwarded_from_id, saved_from, via_bot, author = extras[:6]
        reactions, buttons, media, url_button = extras[6:]
        has_link = has_link or url_button
    topic_id = None
    if cur.forum:
        topic_id = forum_topic(cur, msg_id, reply_to, reply_peer, action)
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


def _date(raw: dict[str, Any]) -> int:
    """The message's unix time when ``date_unixtime`` is not plain digits in range."""
    parsed = parse_unix(raw.get("date_unixtime"), raw.get("date"), "date")
    if parsed is None:
        raise BadField("it has no date")
    return parsed


def _sender(raw: dict[str, Any], service: bool) -> tuple[str | None, str, str | None, int | None]:
    """``(action, sender name, sender kind, bare sender id)``; a service message's actor."""
    get = raw.get
    action = None
    if service:
        action = opt_str(get("action"), "action")
        if "actor" in raw or "actor_id" in raw:
            name, peer = get("actor"), get("actor_id")
        else:
            name, peer = get("from"), get("from_id")
    else:
        name, peer = get("from"), get("from_id")
    sender_kind, sender_id = parse_peer(peer, "from_id")
    if name is None:
        name = ""
    elif type(name) is not str:
        raise BadField("'from' is not a string")
    return action, name, sender_kind, sender_id


def _extras(
    cur: Chat,
    raw: dict[str, Any],
    msg_id: int,
    index: int,
    root_real: str,
    refused: list[ExportWarning],
) -> _Extras:
    """The fields a plain message (only ``_PLAIN_KEYS``) never has; see ``_Extras``.

    Refused media paths are appended to ``refused``.
    """
    get = raw.get
    reply_peer = forwarded_from_id = None
    reactions: dict[str, int] = {}
    buttons: list[list[dict[str, Any]]] = []
    url_button = False
    media = None
    if "reply_to_peer_id" in raw:
        reply_peer = marked_id(*parse_peer(get("reply_to_peer_id"), "reply_to_peer_id"))
    forwarded_from = opt_str(get("forwarded_from"), "forwarded_from")
    if "forwarded_from_id" in raw:
        forwarded_from_id = marked_id(*parse_peer(get("forwarded_from_id"), "forwarded_from_id"))
    saved_from = opt_str(get("saved_from"), "saved_from")
    via_bot = opt_str(get("via_bot"), "via_bot")
    author = opt_str(get("author"), "author")
    if "reactions" in raw:
        reactions = parse_reactions(get("reactions"))
    if "inline_bot_buttons" in raw:
        buttons, url_button = parse_buttons(get("inline_bot_buttons"))
    if not MEDIA_KEYS.isdisjoint(raw):
        media = parse_media(cur, raw, msg_id, index, root_real, refused)
    return (
        reply_peer,
        forwarded_from,
        forwarded_from_id,
        saved_from,
        via_bot,
        author,
        reactions,
        buttons,
        media,
        url_button,
    )
