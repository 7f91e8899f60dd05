"""Several Telegram accounts in one ingest service, each with its own session file.

The fakes are handed out by session string (``fake_factory``), as the real client would sign
in as whoever the session file belongs to: a copied, misfiled or revoked session is refused
with an error naming the account.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from chatseek.ingest.v1 import ingest_service_pb2 as pb
from chatseek.ingest.v1 import ingest_service_pb2_grpc
from chatseek_core import db, errors
from chatseek_core.client import call, decode_error
from chatseek_core.settings import Settings
from chatseek_core.wire_json import event_report
from chatseek_ingest.auth import ENV_API_HASH, ENV_API_ID, write_session
from chatseek_ingest.server import create_server, open_deps
from chatseek_testing.services import serving, temp_settings
from chatseek_testing.telegram import FakeTelegram, fake_factory
from tests.stack_helpers import free_ports

API = {ENV_API_ID: "12345", ENV_API_HASH: "0123456789abcdef"}
SHARED = -1000000000500
HOME_ONLY = -1000000000600


def two_accounts() -> tuple[FakeTelegram, FakeTelegram]:
    """``home`` (user 1000) and ``work`` (user 2000); both read the public channel 500."""
    home = FakeTelegram(me_id=1000, me_name="Ana", connected=False)
    work = FakeTelegram(me_id=2000, me_name="Ana at work", connected=False)
    for tg in (home, work):
        channel = tg.add_channel(500, "City news", username="citynews")
        for n in range(3):
            tg.send(channel, f"news {n}")
    own = home.add_channel(600, "Family", megagroup=True)
    home.send(own, "dinner at eight")
    return home, work


@dataclass
class Served:
    """An ingest service over several fake accounts: its stub, and where its files live."""

    stub: Any
    settings: Settings

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stub, name)


@contextlib.asynccontextmanager
async def served(tmp_path: Path, *fakes: FakeTelegram) -> AsyncIterator[Served]:
    unitize, lexical = free_ports(2)
    env = {
        "CHATSEEK_UNITIZE_ADDR": f"127.0.0.1:{unitize}",
        "CHATSEEK_LEXICAL_ADDR": f"127.0.0.1:{lexical}",
        **API,
    }
    settings = temp_settings(tmp_path / "home", "ingest", env)
    deps = open_deps(settings, telegram_factory=fake_factory(*fakes))
    async with serving(create_server(settings, deps)) as addr:
        async with grpc.aio.insecure_channel(addr) as channel:
            yield Served(ingest_service_pb2_grpc.IngestServiceStub(channel), settings)


def sessions(stub: Any, **by_account: FakeTelegram) -> None:
    for account, tg in by_account.items():
        write_session(stub.settings.home, account, f"fake-session:{tg.me.id}")


async def sync(stub: Any, account: str) -> tuple[list[Any], dict[str, Any]]:
    progress: list[Any] = []
    report: dict[str, Any] = {}
    try:
        async for response in stub.Sync(pb.SyncRequest(account=account), timeout=60):
            if response.event.WhichOneof("event") == "progress":
                progress.append(response.event.progress)
            elif (done := event_report(response.event)) is not None:
                report = done
    except grpc.aio.AioRpcError as err:
        raise decode_error(err) from None
    return progress, report


async def add(stub: Any, account: str, target: str) -> None:
    await call(stub.AddSource, pb.AddSourceRequest(account=account, target=target))


def stored(stub: Any, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = db.connect(stub.settings.db_path("ingest"), readonly=True)
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


async def test_two_accounts_sync_into_one_store_and_a_chat_both_see_is_kept_per_account(
    tmp_path: Path,
) -> None:
    home, work = two_accounts()
    async with served(tmp_path, home, work) as stub:
        sessions(stub, home=home, work=work)
        await add(stub, "home", "@citynews")
        await add(stub, "home", "-1000000000600")
        await add(stub, "work", "@citynews")
        _, first = await sync(stub, "home")
        progress, second = await sync(stub, "work")
        assert (first["new"], second["new"]) == (4, 3)
        assert {p.account for p in progress} == {"work"}
        rows = stored(
            stub, "SELECT account, chat_id, COUNT(*) FROM messages GROUP BY 1, 2 ORDER BY 1, 2"
        )
        assert rows == [("home", HOME_ONLY, 1), ("home", SHARED, 3), ("work", SHARED, 3)]
        users = stored(stub, "SELECT account, user_id FROM accounts ORDER BY 1")
        assert users == [("home", 1000), ("work", 2000)]

        home.delete(SHARED, 2)
        home.send(SHARED, "news 3")
        _, again = await sync(stub, "home")
        assert again["deleted"] == 1
        per_account = stored(
            stub,
            "SELECT account, group_concat(msg_id) FROM (SELECT * FROM messages"
            " WHERE chat_id = ? ORDER BY account, msg_id) GROUP BY account",
            SHARED,
        )
        assert per_account == [("home", "1,3,4"), ("work", "1,2,3")]


async def test_a_session_file_of_another_account_is_refused_naming_the_account(
    tmp_path: Path,
) -> None:
    home, work = two_accounts()
    async with served(tmp_path, home, work) as stub:
        sessions(stub, home=home, work=work)
        await add(stub, "work", "@citynews")
        await sync(stub, "work")
        sessions(stub, work=home)
        with pytest.raises(errors.WrongAccount) as refused:
            await sync(stub, "work")
        assert (refused.value.code, refused.value.reason) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "WRONG_ACCOUNT",
        )
        assert "'work'" in refused.value.message and "chatseek auth" in refused.value.hint
        assert stored(stub, "SELECT COUNT(*) FROM messages WHERE account = 'work'") == [(3,)]
        sessions(stub, work=work)
        _, report = await sync(stub, "work")
        assert report["new"] == 0 and report["stopped_by"] is None


async def test_a_session_copied_from_another_account_is_refused_on_its_first_sync(
    tmp_path: Path,
) -> None:
    home, work = two_accounts()
    async with served(tmp_path, home, work) as stub:
        sessions(stub, home=home, work=home)
        await add(stub, "home", "@citynews")
        await sync(stub, "home")
        await add(stub, "work", "@citynews")
        with pytest.raises(errors.WrongAccount) as refused:
            await sync(stub, "work")
        assert "'home'" in refused.value.message
        assert stored(stub, "SELECT COUNT(*) FROM messages WHERE account = 'work'") == [(0,)]


async def test_a_revoked_session_is_not_authorized_and_names_its_account(tmp_path: Path) -> None:
    home, work = two_accounts()
    async with served(tmp_path, home, work) as stub:
        sessions(stub, home=home, work=work)
        await add(stub, "work", "@citynews")
        work.revoke()
        with pytest.raises(errors.NotAuthorized) as refused:
            await sync(stub, "work")
        assert refused.value.reason == "NOT_AUTHORIZED" and "'work'" in refused.value.message
        _, report = await sync(stub, "home")
        assert report["stopped_by"] is None


async def test_sync_progress_names_the_chat_its_count_and_a_flood_wait_being_waited_out(
    tmp_path: Path,
) -> None:
    home, work = two_accounts()
    big = home.add_channel(700, "Big", username="big")
    for n in range(150):
        home.send(big, f"m {n}")
    async with served(tmp_path, home, work) as stub:
        sessions(stub, home=home)
        await add(stub, "home", "@big")
        home.flood(1, at=2, method="get_history")
        progress, report = await sync(stub, "home")
        assert report["new"] == 150
        waits = [p for p in progress if p.wait_s > 0]
        assert [(p.wait_s, p.item) for p in waits] == [(1.0, "Big")]
        counted = [p for p in progress if p.item == "Big" and p.item_done]
        assert counted[-1].item_done == 150 and counted[-1].count == 150
        assert progress[-1].done == progress[-1].total == 1


async def test_a_session_revoked_mid_sync_keeps_the_committed_batches_and_resumes_after_auth(
    tmp_path: Path,
) -> None:
    home, work = two_accounts()
    big = work.add_channel(700, "Big", username="big")
    for n in range(250):
        work.send(big, f"m {n}")
    pages = 0

    def revoke_after_the_second_page(method: str) -> None:
        nonlocal pages
        if method == "get_history":
            pages += 1
            if pages == 2:
                work.revoke()

    async with served(tmp_path, home, work) as stub:
        sessions(stub, work=work)
        await add(stub, "work", "@big")
        work.on_request = revoke_after_the_second_page
        with pytest.raises(errors.NotAuthorized) as refused:
            await sync(stub, "work")
        assert "'work'" in refused.value.message and "chatseek auth" in refused.value.hint
        kept = stored(stub, "SELECT msg_id FROM messages WHERE account = 'work' ORDER BY 1")
        assert [r[0] for r in kept] == list(range(1, 201))
        work.on_request = None
        work.authorized = True  # signed in again (`chatseek auth`)
        _, report = await sync(stub, "work")
        ids = stored(stub, "SELECT msg_id FROM messages WHERE account = 'work' ORDER BY 1")
        assert report["new"] == 50 and [r[0] for r in ids] == list(range(1, 251))


async def test_a_premium_flood_wait_outside_a_sync_is_a_flood_wait_error(tmp_path: Path) -> None:
    home, work = two_accounts()
    async with served(tmp_path, home, work) as stub:
        sessions(stub, home=home)
        home.flood(3600, method="iter_dialogs", premium=True)
        with pytest.raises(errors.FloodWait) as refused:
            await call(stub.Dialogs, pb.DialogsRequest(account="home", query="news"))
        assert (refused.value.code, refused.value.reason) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "FLOOD_WAIT",
        )
