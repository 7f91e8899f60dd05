"""Fetching a stored message's media from Telegram for extraction, within the ``[media]`` limits.

The message is fetched again by id (Telethon downloads only from a message Telegram just
returned); a download never starts for a file Telegram reports above ``Limits.max_bytes``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path, PurePath
from typing import Any

from telethon import errors

from chatseek_core import db
from chatseek_core.config import load as load_config
from chatseek_core.errors import (
    InvalidArgument,
)
from chatseek_core.settings import Settings
from chatseek_ingest.extract import Fetch, FileTooLarge, Limits, MediaRow, extract_pending
from chatseek_ingest.runtime import signed_out
from chatseek_ingest.telegram import (
    FloodPolicy,
    TelegramClientLike,
    input_peer,
    unavailable_reason,
)

__all__ = ["MediaGone", "extract_media", "fetchable_chats", "media_limits", "telegram_fetcher"]

log = logging.getLogger(__name__)

MEDIA_KEYS = ("enabled", "ocr", "documents", "max_download_mb", "max_chars", "max_pages")
LOCAL_NAME = "media"
PHOTO_SUFFIX = ".jpg"
_SAFE_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,8}$")


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
            raise signed_out(account) from exc
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
