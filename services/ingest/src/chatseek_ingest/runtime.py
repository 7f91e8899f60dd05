"""How the ingest service reaches Telegram: credentials, the session and connected clients.

Owns reading the Telegram API id/hash (config file first, then ``CHATSEEK_TELEGRAM_API_*``),
connecting one signed-in client per call (``account_client``), with a connection of its own
for a pass that writes (``telegram_pass``), and the lazily connected client of an extract
pass. Invariants: the session file is only read here (``auth`` writes it); a missing session
is NOT_AUTHORIZED before any credential or network is touched; Telegram's "signed out" errors
become NOT_AUTHORIZED and connection failures UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from telethon import errors

from chatseek_core import db
from chatseek_core.aio import to_thread
from chatseek_core.config import load as load_config
from chatseek_core.errors import (
    FailedPrecondition,
    FloodWait,
    InvalidArgument,
    NotAuthorized,
    Unavailable,
)
from chatseek_core.settings import Settings
from chatseek_ingest.auth import ENV_API_HASH, ENV_API_ID, api_credentials
from chatseek_ingest.schema import OWNER
from chatseek_ingest.sync import default_lock_path, sync_lock
from chatseek_ingest.telegram import (
    TelegramClientLike,
    open_client,
    read_session,
)

__all__ = [
    "LazyClient",
    "TelegramFactory",
    "account_client",
    "credentials",
    "login_factory",
    "refuse_if_syncing",
    "signed_out",
    "telegram_pass",
]

TelegramFactory = Callable[[str, int, str], TelegramClientLike]
"""Builds an unconnected client from ``(session string, api_id, api_hash)``; production uses
``telegram.open_client``, tests hand out a ``FakeTelegram``. An empty session is a new login."""


def credentials(settings: Settings) -> tuple[int, str]:
    """The Telegram API id and hash: ``[telegram]`` of the config file, then the environment.

    Raises:
        FailedPrecondition: either is missing or malformed; the message names both places.
        InvalidArgument: the config file is not valid TOML.
    """
    config = load_config(settings.config_path)
    try:
        return api_credentials(config.api_id, config.api_hash, env=settings.extra)
    except InvalidArgument as exc:
        raise FailedPrecondition(
            f"{exc.message}: set [telegram] api_id and api_hash in {settings.config_path} or "
            f"{ENV_API_ID} / {ENV_API_HASH}",
            hint="get them at https://my.telegram.org/apps (`chatseek config init` writes the "
            "config template)",
            metadata={
                "config": str(settings.config_path),
                "variable": exc.metadata.get("variable", ""),
            },
        ) from exc


def login_factory(settings: Settings, factory: TelegramFactory) -> Callable[[], TelegramClientLike]:
    """A client factory over an empty session, for ``auth.start_login``.

    Raises:
        FailedPrecondition: the API id or hash is missing (see ``credentials``).
    """
    api_id, api_hash = credentials(settings)
    return lambda: factory("", api_id, api_hash)


def _prepare(settings: Settings, account: str) -> tuple[str, int, str]:
    session = read_session(settings.home, account)
    api_id, api_hash = credentials(settings)
    return session, api_id, api_hash


@contextlib.asynccontextmanager
async def account_client(
    settings: Settings, account: str, factory: TelegramFactory = open_client
) -> AsyncIterator[TelegramClientLike]:
    """A connected, signed-in client for ``account``; disconnected when the block ends.

    Raises:
        NotAuthorized: no session file, or Telegram no longer accepts it (also when a request
            in the block is refused as signed out).
        FailedPrecondition: the API id or hash is missing.
        Unavailable: Telegram cannot be reached.
        FloodWait: Telegram asked to wait before a request the block did not guard itself.
    """
    session, api_id, api_hash = await to_thread(_prepare, settings, account)
    client = factory(session, api_id, api_hash)
    try:
        await client.connect()
    except OSError as exc:
        raise _unreachable(exc) from exc
    try:
        if not await client.is_user_authorized():
            raise signed_out(account)
        yield client
    except errors.UnauthorizedError as exc:
        raise signed_out(account) from exc
    except (errors.FloodWaitError, errors.FloodPremiumWaitError) as exc:
        raise _flood(exc) from exc
    except OSError as exc:
        raise _unreachable(exc) from exc
    finally:
        with contextlib.suppress(Exception):
            await client.disconnect()


def signed_out(account: str) -> NotAuthorized:
    """The error for a session Telegram no longer accepts."""
    return NotAuthorized(
        f"the Telegram session of account {account!r} is no longer valid",
        hint="run `chatseek auth` to sign in again",
        metadata={"account": account},
    )


def _unreachable(exc: BaseException) -> Unavailable:
    return Unavailable(
        f"Telegram cannot be reached ({type(exc).__name__})",
        hint="check the network connection and try again",
    )


def _flood(exc: Any) -> FloodWait:
    seconds = float(getattr(exc, "seconds", 0) or 0)
    return FloodWait(
        f"Telegram asked to wait {seconds:.0f} s before the next request",
        hint="run it again later; everything fetched so far is stored",
        retry_after_s=seconds,
    )


class LazyClient:
    """The client of one account, connected on first use and closed by ``close``.

    ``get`` may be awaited from the event loop only; a worker thread reaches it through
    ``asyncio.run_coroutine_threadsafe``.
    """

    def __init__(self, settings: Settings, account: str, factory: TelegramFactory) -> None:
        self._settings = settings
        self._account = account
        self._factory = factory
        self._stack = contextlib.AsyncExitStack()
        self._client: TelegramClientLike | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> TelegramClientLike:
        """The connected client (see ``account_client`` for what connecting raises)."""
        async with self._lock:
            if self._client is None:
                self._client = await self._stack.enter_async_context(
                    account_client(self._settings, self._account, self._factory)
                )
            return self._client

    async def close(self) -> None:
        """Disconnect the client, if one was connected."""
        await self._stack.aclose()
        self._client = None


def refuse_if_syncing(conn: db.Connection) -> None:
    """Fail fast, before Telegram is contacted, when a sync holds the lock.

    The pass that follows takes the lock itself; this only spares a refused run the connect.

    Raises:
        SyncRunning: another sync or deletion pass is running.
    """
    with sync_lock(default_lock_path(conn)):
        pass


@contextlib.asynccontextmanager
async def telegram_pass(
    settings: Settings,
    account: str,
    factory: TelegramFactory = open_client,
    *,
    exclusive: bool = False,
) -> AsyncIterator[tuple[db.Connection, TelegramClientLike]]:
    """A connection of its own to ingest.db and a signed-in client, for a pass over Telegram.

    The pass hands the connection from thread to thread, so it is not one of the pool's; it is
    closed when the block ends. With ``exclusive`` (sync, prune-deleted) a running sync is
    refused first, before Telegram is contacted.

    Raises:
        SyncRunning: ``exclusive`` and another sync or deletion pass is running.
        NotAuthorized, FailedPrecondition, Unavailable, FloodWait: see ``account_client``.
    """
    conn = await to_thread(db.connect, settings.db_path(OWNER))
    try:
        if exclusive:
            await to_thread(refuse_if_syncing, conn)
        async with account_client(settings, account, factory) as client:
            yield conn, client
    finally:
        await to_thread(conn.close)
