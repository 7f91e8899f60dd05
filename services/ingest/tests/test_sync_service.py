"""The ingest service's Telegram RPCs over gRPC, with the strict fake Telegram as the client.

The fake is injected at the Telethon boundary only (``Deps.telegram_factory``): session files,
API credentials, the sync lock, streaming and nudges are the real ones. The consumers the
service nudges (unitize, lexical) are deliberately down.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import stat
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from reportlab.pdfgen import canvas
from telethon.tl import types

from chatseek.ingest.v1 import ingest_service_pb2 as pb
from chatseek.ingest.v1 import ingest_service_pb2_grpc
from chatseek_core import db, errors
from chatseek_core.client import call, decode_error
from chatseek_core.settings import Settings
from chatseek_core.wire_json import answer_json, event_report, to_json
from chatseek_ingest.auth import ENV_API_HASH, ENV_API_ID, write_session
from chatseek_ingest.server import create_server, open_deps
from chatseek_ingest.telegram import session_path
from chatseek_testing.services import serving, temp_settings
from chatseek_testing.telegram import BASE_DATE, DEFAULT_CODE, DEFAULT_PHONE, FakeTelegram
from tests.stack_helpers import free_ports

SESSION = "fake-session:1000"
API = {ENV_API_ID: "12345", ENV_API_HASH: "0123456789abcdef"}
CHANNEL_ID = -1000000000500
BUDGET_S = 0.2
PDF_PHRASE = "Lease agreement for the flat on Calle Mayor"

Serve = Callable[..., contextlib.AbstractAsyncContextManager["Ingest"]]


@dataclass
class Ingest:
    """A served ingest service whose Telegram client is ``tg``."""

    stub: Any
    tg: FakeTelegram
    settings: Settings
    sessions: list[str] = field(default_factory=list)


@pytest.fixture
def serve(tmp_path: Path) -> Serve:
    """Serve ingest over a fake; by default with a session file and API credentials."""

    @contextlib.asynccontextmanager
    async def served(
        tg: FakeTelegram, *, session: bool = True, api: bool = True
    ) -> AsyncIterator[Ingest]:
        unitize, lexical = free_ports(2)
        env = {
            "CHATSEEK_UNITIZE_ADDR": f"127.0.0.1:{unitize}",
            "CHATSEEK_LEXICAL_ADDR": f"127.0.0.1:{lexical}",
            **(API if api else {}),
        }
        settings = temp_settings(tmp_path / "home", "ingest", env)
        if session:
            write_session(settings.home, settings.account, SESSION)
        sessions: list[str] = []

        def factory(session_string: str, api_id: int, api_hash: str) -> FakeTelegram:
            sessions.append(session_string)
            return tg

        deps = open_deps(settings, telegram_factory=factory)
        async with serving(create_server(settings, deps)) as addr:
            async with grpc.aio.insecure_channel(addr) as channel:
                stub = ingest_service_pb2_grpc.IngestServiceStub(channel)
                yield Ingest(stub=stub, tg=tg, settings=settings, sessions=sessions)

    return served


def channel_with(tg: FakeTelegram, count: int, *, channel_id: int = 500) -> Any:
    channel = tg.add_channel(channel_id, f"Channel {channel_id}", username=f"chan{channel_id}")
    for n in range(count):
        tg.send(channel, f"post {n}")
    return channel


async def operation(method: Any, request: Any) -> tuple[list[Any], dict[str, Any]]:
    """Run a streaming RPC: its progress events and its report; failures decoded."""
    progress: list[Any] = []
    report: dict[str, Any] = {}
    try:
        async for response in method(request, timeout=60):
            event = response.event
            if event.WhichOneof("event") == "progress":
                progress.append(event.progress)
            elif (done := event_report(event)) is not None:
                report = done
    except grpc.aio.AioRpcError as err:
        raise decode_error(err) from None
    return progress, report


async def add(ingest: Ingest, target: str, **kwargs: Any) -> dict[str, Any]:
    reply = await call(ingest.stub.AddSource, pb.AddSourceRequest(target=target, **kwargs))
    return to_json(reply.result)


async def sources(ingest: Ingest) -> list[dict[str, Any]]:
    reply = await call(ingest.stub.ListSources, pb.ListSourcesRequest())
    return list(to_json(reply.result)["sources"])


def stored(ingest: Ingest, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = db.connect(ingest.settings.db_path("ingest"), readonly=True)
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def message_ids(ingest: Ingest, chat_id: int) -> list[int]:
    rows = stored(ingest, "SELECT msg_id FROM messages WHERE chat_id = ? ORDER BY 1", chat_id)
    return [r[0] for r in rows]


def assert_error(exc: errors.ChatseekError, code: grpc.StatusCode, reason: str) -> None:
    assert (exc.code, exc.reason) == (code, reason)


# --- sync ---


async def test_a_sync_streams_progress_then_its_report_and_stores_the_messages(
    serve: Serve,
) -> None:
    tg = FakeTelegram(connected=False)
    channel_with(tg, 7)
    async with serve(tg) as ingest:
        await add(ingest, "@chan500")
        progress, report = await operation(ingest.stub.Sync, pb.SyncRequest())
        assert progress and all(p.stage == "sync" for p in progress)
        assert (report["new"], report["chats_done"], report["stopped_by"]) == (7, 1, None)
        assert message_ids(ingest, CHANNEL_ID) == list(range(1, 8))
        chats = await call(ingest.stub.ListChats, pb.ListChatsRequest())
        assert [(c.chat.chat_id, c.message_count) for c in chats.chats] == [(CHANNEL_ID, 7)]
        assert set(ingest.sessions) == {SESSION}
        assert not tg.connected


async def test_a_budget_stops_a_sync_between_chats_and_the_next_sync_resumes(
    serve: Serve,
) -> None:
    tg = FakeTelegram(connected=False)
    channel_with(tg, 3, channel_id=500)
    channel_with(tg, 3, channel_id=600)
    gate = asyncio.Event()

    def hold_first_fetch(method: str) -> None:
        if method == "get_history" and tg.hold is None:
            tg.hold = gate

    async with serve(tg) as ingest:
        await add(ingest, "@chan500")
        await add(ingest, "@chan600")
        tg.on_request = hold_first_fetch
        first = asyncio.ensure_future(
            operation(ingest.stub.Sync, pb.SyncRequest(budget_s=BUDGET_S))
        )
        await tg.holding.wait()
        await asyncio.sleep(2 * BUDGET_S)
        gate.set()
        _, stopped = await first
        assert (stopped["stopped_by"], stopped["chats_done"], stopped["chats_remaining"]) == (
            "budget",
            1,
            1,
        )
        assert stopped["new"] == 3
        _, resumed = await operation(ingest.stub.Sync, pb.SyncRequest())
        assert (resumed["stopped_by"], resumed["new"], resumed["chats_remaining"]) == (None, 3, 0)
        assert message_ids(ingest, -1000000000500) == message_ids(ingest, -1000000000600)


async def test_a_second_sync_while_one_runs_is_refused_at_once_with_sync_running(
    serve: Serve,
) -> None:
    tg = FakeTelegram(connected=False)
    channel_with(tg, 3)
    gate = asyncio.Event()

    def hold_fetch(method: str) -> None:
        if method == "get_history":
            tg.hold = gate

    async with serve(tg) as ingest:
        await add(ingest, "@chan500")
        tg.on_request = hold_fetch
        first = asyncio.ensure_future(operation(ingest.stub.Sync, pb.SyncRequest()))
        await tg.holding.wait()
        asked = len(tg.requests)
        with pytest.raises(errors.SyncRunning) as refused:
            await operation(ingest.stub.Sync, pb.SyncRequest())
        assert_error(refused.value, grpc.StatusCode.FAILED_PRECONDITION, "SYNC_RUNNING")
        assert len(tg.requests) == asked
        gate.set()
        _, report = await first
        assert report["new"] == 3


async def test_a_long_flood_wait_ends_the_sync_with_a_report_not_an_error(serve: Serve) -> None:
    tg = FakeTelegram(connected=False)
    channel_with(tg, 3)
    async with serve(tg) as ingest:
        await add(ingest, "@chan500")
        tg.flood(3600, method="get_history")
        _, report = await operation(ingest.stub.Sync, pb.SyncRequest())
        assert (report["stopped_by"], report["flood_wait_s"]) == ("flood_wait", 3600)
        assert report["chats_remaining"] == 1 and report["warnings"]


async def test_a_sync_without_a_session_file_is_not_authorized_and_points_at_auth(
    serve: Serve,
) -> None:
    tg = FakeTelegram(connected=False)
    async with serve(tg, session=False) as ingest:
        with pytest.raises(errors.NotAuthorized) as refused:
            await operation(ingest.stub.Sync, pb.SyncRequest())
        assert_error(refused.value, grpc.StatusCode.FAILED_PRECONDITION, "NOT_AUTHORIZED")
        assert "chatseek auth" in refused.value.hint
        assert tg.requests == []


# --- sources and dialogs ---


async def test_sources_are_added_listed_pruned_and_removed_over_grpc(serve: Serve) -> None:
    tg = FakeTelegram(connected=False)
    madrid = tg.add_channel(100, "Madrid Expats", megagroup=True)
    valencia = tg.add_channel(101, "Valencia Expats", megagroup=True)
    tg.add_folder(7, "Spain", [madrid, valencia])
    since = int(BASE_DATE.timestamp())
    async with serve(tg) as ingest:
        added = await add(ingest, "folder:Spain", since=since)
        assert (added["source"], added["kind"], len(added["chats"])) == (
            "folder:Spain",
            "folder",
            2,
        )
        listed = await sources(ingest)
        assert [(s["source_id"], s["since"], len(s["chats"])) for s in listed] == [
            ("folder:Spain", since, 2)
        ]

        tg.add_folder(7, "Spain", [madrid])
        preview = await call(ingest.stub.PruneSources, pb.PruneSourcesRequest(dry_run=True))
        would = answer_json(preview)["would_remove"]
        assert [c["chat_id"] for c in would] == [-1000000000101]
        assert len((await sources(ingest))[0]["chats"]) == 2
        pruned = await call(ingest.stub.PruneSources, pb.PruneSourcesRequest())
        assert [c["chat_id"] for c in answer_json(pruned)["removed"]] == [-1000000000101]
        assert [c["id"] for c in (await sources(ingest))[0]["chats"]] == [-1000000000100]

        removed = await call(ingest.stub.RemoveSource, pb.RemoveSourceRequest(target="Spain"))
        assert to_json(removed.result)["removed_chat_ids"] == [-1000000000100]
        assert await sources(ingest) == []


async def test_an_unknown_source_target_is_chat_not_found(serve: Serve) -> None:
    async with serve(FakeTelegram(connected=False)) as ingest:
        with pytest.raises(errors.ChatNotFound) as missing:
            await add(ingest, "@nobody_has_this")
        assert_error(missing.value, grpc.StatusCode.NOT_FOUND, "CHAT_NOT_FOUND")


async def test_dialogs_find_chats_and_folders_with_the_target_to_add(serve: Serve) -> None:
    tg = FakeTelegram(connected=False)
    madrid = tg.add_channel(100, "Madrid Expats", username="madrid_expats", megagroup=True)
    tg.add_folder(7, "Expat chats", [madrid])
    async with serve(tg) as ingest:
        reply = await call(ingest.stub.Dialogs, pb.DialogsRequest(query="expat", limit=5))
        doc = to_json(reply.result)
        targets = {m["kind"]: m["target"] for m in doc["matches"]}
        assert doc["query"] == "expat"
        assert targets == {"chat": "@madrid_expats", "folder": "folder:Expat chats"}


# --- auth ---


async def test_auth_refuses_a_wrong_code_then_writes_a_0600_session_that_sync_uses(
    serve: Serve,
) -> None:
    tg = FakeTelegram(authorized=False, connected=False, me_name="Ana")
    async with serve(tg, session=False) as ingest:
        with pytest.raises(errors.NotAuthorized):
            await call(ingest.stub.Dialogs, pb.DialogsRequest(query="x"))
        started = await call(ingest.stub.StartAuth, pb.StartAuthRequest(phone=DEFAULT_PHONE))
        token = started.login_token
        with pytest.raises(errors.InvalidArgument) as wrong:
            await call(
                ingest.stub.CompleteAuth, pb.CompleteAuthRequest(login_token=token, code="00000")
            )
        assert_error(wrong.value, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert wrong.value.metadata["field"] == "code"
        path = session_path(ingest.settings.home, ingest.settings.account)
        assert not path.exists()

        done = await call(
            ingest.stub.CompleteAuth, pb.CompleteAuthRequest(login_token=token, code=DEFAULT_CODE)
        )
        assert (done.user, done.session_path) == ("Ana", str(path))
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        _, report = await operation(ingest.stub.Sync, pb.SyncRequest())
        assert report["stopped_by"] is None
        assert ingest.sessions[-1] == path.read_text()


async def test_a_two_step_account_is_asked_for_its_password(serve: Serve) -> None:
    tg = FakeTelegram(authorized=False, connected=False, password="correct horse")
    async with serve(tg, session=False) as ingest:
        started = await call(ingest.stub.StartAuth, pb.StartAuthRequest(phone=DEFAULT_PHONE))
        request = pb.CompleteAuthRequest(login_token=started.login_token, code=DEFAULT_CODE)
        with pytest.raises(errors.NotAuthorized) as needs:
            await call(ingest.stub.CompleteAuth, request)
        assert needs.value.metadata == {"needs": "password"}
        request.password = "correct horse"
        done = await call(ingest.stub.CompleteAuth, request)
        assert Path(done.session_path).exists()


async def test_auth_without_api_credentials_names_the_config_keys_and_variables(
    serve: Serve,
) -> None:
    async with serve(FakeTelegram(connected=False), session=False, api=False) as ingest:
        with pytest.raises(errors.FailedPrecondition) as missing:
            await call(ingest.stub.StartAuth, pb.StartAuthRequest(phone=DEFAULT_PHONE))
        assert_error(missing.value, grpc.StatusCode.FAILED_PRECONDITION, "FAILED_PRECONDITION")
        assert missing.value.metadata["variable"] == ENV_API_ID
        assert missing.value.metadata["config"] == str(ingest.settings.config_path)


# --- extract and prune-deleted ---


def pdf_bytes(text: str) -> bytes:
    buffer = io.BytesIO()
    sheet = canvas.Canvas(buffer)
    sheet.drawString(72, 720, text)
    sheet.showPage()
    sheet.save()
    return buffer.getvalue()


def pdf_media(name: str, size: int) -> Any:
    return types.MessageMediaDocument(
        document=types.Document(
            id=1,
            access_hash=2,
            file_reference=b"",
            date=BASE_DATE,
            mime_type="application/pdf",
            size=size,
            dc_id=2,
            attributes=[types.DocumentAttributeFilename(file_name=name)],
        )
    )


async def test_extract_downloads_a_synced_pdf_from_telegram_and_records_its_text(
    serve: Serve,
) -> None:
    tg = FakeTelegram(connected=False)
    channel = channel_with(tg, 1)
    data = pdf_bytes(PDF_PHRASE)
    post = tg.send(channel, "the contract", media=pdf_media("lease.pdf", len(data)))
    tg.set_file(channel, post.id, data)
    async with serve(tg) as ingest:
        await add(ingest, "@chan500")
        await operation(ingest.stub.Sync, pb.SyncRequest())
        progress, report = await operation(ingest.stub.Extract, pb.ExtractRequest())
        assert report["counts"] == {"read": 1} and report["remaining"] == 0
        assert [p.stage for p in progress] == ["extract"]
        [(state, text)] = stored(ingest, "SELECT extract_state, extracted_text FROM media")
        assert state == "read" and PDF_PHRASE in text
        assert tg.requested("download_media") == [CHANNEL_ID]


async def test_prune_deleted_removes_what_telegram_no_longer_has(serve: Serve) -> None:
    tg = FakeTelegram(connected=False)
    channel = channel_with(tg, 5)
    async with serve(tg) as ingest:
        await add(ingest, "@chan500")
        await operation(ingest.stub.Sync, pb.SyncRequest())
        tg.delete(channel, 2, 4)
        _, report = await operation(
            ingest.stub.PruneDeleted, pb.PruneDeletedRequest(chat_id=CHANNEL_ID)
        )
        assert (report["checked"], report["deleted"], report["chats_done"]) == (5, 2, 1)
        assert message_ids(ingest, CHANNEL_ID) == [1, 3, 5]
