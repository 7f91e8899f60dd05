"""Every unitize RPC over real gRPC on loopback, with the feed loop running in the background."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from helpers_unitize import ACCOUNT, GROUP, Stores, make_stores, msg

from chatseek.unitize.v1 import unitize_service_pb2 as pb
from chatseek.unitize.v1 import unitize_service_pb2_grpc
from chatseek_core.client import call, decode_error
from chatseek_core.errors import ChatseekError
from chatseek_core.wire_json import event_report, to_json
from chatseek_testing.services import serving, temp_settings
from chatseek_unitize.schema import MIGRATIONS
from chatseek_unitize.server import create_server, open_deps

WAIT_S = 60.0
POLL_S = 0.05


@pytest.fixture
async def unitize(tmp_path: Path) -> AsyncIterator[tuple[Any, Stores]]:
    """A served unitize over an ingest.db holding one small group chat."""
    settings = temp_settings(tmp_path / "home", "unitize")
    stores = make_stores(settings.data_dir)
    stores.chat(GROUP, title="Neighbours")
    stores.put(
        [
            msg(1, 0, "who has a ladder?", sender=1),
            msg(2, 1, "me, come by", sender=2, reply_to=1),
            msg(3, 2, "User2 which floor?", sender=3),
            msg(4, 200, "power cut tonight", sender=4),
        ]
    )
    running = create_server(settings, open_deps(settings))
    async with serving(running) as addr:
        async with grpc.aio.insecure_channel(addr) as channel:
            stub = unitize_service_pb2_grpc.UnitizeServiceStub(channel)
            await _caught_up(stub)
            yield stub, stores
    stores.close()


async def _status(stub: Any) -> dict[str, Any]:
    reply = await call(stub.GetStatus, pb.GetStatusRequest(), timeout=5)
    status = reply.status
    return {
        "feed_lag": dict(status.feed_lag),
        "schema_version": status.schema_version,
        **to_json(status.unitize),
    }


async def _caught_up(stub: Any) -> dict[str, Any]:
    await call(stub.Notify, pb.NotifyRequest(), timeout=5)
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        status = await _status(stub)
        if status["feed_lag"].get("ingest") == 0 and status.get("units"):
            return status
        assert asyncio.get_running_loop().time() < deadline, status
        await asyncio.sleep(POLL_S)


async def _operation(stream: Any) -> tuple[list[Any], dict[str, Any]]:
    progress: list[Any] = []
    result: dict[str, Any] = {}
    try:
        async for response in stream:
            event = response.event
            if event.WhichOneof("event") == "progress":
                progress.append(event.progress)
            else:
                result = event_report(event) or {}
    except grpc.aio.AioRpcError as err:
        raise decode_error(err, "unitize") from None
    return progress, result


async def _fails(coro: Any) -> ChatseekError:
    with pytest.raises(ChatseekError) as caught:
        await coro
    return caught.value


async def test_the_feed_loop_cuts_units_and_status_reports_them(
    unitize: tuple[Any, Stores],
) -> None:
    stub, stores = unitize
    status = await _status(stub)
    assert status["schema_version"] == MIGRATIONS[-1].number
    assert status["units"]["window"] == 2 and status["units"]["thread"] == 1
    assert status["recut_pending"] == 0

    stores.put([msg(5, 201, "which streets?", sender=1)])
    status = await _caught_up(stub)
    windows = stores.units()
    assert windows["w:4"]["msg_ids"] == "[4, 5]"


async def test_a_brief_status_leaves_out_only_the_unit_counts(
    unitize: tuple[Any, Stores],
) -> None:
    stub, _ = unitize
    full = (await call(stub.GetStatus, pb.GetStatusRequest(), timeout=5)).status
    brief = (await call(stub.GetStatus, pb.GetStatusRequest(brief=True), timeout=5)).status
    assert dict(full.unitize.units) == {"window": 2, "thread": 1}
    assert dict(brief.unitize.units) == {}
    full.unitize.ClearField("units")
    assert brief == full


async def test_build_list_show_and_links_work_over_grpc(unitize: tuple[Any, Stores]) -> None:
    stub, _ = unitize
    progress, result = await _operation(
        stub.BuildConversations(
            pb.BuildConversationsRequest(account=ACCOUNT, chat_ids=[GROUP]), timeout=60
        )
    )
    assert {p.stage for p in progress} >= {"load", "publish"}
    report = result["chats"][0]
    assert report["chat_id"] == GROUP and report["messages"] == 4
    assert "change" in result["note"]

    listed = to_json(
        (
            await call(
                stub.ListConversations,
                pb.ListConversationsRequest(account=ACCOUNT, chat_id=GROUP),
                timeout=5,
            )
        ).result
    )
    assert listed["build_id"] == report["build_id"]
    first = next(c for c in listed["conversations"] if c["first_msg_id"] == 1)

    shown = to_json(
        (
            await call(
                stub.ShowConversation,
                pb.ShowConversationRequest(
                    account=ACCOUNT, chat_id=GROUP, conversation_id=first["conversation_id"]
                ),
                timeout=5,
            )
        ).result
    )
    assert [m["msg_id"] for m in shown["messages"]][:2] == [1, 2]
    assert shown["messages"][1]["locator"] == f"tg:{ACCOUNT}/{GROUP}/2"

    chain = to_json(
        (
            await call(
                stub.MessageLinks,
                pb.MessageLinksRequest(account=ACCOUNT, chat_id=GROUP, msg_id=2),
                timeout=5,
            )
        ).result
    )
    assert chain["chain"][0] == {
        "msg_id": 2,
        "parent_id": 1,
        "reason": "reply",
        "confidence": 1,
        "locator": f"tg:{ACCOUNT}/{GROUP}/2",
    }

    links = await call(
        stub.ChatLinks, pb.ChatLinksRequest(account=ACCOUNT, chat_id=GROUP), timeout=5
    )
    assert dict(links.parents)[2] == 1
    assert 1 in links.roots and set(links.roots) | set(links.parents) == {1, 2, 3, 4}


async def test_link_batches_work_over_grpc(unitize: tuple[Any, Stores]) -> None:
    stub, _ = unitize
    await _operation(stub.BuildConversations(pb.BuildConversationsRequest(all=True), timeout=60))
    status = to_json(
        (
            await call(stub.LinkBatchStatus, pb.LinkBatchStatusRequest(chat_id=GROUP), timeout=5)
        ).result
    )
    assert status["messages"] == 4 and status["stale_answers"] == 0

    batch = to_json(
        (
            await call(stub.GetLinkBatch, pb.GetLinkBatchRequest(chat_id=GROUP, size=2), timeout=5)
        ).result
    )
    assert len(batch["messages"]) == 2

    answer = json.dumps({"answers": [{"msg_id": 4, "parent": 3}, {"msg_id": 3, "parent": 4}]})
    stored = to_json(
        (
            await call(
                stub.AnswerLinkBatch,
                pb.AnswerLinkBatchRequest(chat_id=GROUP, answer_json=answer),
                timeout=5,
            )
        ).result
    )
    assert stored["stored"] == 1
    assert stored["rejected"] == [{"index": 1, "msg_id": 3, "reason": "PARENT_NOT_EARLIER"}]


async def test_recut_streams_progress_and_reports_the_pending_count(
    unitize: tuple[Any, Stores],
) -> None:
    stub, _ = unitize
    progress, result = await _operation(
        stub.Recut(pb.RecutRequest(account=ACCOUNT, chat_ids=[GROUP]), timeout=30)
    )
    assert [p.done for p in progress] == [1]
    assert result == {"chats": 1, "upserted": 0, "deleted": 0, "pending_left": 0}


async def test_rpc_errors_carry_codes_and_reasons(unitize: tuple[Any, Stores]) -> None:
    stub, _ = unitize
    not_built = await _fails(
        call(stub.ListConversations, pb.ListConversationsRequest(chat_id=GROUP), timeout=5)
    )
    assert (not_built.code, not_built.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "INDEX_NOT_READY",
    )
    nothing = await _fails(_operation(stub.BuildConversations(pb.BuildConversationsRequest())))
    assert (nothing.code, nothing.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    unknown = await _fails(
        _operation(stub.BuildConversations(pb.BuildConversationsRequest(chat_ids=[42])))
    )
    assert (unknown.code, unknown.reason) == (grpc.StatusCode.NOT_FOUND, "CHAT_NOT_FOUND")

    await _operation(stub.BuildConversations(pb.BuildConversationsRequest(chat_ids=[GROUP])))
    missing = await _fails(
        call(
            stub.ShowConversation,
            pb.ShowConversationRequest(chat_id=GROUP, conversation_id=999),
            timeout=5,
        )
    )
    assert (missing.code, missing.reason) == (grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
    no_msg = await _fails(
        call(stub.MessageLinks, pb.MessageLinksRequest(chat_id=GROUP, msg_id=999), timeout=5)
    )
    assert (no_msg.code, no_msg.reason) == (grpc.StatusCode.NOT_FOUND, "MESSAGE_NOT_FOUND")
    bad = await _fails(
        call(
            stub.AnswerLinkBatch,
            pb.AnswerLinkBatchRequest(chat_id=GROUP, answer_json="{"),
            timeout=5,
        )
    )
    assert (bad.code, bad.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_VALUE")
    size = await _fails(
        call(stub.GetLinkBatch, pb.GetLinkBatchRequest(chat_id=GROUP, size=100000), timeout=5)
    )
    assert (size.code, size.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_VALUE")
