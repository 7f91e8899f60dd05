"""Login, the session file and the client that reads it, against the strict fake Telegram."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from telethon.sessions import StringSession

from chatseek_core.errors import FloodWait, InvalidArgument, NotAuthorized
from chatseek_ingest.auth import (
    ENV_API_HASH,
    ENV_API_ID,
    PendingLogins,
    api_credentials,
    complete_login,
    start_login,
    write_session,
)
from chatseek_ingest.runtime import account_client
from chatseek_ingest.server import open_deps
from chatseek_ingest.telegram import open_client, read_session, session_path
from chatseek_testing.services import temp_settings
from chatseek_testing.telegram import DEFAULT_CODE, DEFAULT_PHONE, FakeTelegram

ACCOUNT = "main"


def fake(password: str | None = None) -> FakeTelegram:
    return FakeTelegram(authorized=False, connected=False, password=password, me_name="Ana")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_login_writes_the_session_string_with_mode_0600_in_a_0700_directory(
    tmp_path: Path,
) -> None:
    tg = fake()
    pending = PendingLogins()
    token = await start_login(lambda: tg, DEFAULT_PHONE, pending=pending)
    result = await complete_login(pending, token, DEFAULT_CODE, home=tmp_path, account=ACCOUNT)
    assert result.user == "Ana"
    assert result.session_path == tmp_path / "sessions" / "main.session"
    assert result.session_path.read_text() == "fake-session:1000"
    assert mode(result.session_path) == 0o600
    assert mode(result.session_path.parent) == 0o700
    assert not tg.connected and len(pending) == 0
    assert read_session(tmp_path, ACCOUNT) == "fake-session:1000"


async def test_a_two_step_account_needs_its_password_and_a_wrong_one_can_be_retried(
    tmp_path: Path,
) -> None:
    tg = fake(password="correct horse")
    pending = PendingLogins()
    token = await start_login(lambda: tg, DEFAULT_PHONE, pending=pending)
    with pytest.raises(NotAuthorized) as needs:
        await complete_login(pending, token, DEFAULT_CODE, home=tmp_path, account=ACCOUNT)
    assert needs.value.metadata == {"needs": "password"}
    with pytest.raises(InvalidArgument) as wrong:
        await complete_login(
            pending, token, DEFAULT_CODE, "battery staple", home=tmp_path, account=ACCOUNT
        )
    assert wrong.value.metadata == {"field": "password"}
    assert not session_path(tmp_path, ACCOUNT).exists()
    result = await complete_login(
        pending, token, DEFAULT_CODE, "correct horse", home=tmp_path, account=ACCOUNT
    )
    assert result.session_path.exists() and tg.authorized


async def test_a_wrong_code_is_refused_and_the_same_login_takes_the_right_one(
    tmp_path: Path,
) -> None:
    tg = fake()
    pending = PendingLogins()
    token = await start_login(lambda: tg, DEFAULT_PHONE, pending=pending)
    with pytest.raises(InvalidArgument) as wrong:
        await complete_login(pending, token, "00000", home=tmp_path, account=ACCOUNT)
    assert wrong.value.metadata == {"field": "code"}
    assert not session_path(tmp_path, ACCOUNT).exists()
    await complete_login(pending, token, DEFAULT_CODE, home=tmp_path, account=ACCOUNT)
    assert session_path(tmp_path, ACCOUNT).exists()


async def test_an_unknown_or_expired_login_token_is_refused(tmp_path: Path) -> None:
    now = [0.0]
    pending = PendingLogins(ttl_s=60, clock=lambda: now[0])
    token = await start_login(lambda: fake(), DEFAULT_PHONE, pending=pending)
    now[0] = 61.0
    for candidate in (token, "made-up"):
        with pytest.raises(InvalidArgument):
            await complete_login(pending, candidate, DEFAULT_CODE, home=tmp_path, account=ACCOUNT)


async def test_a_phone_telegram_does_not_know_is_refused_and_nothing_stays_open() -> None:
    tg = fake()
    pending = PendingLogins()
    with pytest.raises(InvalidArgument) as caught:
        await start_login(lambda: tg, "+10000000001", pending=pending)
    assert caught.value.metadata == {"field": "phone"}
    assert not tg.connected and len(pending) == 0


async def test_a_flood_wait_on_login_is_a_flood_wait_error() -> None:
    tg = fake()
    tg.flood(120, method="send_code_request")
    with pytest.raises(FloodWait) as caught:
        await start_login(lambda: tg, DEFAULT_PHONE, pending=PendingLogins())
    assert caught.value.retry_after_s == 120


def test_writing_a_session_again_replaces_it_and_keeps_the_modes(tmp_path: Path) -> None:
    write_session(tmp_path, ACCOUNT, "first")
    path = write_session(tmp_path, ACCOUNT, "second")
    assert path.read_text() == "second" and mode(path) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["main.session"]


def test_a_missing_session_is_not_authorized_with_a_hint_to_sign_in(tmp_path: Path) -> None:
    with pytest.raises(NotAuthorized) as caught:
        read_session(tmp_path, ACCOUNT)
    assert caught.value.reason == "NOT_AUTHORIZED"
    assert "chatseek auth" in caught.value.hint


async def test_the_real_client_refuses_to_start_without_a_session(tmp_path: Path) -> None:
    settings = temp_settings(tmp_path / "home", "ingest")
    deps = open_deps(settings)
    assert deps.telegram_factory is open_client
    with pytest.raises(NotAuthorized) as refused:
        async with account_client(settings, ACCOUNT, deps.telegram_factory):
            pass
    assert refused.value.metadata == {"account": ACCOUNT}
    deps.pool.close()


def test_the_real_client_reads_the_session_into_memory_and_never_sleeps_on_its_own() -> None:
    client = open_client(StringSession().save(), 12345, "0123456789abcdef")
    assert isinstance(client.session, StringSession)
    assert client.flood_sleep_threshold == 0


@pytest.mark.parametrize("account", ["../evil", "a/b", "", ".."])
def test_an_account_name_that_could_escape_the_sessions_directory_is_refused(
    tmp_path: Path, account: str
) -> None:
    with pytest.raises(InvalidArgument):
        session_path(tmp_path, account)


def test_api_credentials_come_from_arguments_then_the_environment() -> None:
    env = {ENV_API_ID: "777", ENV_API_HASH: "from-env"}
    assert api_credentials(env=env) == (777, "from-env")
    assert api_credentials(42, "from-config", env=env) == (42, "from-config")
    with pytest.raises(InvalidArgument) as missing:
        api_credentials(env={ENV_API_ID: "777"})
    assert missing.value.metadata == {"variable": ENV_API_HASH}
    with pytest.raises(InvalidArgument) as bad:
        api_credentials(env={ENV_API_ID: "seven", ENV_API_HASH: "x"})
    assert bad.value.metadata == {"variable": ENV_API_ID}
