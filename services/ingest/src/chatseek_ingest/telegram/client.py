"""The Telegram client boundary: the calls ingest makes, session files, the real client.

Only ``auth`` writes a session file; every client here reads it once and never writes it; the
real client never sleeps through a flood wait on its own (``flood_sleep_threshold=0``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import telethon
from telethon.sessions import StringSession

from chatseek_core.errors import InvalidArgument, NotAuthorized

__all__ = ["SESSIONS_DIR", "TelegramClientLike", "open_client", "read_session", "session_path"]

SESSIONS_DIR = "sessions"
SESSION_SUFFIX = ".session"
_ACCOUNT_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class TelegramClientLike(Protocol):
    """The Telethon calls ingest makes; ``telethon.TelegramClient`` satisfies it as it is.

    ``__call__`` is used for exactly two raw requests: ``messages.GetDialogFiltersRequest``
    (folders) and ``channels.GetFullChannelRequest`` (a channel's discussion group). The
    client ``takeout()`` yields satisfies it too.
    """

    session: Any

    async def connect(self) -> None:
        """Open the connection."""

    async def disconnect(self) -> None:
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


def open_client(session: str, api_id: int, api_hash: str) -> TelegramClientLike:
    """A ``telethon.TelegramClient`` over an in-memory copy of ``session`` (not connected).

    Telethon's own flood sleeping is off, so every wait reaches the caller's ``FloodPolicy``.
    """
    client: TelegramClientLike = telethon.TelegramClient(
        StringSession(session), api_id, api_hash, flood_sleep_threshold=0, receive_updates=False
    )
    return client
