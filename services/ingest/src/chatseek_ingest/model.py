"""The normalised records a Telegram Desktop export is read into (frozen, slotted dataclasses).

Invariants:
* ``ExportChat.chat_id`` is the *marked* peer id: positive for private, bot and saved chats,
  ``-id`` for legacy groups, ``-(10**12 + id)`` for supergroups, forums and channels.
* ``ExportMessage.date`` / ``edit_date`` are unix seconds UTC; ``msg_id`` is the export's id
  (negative ids are messages of a legacy group that migrated to this supergroup).
* ``ExportMedia.path`` is a relative POSIX path inside the export folder that was checked not to
  escape it, or ``None`` (media not included, or refused).
* Records carry no behaviour beyond construction; the reader in ``export.py`` fills them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CHAT_TYPES",
    "MEDIA_KINDS",
    "ExportChat",
    "ExportMedia",
    "ExportMessage",
    "ExportWarning",
    "WARNING_KINDS",
]

CHAT_TYPES = frozenset({"private", "saved", "bot", "group", "supergroup", "forum", "channel"})
MEDIA_KINDS = frozenset(
    {
        "photo",
        "video",
        "voice",
        "video_note",
        "audio",
        "sticker",
        "animation",
        "document",
        "poll",
        "contact",
        "location",
        "venue",
        "todo",
        "game",
        "invoice",
    }
)
WARNING_KINDS = frozenset({"truncated", "skipped", "unsafe_media_path"})


@dataclass(frozen=True, slots=True)
class ExportChat:
    """One chat of an export, emitted before its messages.

    A supergroup is emitted again with ``type="forum"`` (same ``chat_id``) at the first forum
    topic action found in its history; consumers upsert chats by ``chat_id``.

    Attributes:
        chat_id: marked peer id (see module docstring).
        raw_id: the bare ``id`` exactly as the export wrote it.
        type: one of ``CHAT_TYPES``.
        title: the chat's name; ``""`` when the export has none.
        username: public username without ``@`` when the export carries one, else ``None``.
        export_type: the export's own type string (``personal_chat``, ``public_supergroup``...).
        is_left: the chat came from ``left_chats`` (a channel or group the account left).
        location: JSON path of the chat object (``chats.list[3]``; ``""`` for a single chat).
    """

    chat_id: int
    raw_id: int
    type: str
    title: str
    username: str | None
    export_type: str
    is_left: bool = False
    location: str = ""


@dataclass(frozen=True, slots=True)
class ExportMedia:
    """The attachment of a message (or the photo of a service message).

    Attributes:
        kind: one of ``MEDIA_KINDS``.
        file_name: the document's name, else the included file's base name, else ``None``.
        mime: MIME type as exported, else ``None``.
        size: bytes, when the export states it.
        path: safe relative path inside the export folder, or ``None``.
        width: pixels, for photos, videos, stickers and animations.
        height: pixels.
        duration_s: seconds, for audio and video.
        extra: kind-specific details: ``emoji`` (sticker), ``performer``/``title`` (audio),
            ``question``/``answers``/``closed``/``total_voters`` (poll),
            ``first_name``/``last_name``/``phone_number`` (contact),
            ``latitude``/``longitude``/``live_period_s`` (location), ``place_name``/``address``
            (venue), ``title``/``items`` (todo), ``missing`` (why ``path`` is ``None``:
            ``not_included``, ``unavailable``, ``too_large`` or ``refused``, with the reason in
            ``refused``), ``thumbnail`` (safe relative path of an included thumbnail),
            ``ttl_s`` (self-destruct period).
    """

    kind: str
    file_name: str | None = None
    mime: str | None = None
    size: int | None = None
    path: str | None = None
    width: int | None = None
    height: int | None = None
    duration_s: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ExportMessage:
    """One message or service message, normalised.

    Attributes:
        chat_id: marked id of the chat it belongs to.
        msg_id: the export's message id.
        date: unix seconds UTC (``date_unixtime``, else the naive ``date`` read as UTC).
        edit_date: unix seconds UTC of the last edit, else ``None``.
        kind: ``"message"`` or ``"service"``.
        sender_id: bare id of the sender (service: the actor), else ``None``.
        sender_kind: ``"user"``, ``"channel"``, ``"chat"`` or ``None``.
        sender_name: display name as exported; ``""`` when null or absent.
        text: plain text (runs joined).
        entities: ``{type, text}`` plus ``href`` (links, the URL itself for bare links),
            ``user_id`` (mention_name), ``document_id`` (custom_emoji), ``language`` (pre);
            plain runs are not entities.
        reply_to_msg_id: id of the message replied to, else ``None``.
        reply_to_peer_id: marked id of the other chat for a cross-chat reply, else ``None``.
        topic_id: forum topic (its root message id; 1 is General) or ``None`` outside forums
            and where the export does not tell.
        forwarded_from: original sender's name of a forward, else ``None``.
        forwarded_from_id: original sender's marked id when exported, else ``None``.
        saved_from: name of the chat a saved message came from, else ``None``.
        via_bot: username of the inline bot used (as exported, with ``@``), else ``None``.
        author: post signature in channels, else ``None``.
        reactions: reaction key to count; keys are the emoji, ``custom:<document_id>`` or
            ``paid``.
        reactions_total: sum of ``reactions``.
        service_action: the service ``action`` (``pin_message``, ``topic_created``...), else
            ``None``.
        service_extra: the service message's action-specific fields (``members``,
            ``message_id``, ``title``, ``duration_seconds``...).
        media: the attachment, else ``None``.
        has_link: a link entity, a URL in the plain text, or a URL button.
        buttons: inline keyboard rows, each a list of ``{type, text, data?}``.
        raw_type: the export's ``type`` string.
        grouped_id: the media group (album) the message belongs to, else ``None``; Telegram
            sends each photo of an album as its own message with one shared ``grouped_id``.
    """

    chat_id: int
    msg_id: int
    date: int
    kind: str
    edit_date: int | None = None
    sender_id: int | None = None
    sender_kind: str | None = None
    sender_name: str = ""
    text: str = ""
    entities: list[dict[str, Any]] = field(default_factory=list)
    reply_to_msg_id: int | None = None
    reply_to_peer_id: int | None = None
    topic_id: int | None = None
    forwarded_from: str | None = None
    forwarded_from_id: int | None = None
    saved_from: str | None = None
    via_bot: str | None = None
    author: str | None = None
    reactions: dict[str, int] = field(default_factory=dict)
    reactions_total: int = 0
    service_action: str | None = None
    service_extra: dict[str, Any] = field(default_factory=dict)
    media: ExportMedia | None = None
    has_link: bool = False
    buttons: list[list[dict[str, Any]]] = field(default_factory=list)
    raw_type: str = "message"
    grouped_id: int | None = None


@dataclass(frozen=True, slots=True)
class ExportWarning:
    """Something the reader recovered from instead of failing.

    Attributes:
        kind: ``truncated`` (the file ends mid-write; everything before was yielded),
            ``skipped`` (a message or chat that could not be read), ``unsafe_media_path``
            (a media path refused for escaping the export folder; the message was kept).
        message: one sentence for humans; never quotes message text.
        chat_id: marked chat id when known.
        msg_id: message id when known.
        location: JSON path (``chats.list[3].messages[17]``) and/or byte offset.
    """

    kind: str
    message: str
    chat_id: int | None = None
    msg_id: int | None = None
    location: str = ""
