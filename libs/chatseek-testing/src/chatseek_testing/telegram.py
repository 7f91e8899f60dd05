"""A strict fake Telegram for tests: real Telethon objects and real Telethon errors, no sockets.

Owns ``FakeTelegram``, an in-memory Telegram account (users, legacy groups, supergroups, forums,
channels with discussion groups, folders) that implements ``TelegramClientLike``, and
``fake_factory``, which hands a service the fake whose session string it was given.
Invariants: history is served as Telegram serves it — ``messages.getHistory`` /
``messages.getReplies`` pages of at most 100 with ``offset_id``/``add_offset``/``limit``,
driven by Telethon's own ``iter_messages`` iterator; every message handed out is a fresh
``telethon.tl.types.Message`` / ``MessageService`` with its entities attached as Telethon
attaches them; the client's entity cache starts empty on every (re)connect, as a
``StringSession`` client's does, and learns only from responses; it refuses what Telegram or
Telethon refuse (unseen peers, wrong access hashes, private chats, wrong codes, a missing
two-step password, requests while disconnected or signed out, a takeout the user has not
allowed) and raises scheduled flood waits on any request; every request is logged in
``requests``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeAlias

from telethon import errors, utils
from telethon._updates import EntityCache
from telethon.client.messages import _MessagesIter
from telethon.tl import functions, types
from telethon.tl.custom import Dialog

from chatseek_core import db
from chatseek_ingest.schema import MIGRATIONS, OWNER

__all__ = ["FakeTelegram", "access_hash_of", "fake_factory", "ingest_db", "photo"]

BASE_DATE = datetime(2024, 1, 1, tzinfo=UTC)
MESSAGE_SPACING = timedelta(minutes=1)
DEFAULT_ME_ID = 1000
DEFAULT_PHONE = "+15550000000"
DEFAULT_CODE = "12345"
PHONE_CODE_HASH = "fake-phone-code-hash"
CHANNEL_OFFSET = 1_000_000_000_000
_HASH_PRIME = 7919
_HASH_SALT = 12345
_HASH_MASK = 0x7FFFFFFFFFFF
_NO_AUTH_METHODS = frozenset({"send_code_request", "sign_in"})
PAGE_LIMIT = 100
"""The most messages Telegram returns for one ``getHistory`` / ``getReplies`` request."""
SESSION_PREFIX = "fake-session:"

Entity: TypeAlias = "types.User | types.Chat | types.Channel"
"""A chat's or a sender's Telethon entity (what ``add_user`` and its siblings return)."""
ChatRef: TypeAlias = "Entity | int"
"""A chat as the world-building methods take it: its entity or its marked id."""


def ingest_db(path: Path) -> db.Connection:
    """A real, migrated ``ingest.db`` at ``path`` (the file and its folder are created)."""
    conn = db.connect(path)
    db.migrate(conn, OWNER, MIGRATIONS)
    return conn


def access_hash_of(bare_id: int) -> int:
    """The access hash the fake gives the user or channel ``bare_id``."""
    return (bare_id * _HASH_PRIME + _HASH_SALT) & _HASH_MASK


@dataclass
class _Chat:
    entity: Entity
    messages: dict[int, tuple[type[Any], dict[str, Any]]] = field(default_factory=dict)
    forbidden: type[errors.RPCError] | None = None
    in_dialogs: bool = True
    archived: bool = False
    linked: int | None = None
    next_id: int = 1
    copies: dict[tuple[int, int], int] = field(default_factory=dict)


@dataclass
class _Injected:
    error: Callable[[], Exception]
    remaining: int
    method: str | None
    every: int | None = None
    times: int = 1


class _FakeSession:
    """Stands in for ``StringSession``: ``save()`` is the session string once signed in."""

    def __init__(self, owner: FakeTelegram) -> None:
        self._owner = owner

    takeout_id: int | None = None

    def save(self) -> str:
        return f"{SESSION_PREFIX}{self._owner.me.id}" if self._owner.authorized else ""


def fake_factory(*accounts: FakeTelegram) -> Callable[[str, int, str], Any]:
    """A ``TelegramFactory`` that hands out the fake whose session string it is given.

    A session string no fake issued (or an empty one) gets a fresh fake that is signed out, as
    Telegram treats an unknown or revoked authorisation key.
    """

    def factory(session: str, api_id: int, api_hash: str) -> Any:
        for account in accounts:
            if session and session == f"{SESSION_PREFIX}{account.me.id}":
                return account
        return FakeTelegram(authorized=False, connected=False)

    return factory


class FakeTelegram:
    """An in-memory Telegram account implementing ``TelegramClientLike``.

    Args:
        me_id: the signed-in user's id.
        me_name: the signed-in user's first name.
        phone: the only phone number ``send_code_request`` accepts.
        code: the only login code ``sign_in`` accepts.
        password: the two-step password, or ``None`` for an account without one.
        authorized: whether the client starts signed in (sync tests) or not (login tests).
        connected: whether the client starts connected.

    Attributes:
        requests: ``(method, marked chat id)`` of every request, in order. History pages are
            ``get_history`` and ``get_replies``; a request inside a takeout session is
            ``takeout:<method>``.
        hold: when set, every request waits for this event (and sets ``holding`` first).
        on_request: called with the method name of every request (to drive a test clock).
        takeout_delay: when set, the account has not allowed a data export (takeout) in the
            app: starting one raises ``TakeoutInitDelayError`` with these seconds.
        takeouts: ``(takeout id, finished successfully)`` of every takeout session, in order
            (``None`` while one is open).
        pages: ``(marked chat id, message ids newest first)`` of every history page served.
    """

    def __init__(
        self,
        *,
        me_id: int = DEFAULT_ME_ID,
        me_name: str = "Me",
        phone: str = DEFAULT_PHONE,
        code: str = DEFAULT_CODE,
        password: str | None = None,
        authorized: bool = True,
        connected: bool = True,
    ) -> None:
        self.phone = phone
        self.code = code
        self.password = password
        self.authorized = authorized
        self.connected = connected
        self.session = _FakeSession(self)
        self.requests: list[tuple[str, int | None]] = []
        self.hold: asyncio.Event | None = None
        self.holding = asyncio.Event()
        self.on_request: Callable[[str], None] | None = None
        self.files: dict[tuple[int, int], bytes] = {}
        self._chats: dict[int, _Chat] = {}
        self._folders: dict[int, types.DialogFilter] = {}
        self._seen: set[int] = set()
        self._injected: list[_Injected] = []
        self._global_ids = itertools.count(1)
        self._clock = itertools.count()
        self._code_sent = False
        self._code_ok = False
        self._self_id = me_id
        self._mb_entity_cache = EntityCache()
        self.takeout_delay: int | None = None
        self.takeouts: list[tuple[int, bool | None]] = []
        self.pages: list[tuple[int, list[int]]] = []
        self._albums = 0
        self.me = types.User(
            id=me_id,
            is_self=True,
            access_hash=access_hash_of(me_id),
            first_name=me_name,
            phone=phone.lstrip("+"),
        )
        self._add(self.me)
        self._seen.add(me_id)

    # --- building the world ---

    def _add(self, entity: Entity, *, dialog: bool = True) -> _Chat:
        chat = _Chat(entity=entity, in_dialogs=dialog)
        self._chats[utils.get_peer_id(entity)] = chat
        return chat

    def add_user(
        self,
        user_id: int,
        first_name: str,
        *,
        last_name: str | None = None,
        username: str | None = None,
        bot: bool = False,
        contact: bool = False,
        dialog: bool = True,
    ) -> types.User:
        """Create a user (and a private chat with them unless ``dialog`` is False)."""
        user = types.User(
            id=user_id,
            access_hash=access_hash_of(user_id),
            first_name=first_name,
            last_name=last_name,
            username=username,
            bot=bot,
            contact=contact,
        )
        self._add(user, dialog=dialog)
        return user

    def add_group(self, chat_id: int, title: str, *, dialog: bool = True) -> types.Chat:
        """Create a legacy group the account is a member of."""
        group = types.Chat(
            id=chat_id,
            title=title,
            photo=types.ChatPhotoEmpty(),
            participants_count=2,
            date=BASE_DATE,
            version=1,
        )
        self._add(group, dialog=dialog)
        return group

    def add_channel(
        self,
        channel_id: int,
        title: str,
        *,
        username: str | None = None,
        megagroup: bool = False,
        forum: bool = False,
        dialog: bool = True,
    ) -> types.Channel:
        """Create a broadcast channel, or a supergroup (``megagroup``), or a forum."""
        channel = types.Channel(
            id=channel_id,
            title=title,
            photo=types.ChatPhotoEmpty(),
            date=BASE_DATE,
            access_hash=access_hash_of(channel_id),
            username=username,
            broadcast=not megagroup and not forum,
            megagroup=megagroup or forum,
            forum=forum,
        )
        self._add(channel, dialog=dialog)
        return channel

    def add_folder(
        self,
        folder_id: int,
        title: str,
        chats: Iterable[Entity] = (),
        *,
        exclude: Iterable[Entity] = (),
        groups: bool = False,
        broadcasts: bool = False,
        contacts: bool = False,
        non_contacts: bool = False,
        bots: bool = False,
    ) -> types.DialogFilter:
        """Create (or replace) a chat folder listing ``chats`` and/or chats matching flags."""
        folder = types.DialogFilter(
            id=folder_id,
            title=types.TextWithEntities(text=title, entities=[]),
            pinned_peers=[],
            include_peers=[utils.get_input_peer(e) for e in chats],
            exclude_peers=[utils.get_input_peer(e) for e in exclude],
            groups=groups or None,
            broadcasts=broadcasts or None,
            contacts=contacts or None,
            non_contacts=non_contacts or None,
            bots=bots or None,
        )
        self._folders[folder_id] = folder
        return folder

    def remove_folder(self, folder_id: int) -> None:
        """Delete a chat folder."""
        del self._folders[folder_id]

    def entity(self, chat_id: int) -> Entity:
        """The current entity of the chat with marked id ``chat_id``."""
        return self._chats[chat_id].entity

    def _chat_of(self, chat: _Chat | ChatRef) -> _Chat:
        if isinstance(chat, _Chat):
            return chat
        key = chat if isinstance(chat, int) else utils.get_peer_id(chat)
        return self._chats[key]

    def _next_id(self, chat: _Chat) -> int:
        if isinstance(chat.entity, types.Channel):
            value = chat.next_id
            chat.next_id += 1
            return value
        return next(self._global_ids)

    def _next_date(self) -> datetime:
        return BASE_DATE + MESSAGE_SPACING * next(self._clock)

    def send(
        self,
        chat: ChatRef,
        text: str = "",
        *,
        sender: Any = None,
        date: datetime | None = None,
        reply_to: int | None = None,
        topic: int | None = None,
        media: Any = None,
        entities: Sequence[Any] | None = None,
        reactions: dict[str, int] | None = None,
        fwd_from: Any = None,
        post_author: str | None = None,
        via_bot_id: int | None = None,
        reply_markup: Any = None,
        out: bool | None = None,
        edit_date: datetime | None = None,
        grouped_id: int | None = None,
    ) -> Any:
        """Append a message to ``chat`` and return it as Telethon would (entities attached).

        ``sender`` is a user or channel entity (``None``: the channel itself for a broadcast
        post, the account otherwise). ``topic`` puts it in a forum topic. ``grouped_id`` makes
        it part of an album (see ``album``).
        """
        target = self._chat_of(chat)
        msg_id = self._next_id(target)
        header = None
        if topic is not None:
            header = types.MessageReplyHeader(
                forum_topic=True,
                reply_to_msg_id=reply_to or topic,
                reply_to_top_id=topic if reply_to else None,
            )
        elif reply_to is not None:
            header = types.MessageReplyHeader(reply_to_msg_id=reply_to)
        kwargs = self._base(target, msg_id, sender, date, out)
        kwargs.update(
            message=text,
            reply_to=header,
            media=media,
            entities=list(entities) if entities else None,
            reactions=_reactions(reactions),
            fwd_from=fwd_from,
            post_author=post_author,
            via_bot_id=via_bot_id,
            reply_markup=reply_markup,
            edit_date=edit_date,
            grouped_id=grouped_id,
        )
        target.messages[msg_id] = (types.Message, kwargs)
        return self._materialise(target, msg_id)

    def album(
        self,
        chat: ChatRef,
        count: int,
        caption: str = "",
        *,
        sender: Any = None,
        captions: Sequence[str] | None = None,
        reply_to: int | None = None,
    ) -> list[Any]:
        """Send an album of ``count`` photos as Telegram does: one message per photo, one shared
        ``grouped_id``, one date, the caption on the first (or ``captions``, one per photo, as
        the app allows) and ``reply_to`` on every photo; returns the messages."""
        if captions is not None and len(captions) != count:
            raise ValueError("captions must give one caption per photo")
        self._albums += 1
        grouped = 13_000_000_000_000_000 + self._albums
        date = self._next_date()
        return [
            self.send(
                chat,
                captions[n] if captions is not None else (caption if n == 0 else ""),
                sender=sender,
                date=date,
                reply_to=reply_to,
                media=photo(self._albums * 100 + n),
                grouped_id=grouped,
            )
            for n in range(count)
        ]

    def service(
        self,
        chat: ChatRef,
        action: Any,
        *,
        sender: Any = None,
        date: datetime | None = None,
        reply_to: int | None = None,
    ) -> Any:
        """Append a service message (``action`` is a ``MessageAction*``) to ``chat``."""
        target = self._chat_of(chat)
        msg_id = self._next_id(target)
        kwargs = self._base(target, msg_id, sender, date, None)
        kwargs["action"] = action
        if reply_to is not None:
            kwargs["reply_to"] = types.MessageReplyHeader(reply_to_msg_id=reply_to)
        target.messages[msg_id] = (types.MessageService, kwargs)
        return self._materialise(target, msg_id)

    def _base(
        self, chat: _Chat, msg_id: int, sender: Any, date: datetime | None, out: bool | None
    ) -> dict[str, Any]:
        entity = chat.entity
        post = isinstance(entity, types.Channel) and bool(entity.broadcast)
        from_id = None
        if sender is not None:
            from_id = utils.get_peer(sender)
        elif not post:
            from_id = types.PeerUser(self.me.id)
        is_me = from_id == types.PeerUser(self.me.id)
        if isinstance(entity, types.User) and not entity.is_self and not is_me:
            from_id = None  # incoming private messages carry no from_id (layer 119+)
        return {
            "id": msg_id,
            "peer_id": utils.get_peer(entity),
            "date": date or self._next_date(),
            "out": out if out is not None else is_me,
            "post": post or None,
            "from_id": from_id,
        }

    def topic(self, forum: ChatRef, title: str) -> int:
        """Create a forum topic in ``forum``; returns its id (the creating message's id)."""
        created = self.service(
            forum, types.MessageActionTopicCreate(title=title, icon_color=0x6FB9F0)
        )
        return int(created.id)

    def edit(self, chat: ChatRef, msg_id: int, text: str) -> None:
        """Edit a message's text (it gets a new ``edit_date``)."""
        kwargs = self._chat_of(chat).messages[msg_id][1]
        kwargs["message"] = text
        kwargs["edit_date"] = self._next_date()

    def react(self, chat: ChatRef, msg_id: int, counts: dict[str, int]) -> None:
        """Replace a message's reactions with ``counts`` (emoji to count)."""
        self._chat_of(chat).messages[msg_id][1]["reactions"] = _reactions(counts)

    def delete(self, chat: ChatRef, *msg_ids: int) -> None:
        """Delete messages for everyone (a deleted comment lowers its post's reply count)."""
        target = self._chat_of(chat)
        for msg_id in msg_ids:
            del target.messages[msg_id]
        for source in self._chats.values():
            if source.linked is None or self._chats.get(source.linked) is not target:
                continue
            for (_, post_id), copy_id in target.copies.items():
                if post_id in source.messages and "replies" in source.messages[post_id][1]:
                    self._count_replies(source, post_id, target, copy_id)

    def forbid(
        self, chat: ChatRef, error: type[errors.RPCError] = errors.ChannelPrivateError
    ) -> None:
        """Make Telegram refuse ``chat`` with ``error`` (kicked, left, went private)."""
        target = self._chat_of(chat)
        target.forbidden = error
        target.in_dialogs = False

    def allow(self, chat: ChatRef) -> None:
        """Undo ``forbid``."""
        target = self._chat_of(chat)
        target.forbidden = None
        target.in_dialogs = True

    def migrate(self, group: ChatRef, channel_id: int) -> types.Channel:
        """Upgrade a legacy group to a supergroup; returns the new supergroup entity."""
        old = self._chat_of(group)
        title = old.entity.title
        channel = self.add_channel(channel_id, title, megagroup=True)
        self.service(group, types.MessageActionChatMigrateTo(channel_id=channel_id))
        self.service(
            channel, types.MessageActionChannelMigrateFrom(title=title, chat_id=old.entity.id)
        )
        old.entity = types.Chat(
            id=old.entity.id,
            title=title,
            photo=types.ChatPhotoEmpty(),
            participants_count=0,
            date=BASE_DATE,
            version=2,
            deactivated=True,
            migrated_to=types.InputChannel(channel_id, access_hash_of(channel_id)),
        )
        return channel

    def link_discussion(self, channel: ChatRef, group: ChatRef) -> None:
        """Make ``group`` (a supergroup) the discussion group of broadcast ``channel``."""
        self._chat_of(channel).linked = utils.get_peer_id(group)

    def comment(
        self,
        channel: ChatRef,
        post_id: int,
        text: str,
        *,
        sender: Any,
        reply_to: int | None = None,
    ) -> Any:
        """Comment on a channel post in its discussion group; returns the comment.

        The group gets its automatic copy of the post first, as Telegram does, and the post's
        ``replies`` counter follows.
        """
        source = self._chat_of(channel)
        if source.linked is None:
            raise ValueError("the channel has no discussion group")
        group = self._chats[source.linked]
        key = (source.entity.id, post_id)
        copy_id = group.copies.get(key)
        if copy_id is None:
            post_kwargs = source.messages[post_id][1]
            copy_id = self._next_id(group)
            kwargs = self._base(group, copy_id, source.entity, post_kwargs["date"], False)
            kwargs.update(
                message=post_kwargs.get("message", ""),
                fwd_from=types.MessageFwdHeader(
                    date=post_kwargs["date"],
                    from_id=utils.get_peer(source.entity),
                    channel_post=post_id,
                    saved_from_peer=utils.get_peer(source.entity),
                    saved_from_msg_id=post_id,
                ),
            )
            group.messages[copy_id] = (types.Message, kwargs)
            group.copies[key] = copy_id
        made = self.send(group, text, sender=sender, reply_to=reply_to or copy_id)
        if reply_to is not None:
            kwargs = group.messages[made.id][1]
            kwargs["reply_to"] = types.MessageReplyHeader(
                reply_to_msg_id=reply_to, reply_to_top_id=copy_id
            )
        self._count_replies(source, post_id, group, copy_id)
        return self._materialise(group, made.id)

    def _count_replies(self, source: _Chat, post_id: int, group: _Chat, copy_id: int) -> None:
        thread = self._thread(group, copy_id)
        source.messages[post_id][1]["replies"] = types.MessageReplies(
            replies=len(thread),
            replies_pts=0,
            comments=True,
            channel_id=group.entity.id,
            max_id=max(thread) if thread else None,
        )

    def set_file(self, chat: ChatRef, msg_id: int, data: bytes) -> None:
        """The bytes ``download_media`` returns for the media of that message."""
        self.files[(utils.get_peer_id(chat) if not isinstance(chat, int) else chat, msg_id)] = data

    def inject(
        self,
        error: Exception | Callable[[], Exception],
        *,
        at: int = 1,
        method: str | None = None,
        every: int | None = None,
        times: int = 1,
    ) -> None:
        """Raise ``error`` on the ``at``-th request from now (counting only ``method``'s).

        With ``every``, it strikes again every ``every`` requests after that, ``times`` times
        in all (``times=0``: for ever). ``method`` matches the logged name, so
        ``"get_history"`` strikes a page in the middle of a long ``iter_messages``, and
        ``"takeout:get_history"`` only pages fetched inside a takeout session.
        """
        factory: Callable[[], Exception]
        if isinstance(error, Exception):
            fixed = error
            factory = lambda: fixed  # noqa: E731
        else:
            factory = error
        self._injected.append(
            _Injected(error=factory, remaining=at, method=method, every=every, times=times)
        )

    def flood(
        self,
        seconds: int,
        *,
        at: int = 1,
        method: str | None = None,
        every: int | None = None,
        times: int = 1,
        premium: bool = False,
    ) -> None:
        """Raise ``FloodWaitError(seconds)`` (``FloodPremiumWaitError`` when ``premium``) on the
        ``at``-th request from now, and on the schedule ``every``/``times`` gives (see
        ``inject``)."""
        cls = errors.FloodPremiumWaitError if premium else errors.FloodWaitError
        self.inject(
            lambda: cls(request=None, capture=seconds),
            at=at,
            method=method,
            every=every,
            times=times,
        )

    def restart(self) -> None:
        """A new client process over the same session: connected, with an empty entity cache."""
        self.connected = False
        self._forget()
        self.connected = True

    def revoke(self) -> None:
        """Terminate this session from another device: every request is refused from now on."""
        self.authorized = False

    def _forget(self) -> None:
        self._seen = {self.me.id}
        self.session.takeout_id = None

    def stored_ids(self, chat: ChatRef) -> list[int]:
        """The ids of the messages ``chat`` holds, ascending."""
        return sorted(self._chat_of(chat).messages)

    def requested(self, method: str) -> list[int | None]:
        """The chat ids of every request of ``method`` so far."""
        return [chat_id for name, chat_id in self.requests if name == method]

    # --- request plumbing ---

    async def _request(
        self, method: str, chat_id: int | None = None, *, takeout: int | None = None
    ) -> None:
        if not self.connected:
            raise ConnectionError("Cannot send requests while disconnected")
        if method not in _NO_AUTH_METHODS and not self.authorized:
            raise errors.AuthKeyUnregisteredError(request=None)
        if takeout is not None:
            if self.session.takeout_id != takeout:
                raise errors.TakeoutInvalidError(request=None)
            method = f"takeout:{method}"
        self.requests.append((method, chat_id))
        if self.on_request is not None:
            self.on_request(method)
        if self.hold is not None:
            self.holding.set()
            await self.hold.wait()
        for injected in list(self._injected):
            if injected.method is not None and injected.method != method:
                continue
            injected.remaining -= 1
            if injected.remaining > 0:
                continue
            injected.times -= 1
            if injected.every is not None and injected.times != 0:
                injected.remaining = injected.every
            else:
                self._injected.remove(injected)
            raise injected.error()

    def _all_entities(self) -> dict[int, Any]:
        return {marked: chat.entity for marked, chat in self._chats.items()}

    def _materialise(self, chat: _Chat, msg_id: int) -> Any:
        cls, kwargs = chat.messages[msg_id]
        message = cls(**kwargs)
        message._finish_init(self, self._all_entities(), None)
        return message

    def _mark_seen(self, messages: Iterable[Any]) -> None:
        for message in messages:
            self._seen.add(utils.get_peer_id(message.peer_id))
            if message.sender_id is not None:
                self._seen.add(message.sender_id)
            action = getattr(message, "action", None)
            if isinstance(action, types.MessageActionChatMigrateTo):
                self._seen.add(utils.get_peer_id(types.PeerChannel(action.channel_id)))

    def _unknown(self, peer: Any) -> ValueError:
        return ValueError(
            f"Could not find the input entity for {peer!r} ({type(peer).__name__}). Please read "
            "https://docs.telethon.dev/en/stable/concepts/entities.html to find out more details."
        )

    def _by_username(self, name: str) -> _Chat | None:
        wanted = name.lower()
        for chat in self._chats.values():
            username = getattr(chat.entity, "username", None)
            if username and username.lower() == wanted:
                return chat
        return None

    async def _resolve(self, entity: Any) -> _Chat:
        """Telethon's ``get_input_entity``: the local cache first, the network for usernames."""
        if isinstance(entity, str):
            name = utils.parse_username(entity)[0] or entity.lstrip("@")
            await self._request("resolve_username")
            found = self._by_username(name)
            if found is None:
                raise ValueError(f'No user has "{name}" as username')
            self._seen.add(utils.get_peer_id(found.entity))
            return found
        if isinstance(entity, types.InputPeerSelf):
            return self._chats[self.me.id]
        if isinstance(entity, int) or isinstance(
            entity, types.PeerUser | types.PeerChat | types.PeerChannel
        ):
            marked = entity if isinstance(entity, int) else utils.get_peer_id(entity)
            if marked not in self._seen or marked not in self._chats:
                raise self._unknown(utils.get_peer(entity))
            return self._chats[marked]
        if isinstance(entity, types.InputPeerChat):
            chat = self._chats.get(-entity.chat_id)
            if chat is None:
                raise errors.ChatIdInvalidError(request=None)
            return chat
        if isinstance(entity, types.InputPeerChannel | types.InputChannel):
            chat = self._chats.get(-(CHANNEL_OFFSET + entity.channel_id))
            if chat is None or access_hash_of(entity.channel_id) != entity.access_hash:
                raise errors.ChannelInvalidError(request=None)
            return chat
        if isinstance(entity, types.InputPeerUser | types.InputUser):
            chat = self._chats.get(entity.user_id)
            if chat is None or access_hash_of(entity.user_id) != entity.access_hash:
                raise errors.PeerIdInvalidError(request=None)
            return chat
        if isinstance(entity, types.User | types.Chat | types.Channel):
            return await self._resolve(utils.get_input_peer(entity))
        raise TypeError(f"Cannot cast {type(entity).__name__} to any kind of peer.")

    def _readable(self, chat: _Chat) -> None:
        if chat.forbidden is not None:
            raise chat.forbidden(request=None)

    # --- TelegramClientLike ---

    async def connect(self) -> None:
        """Open the (pretend) connection; a client that was disconnected starts a new process.

        chatseek builds a new client over the session string for every pass, and a
        ``StringSession`` keeps no entities, so the entity cache starts empty again.
        """
        if not self.connected:
            self._forget()
        self.connected = True

    async def disconnect(self) -> None:
        """Close the (pretend) connection."""
        self.connected = False

    async def is_user_authorized(self) -> bool:
        """Whether the account is signed in."""
        await self._request("is_user_authorized")
        return self.authorized

    async def get_me(self) -> Any:
        """The signed-in user."""
        await self._request("get_me")
        return self.me

    async def get_entity(self, entity: Any) -> Any:
        """The entity of a chat (its forbidden form when Telegram refuses the chat)."""
        chat = await self._resolve(entity)
        await self._request("get_entity", utils.get_peer_id(chat.entity))
        self._seen.add(utils.get_peer_id(chat.entity))
        current = chat.entity
        if chat.forbidden is not None and isinstance(current, types.Channel):
            return types.ChannelForbidden(
                id=current.id,
                access_hash=current.access_hash,
                title=current.title,
                broadcast=current.broadcast,
                megagroup=current.megagroup,
            )
        if chat.forbidden is not None and isinstance(current, types.Chat):
            return types.ChatForbidden(id=current.id, title=current.title)
        return current

    async def iter_dialogs(
        self, limit: int | None = None, *, ignore_migrated: bool = False
    ) -> AsyncIterator[Any]:
        """The chats the account is in, as Telethon ``Dialog`` objects."""
        await self._request("iter_dialogs")
        yielded = 0
        for marked, chat in list(self._chats.items()):
            if not chat.in_dialogs:
                continue
            if ignore_migrated and getattr(chat.entity, "migrated_to", None) is not None:
                continue
            if limit is not None and yielded >= limit:
                return
            self._seen.add(marked)
            top = max(chat.messages, default=0)
            raw = types.Dialog(
                peer=utils.get_peer(chat.entity),
                top_message=top,
                read_inbox_max_id=top,
                read_outbox_max_id=top,
                unread_count=0,
                unread_mentions_count=0,
                unread_reactions_count=0,
                unread_poll_votes_count=0,
                notify_settings=types.PeerNotifySettings(),
                folder_id=1 if chat.archived else None,
            )
            yielded += 1
            yield Dialog(self, raw, {marked: chat.entity}, None)

    async def get_input_entity(self, entity: Any) -> Any:
        """Telethon's ``get_input_entity``: an input peer from the cache, or a username lookup."""
        chat = await self._resolve(entity)
        if chat.entity.id == self.me.id and isinstance(chat.entity, types.User):
            return types.InputPeerSelf()
        return utils.get_input_peer(chat.entity)

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
        wait_time: float | None = None,
    ) -> Any:
        """Telethon's own ``iter_messages`` iterator, paging through this fake's raw requests.

        Each page is one ``get_history`` (or ``get_replies``) request of at most 100 messages,
        so a scheduled flood wait can strike in the middle of a long iteration.
        """
        return self._iterator(
            entity, limit, offset_date, max_id, min_id, reverse, reply_to, wait_time, None
        )

    def _iterator(
        self,
        entity: Any,
        limit: int | None,
        offset_date: datetime | None,
        max_id: int,
        min_id: int,
        reverse: bool,
        reply_to: int | None,
        wait_time: float | None,
        takeout: int | None,
    ) -> Any:
        client: Any = self if takeout is None else _FakeTakeout(self, takeout, finalize=False)
        return _MessagesIter(
            client,
            limit,
            reverse=reverse,
            wait_time=wait_time,
            entity=entity,
            offset_id=0,
            min_id=min_id,
            max_id=max_id,
            from_user=None,
            offset_date=offset_date,
            add_offset=0,
            filter=None,
            search=None,
            reply_to=reply_to,
            scheduled=False,
        )

    def _page(
        self,
        source: _Chat,
        ids: list[int],
        *,
        offset_id: int,
        offset_date: datetime | None,
        add_offset: int,
        limit: int,
        max_id: int,
        min_id: int,
    ) -> list[int]:
        """The ids one history request returns, newest first, as Telegram picks them.

        Telegram walks the history newest first: the page starts at the first message older
        than ``offset_id`` (or than ``offset_date``, without an ``offset_id``), moved by
        ``add_offset`` (negative: towards newer messages), and holds at most ``limit`` (at
        most 100) messages; ``max_id``/``min_id`` bound it, both exclusive.
        """
        newest_first = sorted(ids, reverse=True)
        if offset_id:
            start = next((i for i, m in enumerate(newest_first) if m < offset_id), len(ids))
        elif offset_date is not None:
            start = next(
                (
                    i
                    for i, m in enumerate(newest_first)
                    if source.messages[m][1]["date"] < offset_date
                ),
                len(ids),
            )
        else:
            start = 0
        start += add_offset
        count = max(0, min(limit, PAGE_LIMIT))
        end = start + count
        page = newest_first[max(start, 0) : max(end, 0)]
        return [m for m in page if (not max_id or m < max_id) and m > min_id]

    def _history(self, request: Any, chat: _Chat, takeout: int | None) -> Any:
        self._readable(chat)
        source = chat
        if isinstance(request, functions.messages.GetRepliesRequest):
            source, ids = self._replies(chat, request.msg_id)
        else:
            ids = list(chat.messages)
        page = self._page(
            source,
            ids,
            offset_id=request.offset_id,
            offset_date=request.offset_date,
            add_offset=request.add_offset,
            limit=request.limit,
            max_id=request.max_id,
            min_id=request.min_id,
        )
        self.pages.append((utils.get_peer_id(chat.entity), page))
        messages = [self._raw(source, i) for i in page]
        users, chats = self._entities_of(messages, source)
        for item in (*users, *chats):
            self._seen.add(utils.get_peer_id(item))
        if isinstance(source.entity, types.Channel):
            return types.messages.ChannelMessages(
                pts=1, count=len(ids), messages=messages, topics=[], chats=chats, users=users
            )
        if len(page) == len(ids):
            return types.messages.Messages(messages=messages, topics=[], chats=chats, users=users)
        return types.messages.MessagesSlice(
            count=len(ids), messages=messages, topics=[], chats=chats, users=users
        )

    def _raw(self, chat: _Chat, msg_id: int) -> Any:
        cls, kwargs = chat.messages[msg_id]
        return cls(**kwargs)

    def _entities_of(self, messages: Sequence[Any], chat: _Chat) -> tuple[list[Any], list[Any]]:
        """The users and chats a response carries: the chat, senders, forward origins."""
        wanted = {utils.get_peer_id(chat.entity)}
        for message in messages:
            for peer in (
                getattr(message, "from_id", None),
                getattr(getattr(message, "fwd_from", None), "from_id", None),
            ):
                if peer is not None:
                    wanted.add(utils.get_peer_id(peer))
            via = getattr(message, "via_bot_id", None)
            if via:
                wanted.add(via)
            action = getattr(message, "action", None)
            for user_id in getattr(action, "users", None) or []:
                wanted.add(user_id)
            if isinstance(action, types.MessageActionChatMigrateTo):
                wanted.add(utils.get_peer_id(types.PeerChannel(action.channel_id)))
        found = [self._chats[m].entity for m in sorted(wanted) if m in self._chats]
        users = [e for e in found if isinstance(e, types.User)]
        chats = [e for e in found if not isinstance(e, types.User)]
        return users, chats

    def _thread(self, group: _Chat, root: int) -> list[int]:
        out = []
        for msg_id, (_, kwargs) in group.messages.items():
            header = kwargs.get("reply_to")
            if not isinstance(header, types.MessageReplyHeader) or msg_id == root:
                continue
            if header.reply_to_top_id == root or (
                header.reply_to_top_id is None and header.reply_to_msg_id == root
            ):
                out.append(msg_id)
        return sorted(out)

    def _replies(self, chat: _Chat, msg_id: int) -> tuple[_Chat, list[int]]:
        entity = chat.entity
        if isinstance(entity, types.Channel) and entity.broadcast:
            if chat.linked is None or msg_id not in chat.messages:
                raise errors.MsgIdInvalidError(request=None)
            group = self._chats[chat.linked]
            self._readable(group)
            copy_id = group.copies.get((entity.id, msg_id))
            return group, self._thread(group, copy_id) if copy_id is not None else []
        if msg_id not in chat.messages:
            raise errors.MsgIdInvalidError(request=None)
        return chat, self._thread(chat, msg_id)

    async def get_messages(self, entity: Any, *, ids: Sequence[int]) -> list[Any | None]:
        """Messages by id, ``None`` for each that no longer exists in this chat."""
        chat = await self._resolve(entity)
        await self._request("get_messages", utils.get_peer_id(chat.entity))
        self._readable(chat)
        out = [self._materialise(chat, i) if i in chat.messages else None for i in ids]
        self._mark_seen(m for m in out if m is not None)
        return out

    async def send_code_request(self, phone: str) -> Any:
        """Send the login code; refuses a phone number Telegram does not know."""
        await self._request("send_code_request")
        if phone != self.phone:
            raise errors.PhoneNumberInvalidError(request=None)
        self._code_sent = True
        return types.auth.SentCode(
            type=types.auth.SentCodeTypeApp(length=len(self.code)),
            phone_code_hash=PHONE_CODE_HASH,
        )

    async def sign_in(
        self,
        phone: str | None = None,
        code: str | int | None = None,
        *,
        password: str | None = None,
        phone_code_hash: str | None = None,
    ) -> Any:
        """Sign in with the code, then (for a two-step account) with the password."""
        await self._request("sign_in")
        if password is not None and code is None:
            if not self._code_ok or self.password is None:
                raise ValueError("You must provide a phone and a code the first time")
            if password != self.password:
                raise errors.PasswordHashInvalidError(request=None)
            self.authorized = True
            return self.me
        if not self._code_sent or phone != self.phone or phone_code_hash != PHONE_CODE_HASH:
            raise errors.PhoneCodeExpiredError(request=None)
        if str(code) != self.code:
            raise errors.PhoneCodeInvalidError(request=None)
        self._code_ok = True
        if self.password is not None:
            raise errors.SessionPasswordNeededError(request=None)
        self.authorized = True
        return self.me

    async def download_media(self, message: Any, file: Any = None) -> Any:
        """The bytes set with ``set_file`` (``file=bytes``) or written to the path ``file``."""
        chat = await self._resolve(message.peer_id)
        await self._request("download_media", utils.get_peer_id(chat.entity))
        self._readable(chat)
        if getattr(message, "media", None) is None:
            return None
        data = self.files.get((utils.get_peer_id(chat.entity), message.id))
        if data is None:
            raise errors.FileReferenceExpiredError(request=None)
        if file is bytes:
            return data
        if isinstance(file, str | Path):
            Path(file).write_bytes(data)
            return str(file)
        if hasattr(file, "write"):
            file.write(data)
            return file
        raise TypeError("FakeTelegram.download_media needs file=bytes, a path or a writable file")

    def takeout(self, finalize: bool = True, **kinds: bool | None) -> _FakeTakeout:
        """Telethon's ``client.takeout(...)``: a client whose requests run in a takeout session.

        Entering it sends ``account.initTakeoutSession``, which fails with
        ``TakeoutInitDelayError`` while ``takeout_delay`` is set (the user has not allowed the
        export in the app, or declined it); leaving it finishes the session (successfully
        when the block raised nothing) when ``finalize``.
        """
        return _FakeTakeout(self, None, finalize=finalize)

    async def __call__(self, request: Any) -> Any:
        """The raw requests ingest sends (folders, a channel's full info) and history pages."""
        return await self._raw_call(request, None)

    async def _raw_call(self, request: Any, takeout: int | None) -> Any:
        if isinstance(
            request, functions.messages.GetHistoryRequest | functions.messages.GetRepliesRequest
        ):
            chat = await self._resolve(request.peer)
            name = (
                "get_replies"
                if isinstance(request, functions.messages.GetRepliesRequest)
                else "get_history"
            )
            await self._request(name, utils.get_peer_id(chat.entity), takeout=takeout)
            return self._history(request, chat, takeout)
        if isinstance(request, functions.messages.GetDialogFiltersRequest):
            await self._request("get_dialog_filters", takeout=takeout)
            return types.messages.DialogFilters(
                filters=[types.DialogFilterDefault(), *self._folders.values()]
            )
        if isinstance(request, functions.channels.GetFullChannelRequest):
            chat = await self._resolve(request.channel)
            await self._request("get_full_channel", utils.get_peer_id(chat.entity), takeout=takeout)
            self._readable(chat)
            if not isinstance(chat.entity, types.Channel):
                raise errors.ChannelInvalidError(request=None)
            linked = self._chats[chat.linked].entity if chat.linked is not None else None
            full = types.ChannelFull(
                id=chat.entity.id,
                about="",
                read_inbox_max_id=0,
                read_outbox_max_id=0,
                unread_count=0,
                chat_photo=types.PhotoEmpty(id=0),
                notify_settings=types.PeerNotifySettings(),
                bot_info=[],
                pts=0,
                linked_chat_id=linked.id if linked is not None else None,
            )
            chats = [chat.entity] + ([linked] if linked is not None else [])
            for item in chats:
                self._seen.add(utils.get_peer_id(item))
            return types.messages.ChatFull(full_chat=full, chats=chats, users=[])
        raise TypeError(f"FakeTelegram does not implement {type(request).__name__}")


class _FakeTakeout:
    """The takeout proxy ``FakeTelegram.takeout`` returns, and the client inside its block.

    History pages and raw requests sent through it are takeout requests (logged
    ``takeout:<method>``, refused once the session is finished); the other calls go to the
    account's client as they are.
    """

    def __init__(self, owner: FakeTelegram, takeout_id: int | None, *, finalize: bool) -> None:
        self._owner = owner
        self._id = takeout_id
        self._finalize = finalize
        self.session = owner.session

    async def __aenter__(self) -> _FakeTakeout:
        owner = self._owner
        if owner.session.takeout_id is not None:
            raise ValueError(
                "Can't send a takeout request while another takeout for the current session "
                "still not been finished yet."
            )
        await owner._request("init_takeout")
        if owner.takeout_delay is not None:
            raise errors.TakeoutInitDelayError(request=None, capture=owner.takeout_delay)
        self._id = len(owner.takeouts) + 1
        owner.session.takeout_id = self._id
        owner.takeouts.append((self._id, None))
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        owner = self._owner
        if not self._finalize or self._id is None:
            return
        success = exc_type is None
        await owner._request("finish_takeout", takeout=self._id)
        owner.takeouts[self._id - 1] = (self._id, success)
        owner.session.takeout_id = None

    def _live(self) -> int:
        if self._id is None or self._owner.session.takeout_id != self._id:
            raise ValueError(
                'Takeout mode has not been initialized (are you calling outside of "with"?)'
            )
        return self._id

    async def __call__(self, request: Any) -> Any:
        return await self._owner._raw_call(request, self._live())

    async def get_input_entity(self, entity: Any) -> Any:
        return await self._owner.get_input_entity(entity)

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
        wait_time: float | None = None,
    ) -> Any:
        return self._owner._iterator(
            entity, limit, offset_date, max_id, min_id, reverse, reply_to, wait_time, self._live()
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner, name)


def photo(photo_id: int, width: int = 1280, height: int = 960) -> Any:
    """A ``MessageMediaPhoto`` as Telegram sends it (one JPEG size)."""
    return types.MessageMediaPhoto(
        photo=types.Photo(
            id=photo_id,
            access_hash=access_hash_of(photo_id),
            file_reference=b"fake",
            date=BASE_DATE,
            sizes=[types.PhotoSize(type="y", w=width, h=height, size=width * height // 8)],
            dc_id=2,
        )
    )


def _reactions(counts: dict[str, int] | None) -> Any:
    if not counts:
        return None
    return types.MessageReactions(
        results=[
            types.ReactionCount(reaction=types.ReactionEmoji(emoticon=emoji), count=count)
            for emoji, count in counts.items()
        ]
    )
