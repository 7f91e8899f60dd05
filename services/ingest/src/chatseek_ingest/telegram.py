"""The Telegram boundary: the client calls ingest makes, the real client, and record conversion.

Owns ``TelegramClientLike`` (exactly the Telethon calls used here), the real client over an
in-memory ``StringSession`` read from the account's session file, the flood-wait policy every
Telegram-using core function shares, and ``chat_record`` / ``to_records``, which turn real
Telethon objects into the same ``ExportChat`` / ``ExportMessage`` records an export produces.
Invariants: chat ids are marked (``telethon.utils.get_peer_id``); conversion does no I/O; only
``auth`` writes a session file, every client here reads it once and never writes it; the real
client never sleeps through a flood wait on its own (``flood_sleep_threshold=0``).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import telethon
from telethon import errors, helpers, utils
from telethon.sessions import StringSession
from telethon.tl import functions, types

from chatseek_core.errors import FloodWait, InvalidArgument, NotAuthorized
from chatseek_ingest.model import ExportChat, ExportMedia, ExportMessage

__all__ = [
    "CHANNEL_ID_OFFSET",
    "FLOOD_SLEEP_THRESHOLD_S",
    "GENERAL_TOPIC_ID",
    "SESSIONS_DIR",
    "UNAVAILABLE_ERRORS",
    "Fetched",
    "FloodNotice",
    "FloodPolicy",
    "TelegramClientLike",
    "chat_record",
    "collect",
    "fetch_messages",
    "folder_title",
    "get_folders",
    "get_linked_chat",
    "input_peer",
    "open_client",
    "read_session",
    "session_path",
    "to_records",
    "unavailable_reason",
]

log = logging.getLogger(__name__)

FLOOD_SLEEP_THRESHOLD_S = 60.0
MAX_FLOOD_RETRIES = 5
GENERAL_TOPIC_ID = 1
CHANNEL_ID_OFFSET = 1_000_000_000_000
SESSIONS_DIR = "sessions"
SESSION_SUFFIX = ".session"
SAVED_MESSAGES_TITLE = "Saved Messages"
_ACCOUNT_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_URL_RE = re.compile(r"\b[a-z][a-z0-9+.-]*://\S|\bwww\.\w|\bt\.me/\w", re.IGNORECASE)
_FLOOD_ERRORS: tuple[type[Exception], ...] = tuple(
    cls
    for cls in (errors.FloodWaitError, getattr(errors, "FloodPremiumWaitError", None))
    if cls is not None
)

UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    errors.ChannelPrivateError,
    errors.ChatForbiddenError,
    errors.ChannelInvalidError,
    errors.ChatIdInvalidError,
    errors.PeerIdInvalidError,
    errors.UserBannedInChannelError,
    errors.ChatAdminRequiredError,
)
"""What Telegram raises for a chat this account cannot read: left, kicked, private, deleted."""
_UNKNOWN_PEER = ("Could not find the input entity", "No user has")

T = TypeVar("T")


# --- the client boundary ---


class TelegramClientLike(Protocol):
    """The Telethon calls ingest makes; ``telethon.TelegramClient`` satisfies it as it is.

    ``__call__`` is used for exactly two raw requests: ``messages.GetDialogFiltersRequest``
    (folders) and ``channels.GetFullChannelRequest`` (a channel's discussion group). The
    client ``takeout()`` yields satisfies it too.
    """

    session: Any

    async def connect(self) -> Any:
        """Open the connection."""

    async def disconnect(self) -> Any:
        """Close the connection."""

    async def is_user_authorized(self) -> bool:
        """Whether the session belongs to a signed-in account."""

    async def get_me(self) -> Any:
        """The signed-in ``User``."""

    async def get_entity(self, entity: Any) -> Any:
        """A ``User`` / ``Chat`` / ``Channel`` for an id, username, link or input peer."""

    def iter_dialogs(self, limit: int | None = None, *, ignore_migrated: bool = False) -> Any:
        """The account's dialogs (custom ``Dialog`` objects), newest first."""

    def iter_messages(
        self,
        entity: Any,
        limit: int | None = None,
        *,
        offset_date: datetime | None = None,
        max_id: int = 0,
        min_id: int = 0,
        reverse: bool = False,
        reply_to: int | None = None,
    ) -> Any:
        """Messages of a chat (or, with ``reply_to``, of one thread), as an async iterator."""

    async def get_messages(self, entity: Any, *, ids: Sequence[int]) -> Any:
        """The messages with ``ids`` in order; ``None`` where a message no longer exists."""

    async def send_code_request(self, phone: str) -> Any:
        """Send a login code; returns ``auth.SentCode`` with its ``phone_code_hash``."""

    async def sign_in(
        self,
        phone: str | None = None,
        code: str | int | None = None,
        *,
        password: str | None = None,
        phone_code_hash: str | None = None,
    ) -> Any:
        """Sign in with the code, or with the two-step password after the code."""

    async def download_media(self, message: Any, file: Any = None) -> Any:
        """Download a message's media to ``file`` (a path, or ``bytes`` for the content)."""

    async def __call__(self, request: Any) -> Any:
        """Send a raw request."""

    def takeout(self, finalize: bool = True, **kinds: bool | None) -> Any:
        """An async context manager whose client sends its requests in a takeout session.

        Entering it raises ``TakeoutInitDelayError`` until the user allows the export.
        """


# --- sessions and the real client ---


def session_path(home: Path, account: str) -> Path:
    """Where the session of ``account`` lives: ``<home>/sessions/<account>.session``.

    Raises:
        InvalidArgument: the account name could escape the sessions directory.
    """
    if not _ACCOUNT_RE.match(account) or account in {".", ".."}:
        raise InvalidArgument(
            f"{account!r} is not a valid account name",
            hint="use letters, digits, '.', '_' or '-'",
            metadata={"field": "account"},
        )
    return home / SESSIONS_DIR / f"{account}{SESSION_SUFFIX}"


def read_session(home: Path, account: str) -> str:
    """The session string of ``account``, read once into memory.

    Raises:
        NotAuthorized: there is no session file (or it is empty) for this account.
    """
    path = session_path(home, account)
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        text = ""
    if not text:
        raise NotAuthorized(
            f"no Telegram session for account {account!r}",
            hint="run `chatseek auth` to sign in",
            metadata={"account": account},
        )
    return text


def open_client(session: str, api_id: int, api_hash: str) -> Any:
    """A ``telethon.TelegramClient`` over an in-memory copy of ``session`` (not connected).

    Telethon's own flood sleeping is off, so every wait reaches the caller's ``FloodPolicy``.
    """
    return telethon.TelegramClient(
        StringSession(session), api_id, api_hash, flood_sleep_threshold=0, receive_updates=False
    )


# --- flood waits ---


FloodNotice = Callable[[float], None]
"""Told the seconds of every flood wait being slept through (0 once it is over)."""


@dataclass
class FloodPolicy:
    """Sleeps through short flood waits and turns longer ones into ``FloodWait``.

    A wait is slept through when it is at most ``threshold_s`` and ends before ``deadline``
    (a ``clock`` reading; ``None`` = no deadline), at most ``MAX_FLOOD_RETRIES`` times in a row
    without progress in between. ``FLOOD_PREMIUM_WAIT`` (a wait Telegram imposes on accounts
    without Premium) is treated as a flood wait. ``on_wait`` hears each wait slept through.
    """

    threshold_s: float = FLOOD_SLEEP_THRESHOLD_S
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    deadline: float | None = None
    slept_s: float = field(default=0.0)
    on_wait: FloodNotice | None = None

    async def wait(self, exc: BaseException, attempt: int) -> None:
        """Sleep through the flood wait ``exc`` (the ``attempt``-th in a row), or refuse it.

        Raises:
            FloodWait: the wait is too long, would pass the deadline, or keeps coming back.
        """
        seconds = float(getattr(exc, "seconds", 0) or 0)
        too_long = seconds > self.threshold_s
        past_deadline = self.deadline is not None and self.clock() + seconds > self.deadline
        if too_long or past_deadline or attempt > MAX_FLOOD_RETRIES:
            raise _flood(seconds) from exc
        log.info("telegram flood wait of %.0f s: sleeping through it", seconds)
        if self.on_wait is not None:
            self.on_wait(seconds)
        await self.sleep(seconds)
        self.slept_s += seconds
        if self.on_wait is not None:
            self.on_wait(0.0)

    async def call(self, request: Callable[[], Awaitable[T]]) -> T:
        """Run ``request()``; retry it after sleeping through an acceptable flood wait.

        Raises:
            FloodWait: the wait is too long, would pass the deadline, or keeps coming back;
                ``retry_after_s`` says how long Telegram asked to wait.
        """
        attempt = 0
        while True:
            try:
                return await request()
            except _FLOOD_ERRORS as exc:
                attempt += 1
                await self.wait(exc, attempt)


@dataclass
class Fetched:
    """What one resumable message iteration returned, and what stopped it early.

    Attributes:
        messages: the messages in the order they came (every one Telegram sent before a stop).
        stop: ``None`` when the iteration ran to its end; else a ``FloodWait`` too long to
            sleep through, the error Telegram refused the chat with (see
            ``unavailable_reason``), or its refusal of the session (signed out, revoked).
            What came before it is in ``messages``.
    """

    messages: list[Any]
    stop: BaseException | None = None


async def fetch_messages(
    client: TelegramClientLike,
    policy: FloodPolicy,
    peer: Any,
    limit: int | None,
    *,
    reverse: bool,
    **kwargs: Any,
) -> Fetched:
    """Iterate ``client.iter_messages`` and keep every message it yields, across flood waits.

    Telethon pages a history 100 messages per request, and a flood wait can strike any of
    them. After one is slept through, the iteration starts again just after the last message
    received (``min_id`` oldest first, ``max_id`` newest first), so nothing is fetched twice.
    A wait the policy refuses, or a refusal of the chat or of the session mid-way, ends the
    iteration with what came before it. Any other error propagates.
    """
    got: list[Any] = []
    attempt = 0
    while True:
        left = None if limit is None else limit - len(got)
        if left is not None and left <= 0:
            return Fetched(got)
        args = dict(kwargs)
        if got:
            if reverse:
                args["min_id"] = max(int(args.get("min_id") or 0), int(got[-1].id))
                args.pop("offset_date", None)
            else:
                args["max_id"] = int(got[-1].id)
        before = len(got)
        try:
            async for message in client.iter_messages(peer, left, reverse=reverse, **args):
                got.append(message)
            return Fetched(got)
        except _FLOOD_ERRORS as exc:
            attempt = 1 if len(got) > before else attempt + 1
            try:
                await policy.wait(exc, attempt)
            except FloodWait as stop:
                return Fetched(got, stop)
        except Exception as exc:
            if unavailable_reason(exc) is None and not isinstance(exc, errors.UnauthorizedError):
                raise
            return Fetched(got, exc)


def _flood(wait: float) -> FloodWait:
    return FloodWait(
        f"Telegram asked to wait {wait:.0f} s before the next request",
        hint="run it again later; everything fetched so far is stored",
        retry_after_s=wait,
    )


async def collect(iterator: Any) -> list[Any]:
    """Drain one of the client's async iterators into a list."""
    return [item async for item in iterator]


def unavailable_reason(exc: BaseException) -> str | None:
    """A short, stable reason when ``exc`` means Telegram refuses a chat, else ``None``.

    Besides Telegram's own refusals this covers Telethon's ``ValueError`` for a peer the
    session has never seen.
    """
    if isinstance(exc, UNAVAILABLE_ERRORS):
        return type(exc).__name__.removesuffix("Error")
    if isinstance(exc, ValueError) and any(text in str(exc) for text in _UNKNOWN_PEER):
        return "UnknownPeer"
    return None


# --- peers, folders and discussion groups ---


def input_peer(chat_id: int, access_hash: int | None, *, is_self: bool = False) -> Any:
    """An input peer for a stored chat, or its marked id when no access hash is known.

    Telethon accepts either; the id only works once this client has seen the chat.
    """
    if is_self:
        return types.InputPeerSelf()
    if chat_id <= -CHANNEL_ID_OFFSET:
        if access_hash is None:
            return chat_id
        return types.InputPeerChannel(
            channel_id=-chat_id - CHANNEL_ID_OFFSET, access_hash=access_hash
        )
    if chat_id < 0:
        return types.InputPeerChat(chat_id=-chat_id)
    if access_hash is None:
        return chat_id
    return types.InputPeerUser(user_id=chat_id, access_hash=access_hash)


def folder_title(folder: Any) -> str:
    """A folder's title as plain text (newer layers wrap it in ``TextWithEntities``)."""
    title = getattr(folder, "title", "")
    return str(getattr(title, "text", title) or "")


async def get_folders(client: TelegramClientLike) -> list[Any]:
    """The account's chat folders (``DialogFilter`` / ``DialogFilterChatlist``)."""
    result = await client(functions.messages.GetDialogFiltersRequest())
    filters = getattr(result, "filters", result)
    return [f for f in filters if isinstance(f, types.DialogFilter | types.DialogFilterChatlist)]


async def get_linked_chat(client: TelegramClientLike, channel: Any) -> Any | None:
    """The discussion group entity of a broadcast channel, or ``None`` when it has none."""
    full = await client(functions.channels.GetFullChannelRequest(channel=channel))
    linked = getattr(full.full_chat, "linked_chat_id", None)
    if not linked:
        return None
    for chat in full.chats:
        if chat.id == linked and isinstance(chat, types.Channel | types.ChannelForbidden):
            return chat
    return types.PeerChannel(channel_id=linked)


# --- conversion: chats ---


def _username(entity: Any) -> str | None:
    name = getattr(entity, "username", None)
    if name:
        return str(name)
    for extra in getattr(entity, "usernames", None) or []:
        if getattr(extra, "active", False):
            return str(extra.username)
    return None


def chat_record(entity: Any) -> ExportChat:
    """The ``ExportChat`` of a Telethon ``User`` / ``Chat`` / ``Channel`` (or forbidden one).

    Raises:
        TypeError: ``entity`` is not a chat-like Telethon object.
    """
    if isinstance(entity, types.User):
        if entity.is_self:
            kind, export_type, title = "saved", "saved_messages", SAVED_MESSAGES_TITLE
        elif entity.bot:
            kind, export_type, title = "bot", "bot_chat", utils.get_display_name(entity)
        else:
            kind, export_type, title = "private", "personal_chat", utils.get_display_name(entity)
        return ExportChat(
            chat_id=utils.get_peer_id(entity),
            raw_id=entity.id,
            type=kind,
            title=title,
            username=_username(entity),
            export_type=export_type,
            is_left=bool(entity.deleted),
        )
    if isinstance(entity, types.Chat | types.ChatForbidden):
        return ExportChat(
            chat_id=utils.get_peer_id(entity),
            raw_id=entity.id,
            type="group",
            title=entity.title or "",
            username=None,
            export_type="private_group",
            is_left=isinstance(entity, types.ChatForbidden)
            or bool(getattr(entity, "left", False) or getattr(entity, "deactivated", False)),
        )
    if isinstance(entity, types.Channel | types.ChannelForbidden):
        username = _username(entity)
        if entity.broadcast:
            kind = "channel"
        elif getattr(entity, "forum", False):
            kind = "forum"
        else:
            kind = "supergroup"
        visibility = "public" if username else "private"
        noun = "channel" if kind == "channel" else "supergroup"
        return ExportChat(
            chat_id=utils.get_peer_id(entity),
            raw_id=entity.id,
            type=kind,
            title=entity.title or "",
            username=username,
            export_type=f"{visibility}_{noun}",
            is_left=isinstance(entity, types.ChannelForbidden) or bool(entity.left),
        )
    raise TypeError(f"not a chat entity: {type(entity).__name__}")


# --- conversion: messages ---

_ENTITY_TYPES: dict[type[Any], str] = {
    types.MessageEntityMention: "mention",
    types.MessageEntityMentionName: "mention_name",
    types.MessageEntityHashtag: "hashtag",
    types.MessageEntityCashtag: "cashtag",
    types.MessageEntityBotCommand: "bot_command",
    types.MessageEntityUrl: "link",
    types.MessageEntityTextUrl: "text_link",
    types.MessageEntityEmail: "email",
    types.MessageEntityPhone: "phone",
    types.MessageEntityBold: "bold",
    types.MessageEntityItalic: "italic",
    types.MessageEntityUnderline: "underline",
    types.MessageEntityStrike: "strikethrough",
    types.MessageEntityCode: "code",
    types.MessageEntityPre: "pre",
    types.MessageEntityBankCard: "bank_card",
    types.MessageEntitySpoiler: "spoiler",
    types.MessageEntityCustomEmoji: "custom_emoji",
    types.MessageEntityBlockquote: "blockquote",
}

_ACTION_NAMES: dict[type[Any], str] = {
    types.MessageActionChatCreate: "create_group",
    types.MessageActionChatEditTitle: "edit_group_title",
    types.MessageActionChatEditPhoto: "edit_group_photo",
    types.MessageActionChatDeletePhoto: "delete_group_photo",
    types.MessageActionChatAddUser: "invite_members",
    types.MessageActionChatDeleteUser: "remove_members",
    types.MessageActionChatJoinedByLink: "join_group_by_link",
    types.MessageActionChatJoinedByRequest: "join_group_by_request",
    types.MessageActionChannelCreate: "create_channel",
    types.MessageActionChatMigrateTo: "migrate_to_supergroup",
    types.MessageActionChannelMigrateFrom: "migrate_from_group",
    types.MessageActionPinMessage: "pin_message",
    types.MessageActionHistoryClear: "clear_history",
    types.MessageActionGameScore: "score_in_game",
    types.MessageActionPhoneCall: "phone_call",
    types.MessageActionScreenshotTaken: "take_screenshot",
    types.MessageActionCustomAction: "custom_action",
    types.MessageActionBotAllowed: "allow_sending_messages",
    types.MessageActionContactSignUp: "joined_telegram",
    types.MessageActionGroupCall: "group_call",
    types.MessageActionInviteToGroupCall: "invite_to_group_call",
    types.MessageActionSetMessagesTTL: "set_messages_ttl",
    types.MessageActionGroupCallScheduled: "group_call_scheduled",
    types.MessageActionSetChatTheme: "edit_chat_theme",
    types.MessageActionTopicCreate: "topic_created",
    types.MessageActionTopicEdit: "topic_edit",
    types.MessageActionGiftPremium: "send_premium_gift",
    types.MessageActionSetChatWallPaper: "set_chat_wallpaper",
    types.MessageActionBoostApply: "boost_apply",
}
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _marked_kind(marked: int) -> str:
    bare, peer_cls = utils.resolve_id(marked)
    if peer_cls is types.PeerChannel:
        return "channel"
    if peer_cls is types.PeerChat:
        return "chat"
    return "user"


def _entities(text: str, raw: Sequence[Any] | None) -> list[dict[str, Any]]:
    if not raw:
        return []
    wide = helpers.add_surrogate(text)
    out: list[dict[str, Any]] = []
    for entity in raw:
        kind = _ENTITY_TYPES.get(type(entity), "unknown")
        piece = helpers.del_surrogate(wide[entity.offset : entity.offset + entity.length])
        item: dict[str, Any] = {"type": kind, "text": piece}
        if kind == "link":
            item["href"] = piece
        elif kind == "text_link":
            item["href"] = entity.url
        elif kind == "mention_name":
            item["user_id"] = entity.user_id
        elif kind == "custom_emoji":
            item["document_id"] = str(entity.document_id)
        elif kind == "pre" and entity.language:
            item["language"] = entity.language
        out.append(item)
    return out


def _buttons(markup: Any) -> tuple[list[list[dict[str, Any]]], bool]:
    if not isinstance(markup, types.ReplyInlineMarkup):
        return [], False
    rows: list[list[dict[str, Any]]] = []
    has_url = False
    for row in markup.rows:
        out: list[dict[str, Any]] = []
        for button in row.buttons:
            kind_obj = getattr(button, "type", button)
            url = getattr(kind_obj, "url", None)
            name = _CAMEL.sub("_", type(kind_obj).__name__)
            for prefix in ("Inline_Button_Type_", "Keyboard_Button_", "Button_Type_"):
                name = name.removeprefix(prefix)
            entry: dict[str, Any] = {"type": name.lower(), "text": button.text}
            if url:
                entry["type"] = "url"
                entry["data"] = url
                has_url = True
            out.append(entry)
        rows.append(out)
    return rows, has_url


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


def _media(media: Any) -> ExportMedia | None:
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


def _names(entities: Sequence[Any] | None) -> list[str]:
    return [utils.get_display_name(e) for e in entities or [] if e is not None]


def _service(message: Any) -> tuple[str, dict[str, Any]]:
    action = message.action
    name = _ACTION_NAMES.get(type(action))
    if name is None:
        name = _CAMEL.sub("_", type(action).__name__.removeprefix("MessageAction")).lower()
    extra: dict[str, Any] = {}
    actors = getattr(message, "action_entities", None)
    if isinstance(action, types.MessageActionChatCreate | types.MessageActionChannelCreate):
        extra["title"] = action.title
    if isinstance(
        action,
        types.MessageActionChatCreate
        | types.MessageActionChatAddUser
        | types.MessageActionChatDeleteUser,
    ):
        extra["members"] = _names(actors)
    elif isinstance(action, types.MessageActionChatEditTitle):
        extra["title"] = action.title
    elif isinstance(action, types.MessageActionChatJoinedByLink):
        inviter = _names(actors)
        if inviter:
            extra["inviter"] = inviter[0]
    elif isinstance(action, types.MessageActionChatMigrateTo):
        extra["channel_id"] = -(CHANNEL_ID_OFFSET + action.channel_id)
    elif isinstance(action, types.MessageActionChannelMigrateFrom):
        extra["title"] = action.title
        extra["chat_id"] = -action.chat_id
    elif isinstance(action, types.MessageActionPinMessage):
        reply = message.reply_to
        if isinstance(reply, types.MessageReplyHeader) and reply.reply_to_msg_id:
            extra["message_id"] = reply.reply_to_msg_id
    elif isinstance(action, types.MessageActionPhoneCall | types.MessageActionGroupCall):
        if action.duration is not None:
            extra["duration_seconds"] = action.duration
    elif isinstance(action, types.MessageActionTopicCreate):
        extra["title"] = action.title
    elif isinstance(action, types.MessageActionTopicEdit):
        if action.title is not None:
            extra["new_title"] = action.title
        for flag in ("closed", "hidden"):
            if getattr(action, flag) is not None:
                extra[flag] = bool(getattr(action, flag))
    elif isinstance(action, types.MessageActionSetMessagesTTL):
        extra["period"] = action.period
    return name, extra


def _reactions(raw: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for result in getattr(raw, "results", None) or []:
        reaction = result.reaction
        if isinstance(reaction, types.ReactionEmoji):
            key = reaction.emoticon
        elif isinstance(reaction, types.ReactionCustomEmoji):
            key = f"custom:{reaction.document_id}"
        elif isinstance(reaction, types.ReactionPaid):
            key = "paid"
        else:
            continue
        out[key] = out.get(key, 0) + int(result.count)
    return out


def _topic(message: Any, reply: Any, chat: ExportChat) -> int | None:
    if chat.type != "forum":
        return None
    if isinstance(getattr(message, "action", None), types.MessageActionTopicCreate):
        return int(message.id)
    if isinstance(reply, types.MessageReplyHeader) and reply.forum_topic:
        return int(reply.reply_to_top_id or reply.reply_to_msg_id or GENERAL_TOPIC_ID)
    return GENERAL_TOPIC_ID


def _sender(
    message: Any, chat: ExportChat, self_id: int | None
) -> tuple[int | None, str | None, str]:
    marked = message.sender_id
    if marked is None and message.out and self_id is not None:
        marked = self_id
    if marked is None:
        return None, None, ""
    entity = message.sender
    if entity is not None:
        name = utils.get_display_name(entity)
    elif marked == chat.chat_id:
        name = chat.title
    else:
        name = ""
    return utils.resolve_id(marked)[0], _marked_kind(marked), name


def _forward(message: Any) -> tuple[str | None, int | None, str | None]:
    fwd = message.fwd_from
    if fwd is None:
        return None, None, None
    name = fwd.from_name
    forward = message.forward
    if not name and forward is not None:
        origin = forward.sender or forward.chat
        name = utils.get_display_name(origin) if origin is not None else None
    if not name and fwd.post_author:
        name = fwd.post_author
    origin_id = utils.get_peer_id(fwd.from_id) if fwd.from_id is not None else None
    return name or None, origin_id, fwd.saved_from_name or None


def to_records(message: Any, chat: ExportChat, *, self_id: int | None = None) -> ExportMessage:
    """Convert a real Telethon ``Message`` / ``MessageService`` of ``chat`` into its record.

    Args:
        message: a message as Telethon returns it (sender and forward entities attached).
        chat: the record of the chat the message is in (its ``peer_id``).
        self_id: the signed-in user's id, the sender of outgoing messages without ``from_id``.

    Raises:
        TypeError: ``message`` is not a Telethon message (``MessageEmpty`` included).
        ValueError: the message belongs to another chat than ``chat``.
    """
    if not isinstance(message, types.Message | types.MessageService):
        raise TypeError(f"not a Telethon message: {type(message).__name__}")
    if utils.get_peer_id(message.peer_id) != chat.chat_id:
        raise ValueError(f"message {message.id} is not in chat {chat.chat_id}")
    service = isinstance(message, types.MessageService)
    text = (getattr(message, "message", None) or "") if not service else ""
    entities = _entities(text, getattr(message, "entities", None))
    has_link = any(e["type"] in ("link", "text_link") for e in entities) or bool(
        text and _URL_RE.search(text)
    )
    buttons, url_button = _buttons(getattr(message, "reply_markup", None))
    media_obj = getattr(message, "media", None)
    has_link = has_link or url_button or isinstance(media_obj, types.MessageMediaWebPage)
    reply = message.reply_to
    reply_to_msg_id = reply_peer = None
    if isinstance(reply, types.MessageReplyHeader):
        reply_to_msg_id = reply.reply_to_msg_id
        if reply.reply_to_peer_id is not None:
            reply_peer = utils.get_peer_id(reply.reply_to_peer_id)
    sender_id, sender_kind, sender_name = _sender(message, chat, self_id)
    forwarded_from, forwarded_from_id, saved_from = (
        _forward(message)
        if not service
        else (
            None,
            None,
            None,
        )
    )
    action_name, action_extra = _service(message) if service else (None, {})
    via = message.via_bot if not service else None
    reactions = _reactions(getattr(message, "reactions", None))
    edit_date = getattr(message, "edit_date", None)
    if getattr(message, "edit_hide", False):
        edit_date = None
    return ExportMessage(
        chat_id=chat.chat_id,
        msg_id=int(message.id),
        date=int(message.date.timestamp()),
        kind="service" if service else "message",
        edit_date=int(edit_date.timestamp()) if edit_date is not None else None,
        sender_id=sender_id,
        sender_kind=sender_kind,
        sender_name=sender_name,
        text=text,
        entities=entities,
        reply_to_msg_id=reply_to_msg_id,
        reply_to_peer_id=reply_peer,
        topic_id=_topic(message, reply, chat),
        forwarded_from=forwarded_from,
        forwarded_from_id=forwarded_from_id,
        saved_from=saved_from if chat.type == "saved" else None,
        via_bot=f"@{via.username}" if via is not None and getattr(via, "username", None) else None,
        author=getattr(message, "post_author", None) if not service else None,
        reactions=reactions,
        reactions_total=sum(reactions.values()),
        service_action=action_name,
        service_extra=action_extra,
        media=None if service else _media(media_obj),
        has_link=has_link,
        buttons=buttons,
        raw_type="service" if service else "message",
        grouped_id=getattr(message, "grouped_id", None) if not service else None,
    )
