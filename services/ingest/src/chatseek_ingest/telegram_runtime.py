"""How the ingest service reaches Telegram: credentials, the session, clients and media fetching.

Owns reading the Telegram API id/hash (config file first, then ``CHATSEEK_TELEGRAM_API_*``),
connecting one signed-in client per call (``account_client``), the lazily connected client of an
extract pass, the fetcher that downloads a stored message's media by re-fetching the message,
and the ``[media]`` limits. Invariants: the session file is only read here (``auth`` writes it);
a missing session is NOT_AUTHORIZED before any credential or network is touched; Telegram's
"signed out" errors become NOT_AUTHORIZED and connection failures UNAVAILABLE; a download never
starts for a file Telegram reports above ``Limits.max_bytes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path, PurePath
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
from chatseek_ingest.extract import Fetch, FileTooLarge, Limits, MediaRow, extract_pending
from chatseek_ingest.sync import default_lock_path, sync_lock
from chatseek_ingest.telegram import (
    FloodPolicy,
    TelegramClientLike,
    input_peer,
    open_client,
    read_session,
    unavailable_reason,
)

__all__ = [
    "LazyClient",
    "MediaGone",
    "TelegramFactory",
    "account_client",
    "credentials",
    "extract_media",
    "fetchable_chats",
    "login_factory",
    "media_limits",
    "refuse_if_syncing",
    "telegram_fetcher",
]

log = logging.getLogger(__name__)

TelegramFactory = Callable[[str, int, str], TelegramClientLike]
"""Builds an unconnected client from ``(session string, api_id, api_hash)``; production uses
``telegram.open_client``, tests hand out a ``FakeTelegram``. An empty session is a new login."""

MEDIA_KEYS = ("enabled", "ocr", "documents", "max_download_mb", "max_chars", "max_pages")
LOCAL_NAME = "media"
PHOTO_SUFFIX = ".jpg"
_SAFE_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,8}$")


# --- credentials and clients ---


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
            raise _signed_out(account)
        yield client
    except errors.UnauthorizedError as exc:
        raise _signed_out(account) from exc
    except (errors.FloodWaitError, errors.FloodPremiumWaitError) as exc:
        raise _flood(exc) from exc
    except OSError as exc:
        raise _unreachable(exc) from exc
    finally:
        with contextlib.suppress(Exception):
            await client.disconnect()


def _signed_out(account: str) -> NotAuthorized:
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


# --- media ---


def media_limits(settings: Settings) -> Limits:
    """The extraction limits of the config file's ``[media]`` table (defaults where absent).

    Raises:
        InvalidArgument: an unknown key, or a value of the wrong type; the message names it.
    """
    table = load_config(settings.config_path).media
    defaults = Limits()
    known = {f.name for f in fields(Limits)} & set(MEDIA_KEYS)
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            raise InvalidArgument(
                f"{settings.config_path}: unknown key [media] {key}",
                hint=f"known keys: {', '.join(MEDIA_KEYS)}",
                metadata={"field": f"media.{key}"},
            )
        default = getattr(defaults, key)
        if isinstance(default, bool) != isinstance(value, bool) or not isinstance(
            value, int | float
        ):
            raise InvalidArgument(
                f"{settings.config_path}: [media] {key} must be like {default!r}",
                metadata={"field": f"media.{key}"},
            )
        values[key] = type(default)(value)
    return Limits(**values)


@dataclass(frozen=True)
class _Peer:
    chat_id: int
    access_hash: int | None
    is_self: bool


class MediaGone(Exception):
    """The message (or its media) is no longer on Telegram; the row is settled ``failed``."""


def fetchable_chats(conn: db.Connection, account: str) -> dict[int, _Peer]:
    """The chats of ``account`` whose media can be re-fetched: synced, not imported, readable."""
    return {
        int(r[0]): _Peer(int(r[0]), r[1], r[2] == "saved")
        for r in conn.execute(
            "SELECT chat_id, access_hash, type FROM chats"
            " WHERE account = ? AND is_import = 0 AND unavailable = 0",
            (account,),
        )
    }


def _local_name(row: MediaRow) -> str:
    if row.kind == "photo":
        return LOCAL_NAME + PHOTO_SUFFIX
    suffix = PurePath(row.file_name or "").suffix
    return LOCAL_NAME + (suffix.lower() if _SAFE_SUFFIX.match(suffix) else "")


def _reported_size(message: Any) -> int | None:
    try:
        file = message.file
        return int(file.size) if file is not None and file.size is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


def telegram_fetcher(
    *,
    loop: asyncio.AbstractEventLoop,
    connect: Callable[[], Awaitable[TelegramClientLike]],
    account: str,
    chats: Mapping[int, _Peer],
    policy: FloodPolicy,
    max_bytes: int,
) -> Fetch:
    """A ``Fetch`` for ``extract_pending`` (run in a worker thread) that downloads from Telegram.

    Each row's message is fetched again by id (Telethon downloads only from a message Telegram
    just returned) and its media downloaded into the row's temporary directory. Rows of other
    accounts and of chats not in ``chats`` (imported, unavailable) give None and stay pending.

    Raises (from the returned function):
        FileTooLarge: Telegram reports a size above ``max_bytes``; nothing is downloaded.
        MediaGone: the message or its media no longer exists (the row is settled failed).
        NotAuthorized, FloodWait, Unavailable: the pass stops; what it recorded stays.
    """

    async def download(row: MediaRow, peer: _Peer, tmpdir: Path) -> Path | None:
        client = await connect()
        target = input_peer(peer.chat_id, peer.access_hash, is_self=peer.is_self)
        try:
            found = await policy.call(lambda: client.get_messages(target, ids=[row.msg_id]))
        except errors.UnauthorizedError as exc:
            raise _signed_out(account) from exc
        except Exception as exc:
            if unavailable_reason(exc) is None:
                raise
            log.info("media %d stays pending: its chat is unavailable", row.mid)
            return None
        message = found[0] if found else None
        if message is None:
            raise MediaGone("the message is no longer on Telegram")
        if getattr(message, "media", None) is None:
            raise MediaGone("the message no longer carries media")
        size = _reported_size(message)
        if size is not None and size > max_bytes:
            raise FileTooLarge(size)
        path = tmpdir / _local_name(row)
        saved = await policy.call(lambda: client.download_media(message, file=str(path)))
        if saved is None:
            raise MediaGone("Telegram returned no file for the message")
        return Path(saved)

    def fetch(row: MediaRow, tmpdir: Path) -> Path | None:
        peer = chats.get(row.chat_id) if row.account == account else None
        if peer is None:
            return None
        return asyncio.run_coroutine_threadsafe(download(row, peer, tmpdir), loop).result()

    return fetch


def extract_media(
    conn: db.Connection,
    *,
    loop: asyncio.AbstractEventLoop,
    connect: Callable[[], Awaitable[TelegramClientLike]],
    account: str,
    policy: FloodPolicy,
    limits: Limits,
    budget_s: float | None,
    retry_failed: bool,
    on_progress: Callable[[tuple[int, int, str]], None],
    work_dir: Path,
    clock: Callable[[], float],
) -> dict[str, Any]:
    """One extract pass over the pending media of ``account``, downloading from Telegram.

    Run in a worker thread: downloads go through ``loop`` (see ``telegram_fetcher``), into a
    temporary directory under ``work_dir`` (created). Returns ``ExtractReport`` as a dict;
    ``on_progress`` receives ``(rows done, rows pending at the start, "media")``.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    fetch = telegram_fetcher(
        loop=loop,
        connect=connect,
        account=account,
        chats=fetchable_chats(conn, account),
        policy=policy,
        max_bytes=limits.max_bytes,
    )
    report = extract_pending(
        conn,
        fetch=fetch,
        limits=limits,
        budget_s=budget_s,
        retry_failed=retry_failed,
        on_progress=lambda done, total: on_progress((done, total, "media")),
        work_dir=work_dir,
        clock=clock,
    )
    return asdict(report)
