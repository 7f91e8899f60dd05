"""The ingest service over gRPC: streamed import, idempotence, chat specs and tags."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from chatseek.ingest.v1 import ingest_service_pb2 as pb
from chatseek.ingest.v1 import ingest_service_pb2_grpc
from chatseek_core import errors
from chatseek_core.client import call, decode_error
from chatseek_core.wire_json import event_report, to_json
from chatseek_ingest.server import create_server, open_deps
from chatseek_testing.services import serving, temp_settings

FIXTURES = Path(__file__).parent / "fixtures" / "exports"
CHUNK = 1000


async def _requests(folder: Path, json_name: str, title: str = "") -> AsyncIterator[Any]:
    yield pb.ImportExportRequest(
        start=pb.ImportStart(json_name=json_name, folder_name=folder.name, chat_title=title)
    )
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = file.read_bytes()
        rel = file.relative_to(folder).as_posix()
        for start in range(0, max(len(data), 1), CHUNK):
            piece = data[start : start + CHUNK]
            last = start + CHUNK >= len(data)
            yield pb.ImportExportRequest(chunk=pb.FileChunk(path=rel, data=piece, last=last))


async def _import(stub: Any, requests: AsyncIterator[Any]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    try:
        async for response in stub.ImportExport(requests, timeout=60):
            if (report := event_report(response.event)) is not None:
                result = report
    except grpc.aio.AioRpcError as err:
        raise decode_error(err) from None
    return result


@pytest.fixture
async def ingest(tmp_path: Path) -> AsyncIterator[Any]:
    settings = temp_settings(tmp_path, "ingest")
    async with serving(create_server(settings, open_deps(settings))) as addr:
        async with grpc.aio.insecure_channel(addr) as channel:
            yield ingest_service_pb2_grpc.IngestServiceStub(channel)


async def test_a_streamed_whole_account_export_imports_every_chat(ingest: Any) -> None:
    report = await _import(ingest, _requests(FIXTURES / "account", "result.json"))
    types = {c["title"]: c["type"] for c in report["chats"]}
    assert types["Valencia Expats"] == "supergroup"
    assert types["Valencia Rentals"] == "channel"
    assert types["Bob Builder"] == "private"
    assert report["messages_imported"] > 0
    assert report["source"] == "import:account"


async def test_importing_the_same_export_again_updates_instead_of_duplicating(
    ingest: Any,
) -> None:
    first = await _import(ingest, _requests(FIXTURES / "account", "result.json"))
    second = await _import(ingest, _requests(FIXTURES / "account", "result.json"))
    assert second["messages_imported"] == first["messages_imported"]
    assert second["new"] == 0
    assert second["unchanged"] == first["new"]
    reply = await call(ingest.ListChats, pb.ListChatsRequest())
    assert sum(c.message_count for c in reply.chats) == first["messages_imported"]


async def test_a_chat_title_overrides_a_single_chat_export(ingest: Any) -> None:
    report = await _import(
        ingest, _requests(FIXTURES / "messages_json", "messages.json", title="Renamed")
    )
    assert [c["title"] for c in report["chats"]] == ["Renamed"]


async def test_an_upload_path_escaping_the_export_is_refused(ingest: Any) -> None:
    async def bad() -> AsyncIterator[Any]:
        yield pb.ImportExportRequest(start=pb.ImportStart(json_name="result.json"))
        yield pb.ImportExportRequest(chunk=pb.FileChunk(path="../evil.json", data=b"{}", last=True))

    with pytest.raises(errors.InvalidArgument):
        await _import(ingest, bad())


async def test_a_file_that_is_not_an_export_is_a_located_error(ingest: Any) -> None:
    async def junk() -> AsyncIterator[Any]:
        yield pb.ImportExportRequest(start=pb.ImportStart(json_name="result.json"))
        yield pb.ImportExportRequest(
            chunk=pb.FileChunk(path="result.json", data=b"[1, 2, 3]", last=True)
        )

    with pytest.raises(errors.MalformedExport) as info:
        await _import(ingest, junk())
    assert info.value.reason == "MALFORMED_EXPORT"


async def test_chat_specs_resolve_by_id_title_and_source(ingest: Any) -> None:
    await _import(ingest, _requests(FIXTURES / "account", "result.json"))
    by_title = await call(ingest.ListChats, pb.ListChatsRequest(specs=["valencia expats"]))
    assert [c.chat.title for c in by_title.chats] == ["Valencia Expats"]
    chat_id = by_title.chats[0].chat.chat_id
    by_id = await call(ingest.ListChats, pb.ListChatsRequest(specs=[str(chat_id)]))
    assert by_id.chats[0].chat.chat_id == chat_id
    by_source = await call(ingest.ListChats, pb.ListChatsRequest(specs=["import:account"]))
    assert len(by_source.chats) >= 5
    with pytest.raises(errors.ChatNotFound) as missing:
        await call(ingest.ListChats, pb.ListChatsRequest(specs=["no such chat anywhere"]))
    assert missing.value.candidates
    with pytest.raises(errors.AmbiguousName):
        await call(ingest.ListChats, pb.ListChatsRequest(specs=["valencia"], exactly_one=True))


async def test_tags_attach_list_and_detach(ingest: Any) -> None:
    await _import(ingest, _requests(FIXTURES / "account", "result.json"))
    chats = await call(ingest.ListChats, pb.ListChatsRequest(specs=["Valencia Expats"]))
    target = pb.TagTarget(kind="chat", chat_id=chats.chats[0].chat.chat_id)
    added = await call(ingest.AddTag, pb.AddTagRequest(tag="work", target=target))
    again = await call(ingest.AddTag, pb.AddTagRequest(tag="work", target=target))
    assert (added.added, again.added) == (True, False)
    listed = to_json((await call(ingest.ListTags, pb.ListTagsRequest())).result)
    assert listed["tags"][0]["tag"] == "work"
    with pytest.raises(errors.InvalidValue):
        await call(ingest.AddTag, pb.AddTagRequest(tag="Not Valid!", target=target))
    with pytest.raises(errors.MessageNotFound):
        await call(
            ingest.AddTag,
            pb.AddTagRequest(
                tag="x", target=pb.TagTarget(kind="message", chat_id=target.chat_id, msg_id=999999)
            ),
        )
    removed = await call(ingest.RemoveTag, pb.RemoveTagRequest(tag="work", target=target))
    assert removed.removed


async def test_a_cut_short_upload_is_reported_under_the_users_own_file_name(
    ingest: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "Telegram Export"
    folder.mkdir()
    whole = (FIXTURES / "account" / "result.json").read_bytes()
    (folder / "result.json").write_bytes(whole[: len(whole) * 2 // 3])
    users_path = "/home/ana/Downloads/Telegram Export/result.json"

    async def requests() -> AsyncIterator[Any]:
        first = True
        async for request in _requests(folder, "result.json"):
            if first:
                request.start.json_path = users_path
                first = False
            yield request

    report = await _import(ingest, requests())
    warnings = json.dumps(report["warnings"])
    assert users_path in warnings and "mid-write" in warnings
    assert "import-" not in warnings and "/tmp/" not in warnings
