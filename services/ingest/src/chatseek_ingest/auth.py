"""Signing in to Telegram and writing the account's session file, the only place that does.

Owns the two-step login (send a code, then sign in with it and the two-step password when the
account has one) and ``$CHATSEEK_HOME/sessions/<account>.session``. Invariants: the session
file holds a ``StringSession`` string, is written atomically with mode 0600 in a 0700
directory, and is written only after Telegram accepted the login; a login waiting for its code
lives in memory only, for at most ``LOGIN_TTL_S``; phone numbers, codes, passwords and session
strings are never logged.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from telethon import errors, utils
from telethon.tl import types

from chatseek_core.aio import to_thread
from chatseek_core.errors import FloodWait, InvalidArgument, NotAuthorized
from chatseek_ingest.telegram import TelegramClientLike, session_path

__all__ = [
    "ENV_API_HASH",
    "ENV_API_ID",
    "LOGIN_TTL_S",
    "LoginResult",
    "PendingLogins",
    "api_credentials",
    "complete_login",
    "start_login",
    "write_session",
]

log = logging.getLogger(__name__)

ENV_API_ID = "CHATSEEK_TELEGRAM_API_ID"
ENV_API_HASH = "CHATSEEK_TELEGRAM_API_HASH"
LOGIN_TTL_S = 600.0
DIR_MODE = 0o700
FILE_MODE = 0o600
TOKEN_BYTES = 18

ClientFactory = Callable[[], TelegramClientLike]
"""Builds a fresh, unconnected client over an empty session (one per login)."""


def api_credentials(
    api_id: int | str | None = None,
    api_hash: str | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[int, str]:
    """The Telegram API id and hash: the arguments (from config) first, then the environment.

    Raises:
        InvalidArgument: either is missing, or the id is not a number; names the variable.
    """
    source = os.environ if env is None else env
    raw_id = api_id if api_id not in (None, "") else source.get(ENV_API_ID, "")
    raw_hash = api_hash or source.get(ENV_API_HASH, "")
    if raw_id in (None, "") or not str(raw_id).strip().isdigit():
        raise InvalidArgument(
            "the Telegram API id is missing or not a number",
            hint=f"set {ENV_API_ID} (from https://my.telegram.org) or put it in the config",
            metadata={"variable": ENV_API_ID},
        )
    if not raw_hash:
        raise InvalidArgument(
            "the Telegram API hash is missing",
            hint=f"set {ENV_API_HASH} (from https://my.telegram.org) or put it in the config",
            metadata={"variable": ENV_API_HASH},
        )
    return int(str(raw_id).strip()), raw_hash


def write_session(home: Path, account: str, session: str) -> Path:
    """Write ``session`` to the account's session file (0600, directory 0700), atomically."""
    path = session_path(home, account)
    path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(path.parent, DIR_MODE)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(session)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, FILE_MODE)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    return path


# --- the login ---


@dataclass
class _Pending:
    client: TelegramClientLike
    phone: str
    phone_code_hash: str
    started_at: float
    needs_password: bool = False


class PendingLogins:
    """Logins waiting for their code, by opaque token; each expires after ``ttl_s``."""

    def __init__(
        self, *, ttl_s: float = LOGIN_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl_s = ttl_s
        self._clock = clock
        self._logins: dict[str, _Pending] = {}

    def add(self, client: TelegramClientLike, phone: str, phone_code_hash: str) -> str:
        """Keep a login that waits for its code; returns its token."""
        token = secrets.token_urlsafe(TOKEN_BYTES)
        self._logins[token] = _Pending(client, phone, phone_code_hash, self._clock())
        return token

    def get(self, token: str) -> _Pending | None:
        """The login of ``token`` unless it is unknown or expired."""
        pending = self._logins.get(token)
        if pending is not None and self._clock() - pending.started_at > self._ttl_s:
            self._logins.pop(token, None)
            return None
        return pending

    def pop(self, token: str) -> _Pending | None:
        """Forget the login of ``token``."""
        return self._logins.pop(token, None)

    def expired(self) -> list[_Pending]:
        """Remove and return the logins past their time (their clients need disconnecting)."""
        now = self._clock()
        gone = [t for t, p in self._logins.items() if now - p.started_at > self._ttl_s]
        return [self._logins.pop(t) for t in gone]

    def __len__(self) -> int:
        return len(self._logins)


class LoginResult(NamedTuple):
    """A finished login: the user's display name and where the session was written."""

    user: str
    session_path: Path


def _flood(exc: Any) -> FloodWait:
    seconds = float(getattr(exc, "seconds", 0) or 0)
    return FloodWait(
        f"Telegram asked to wait {seconds:.0f} s before trying to sign in again",
        hint="wait, then run `chatseek auth` again",
        retry_after_s=seconds,
    )


async def start_login(client_factory: ClientFactory, phone: str, *, pending: PendingLogins) -> str:
    """Send a login code to ``phone``; returns the token ``complete_login`` takes.

    Raises:
        InvalidArgument: Telegram does not accept the phone number.
        FloodWait: too many attempts; ``retry_after_s`` says how long to wait.
    """
    for stale in pending.expired():
        with contextlib.suppress(Exception):
            await stale.client.disconnect()
    client = client_factory()
    await client.connect()
    try:
        sent = await client.send_code_request(phone)
    except (errors.PhoneNumberInvalidError, errors.PhoneNumberBannedError) as exc:
        await client.disconnect()
        raise InvalidArgument(
            "Telegram does not accept this phone number",
            hint="use the international format, e.g. +34600000000",
            metadata={"field": "phone"},
        ) from exc
    except errors.FloodWaitError as exc:
        await client.disconnect()
        raise _flood(exc) from exc
    except BaseException:
        await client.disconnect()
        raise
    log.info("login code sent")
    return pending.add(client, phone, str(sent.phone_code_hash))


async def complete_login(
    pending: PendingLogins,
    token: str,
    code: str,
    password: str | None = None,
    *,
    home: Path,
    account: str,
) -> LoginResult:
    """Sign in with the code (and the two-step password) and write the session file.

    A wrong code or password, or a missing password, keeps the login open: call again with the
    same token. Only a successful sign-in writes the session.

    Raises:
        InvalidArgument: unknown or expired token; a wrong code (``metadata.field = "code"``) or
            password (``"password"``).
        NotAuthorized: the account has two-step verification and no password was given
            (``metadata.needs = "password"``), or the code expired (start again).
        FloodWait: too many attempts.
    """
    login = pending.get(token)
    if login is None:
        raise InvalidArgument(
            "this login is unknown or expired",
            hint="start again with `chatseek auth`",
            metadata={"field": "login_token"},
        )
    client = login.client
    try:
        user = await _sign_in(login, code, password)
    except errors.PhoneCodeExpiredError as exc:
        pending.pop(token)
        await client.disconnect()
        raise NotAuthorized(
            "the login code expired", hint="start again with `chatseek auth`"
        ) from exc
    except errors.FloodWaitError as exc:
        raise _flood(exc) from exc
    if not isinstance(user, types.User):
        pending.pop(token)
        await client.disconnect()
        raise NotAuthorized(
            "this phone number has no Telegram account yet",
            hint="sign up in a Telegram app first, then run `chatseek auth`",
        )
    session = str(client.session.save())
    path = await to_thread(write_session, home, account, session)
    pending.pop(token)
    await client.disconnect()
    log.info("signed in account %s; session written", account)
    return LoginResult(user=utils.get_display_name(user), session_path=path)


async def _sign_in(login: _Pending, code: str, password: str | None) -> Any:
    client = login.client
    if not login.needs_password:
        try:
            return await client.sign_in(
                phone=login.phone, code=code.strip(), phone_code_hash=login.phone_code_hash
            )
        except errors.PhoneCodeInvalidError as exc:
            raise InvalidArgument(
                "the login code is wrong",
                hint="type the code Telegram just sent",
                metadata={"field": "code"},
            ) from exc
        except errors.SessionPasswordNeededError:
            login.needs_password = True
    if not password:
        raise NotAuthorized(
            "this account has two-step verification: its password is needed",
            hint="run again with the two-step verification password",
            metadata={"needs": "password"},
        )
    try:
        return await client.sign_in(password=password)
    except errors.PasswordHashInvalidError as exc:
        raise InvalidArgument(
            "the two-step verification password is wrong",
            hint="type the password again",
            metadata={"field": "password"},
        ) from exc
