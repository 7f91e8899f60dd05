"""Errors keep their class, code, reason, hint and candidates across the wire."""

from __future__ import annotations

import errno
from typing import Any

import grpc
import pytest
import sqlean

from chatseek.fusion.v1 import fusion_service_pb2 as pb
from chatseek.fusion.v1 import fusion_service_pb2_grpc
from chatseek_core import errors
from chatseek_core.client import aio_channel, call
from chatseek_core.runner import Running
from chatseek_core.server import build_server
from chatseek_testing.services import serving


class _Failing(fusion_service_pb2_grpc.FusionServiceServicer):
    def __init__(self, exc: Exception) -> None:
        self.exc = exc
        self.calls = 0

    async def Thread(self, request: pb.ThreadRequest, context: Any) -> pb.ThreadResponse:
        self.calls += 1
        raise self.exc


async def _call_with(exc: Exception, *, idempotent: bool = False) -> Exception:
    return (await _calls_with(exc, idempotent=idempotent))[0]


async def _calls_with(exc: Exception, *, idempotent: bool) -> tuple[Exception, int]:
    """The error a client got for ``exc`` and how many calls the server saw."""
    servicer = _Failing(exc)

    def register(server: Any) -> list[str]:
        fusion_service_pb2_grpc.add_FusionServiceServicer_to_server(servicer, server)
        return ["chatseek.fusion.v1.FusionService"]

    handle = build_server(service="fusion", listen="127.0.0.1:0", register=register)
    async with serving(Running(handle=handle)) as addr:
        channel = aio_channel(addr)
        stub = fusion_service_pb2_grpc.FusionServiceStub(channel)
        try:
            await call(
                stub.Thread, pb.ThreadRequest(chat="x", msg_id=1), timeout=5, idempotent=idempotent
            )
        except Exception as got:
            return got, servicer.calls
        finally:
            await channel.close()
    raise AssertionError("the call did not fail")


@pytest.mark.parametrize(
    "exc",
    [
        errors.AmbiguousName("two chats match", hint="use an id", candidates=["a", "b"]),
        errors.QueryLimit("too deep", metadata={"budget": "depth"}),
        errors.ChatNotFound("no such chat"),
        errors.EmbeddingSpaceMismatch("model changed", hint="chatseek embed --reembed"),
        errors.Overloaded("busy", retry_after_s=0.5),
    ],
)
async def test_a_chatseek_error_arrives_as_the_same_class_with_code_and_reason(
    exc: errors.ChatseekError,
) -> None:
    got = await _call_with(exc)
    assert type(got) is type(exc)
    assert isinstance(got, errors.ChatseekError)
    assert got.code == exc.code
    assert got.reason == exc.reason
    assert got.hint == exc.hint
    assert got.candidates == exc.candidates
    assert got.metadata == exc.metadata
    assert got.retry_after_s == exc.retry_after_s


async def test_an_unexpected_exception_becomes_internal_without_internals() -> None:
    got = await _call_with(KeyError("secret-internal-detail"))
    assert isinstance(got, errors.ChatseekError)
    assert got.code == grpc.StatusCode.INTERNAL
    assert "secret-internal-detail" not in got.message


async def test_an_unknown_reason_decodes_to_the_base_class_of_its_code() -> None:
    class Novel(errors.NotFound):
        reason = "SOMETHING_NEW"

    got = await _call_with(Novel("new kind of missing"))
    assert isinstance(got, errors.NotFound)
    assert got.reason in ("SOMETHING_NEW", "NOT_FOUND")


@pytest.mark.parametrize(
    "exc",
    [
        errors.ModelUnavailable("no reranker: none configured", metadata={"configured": "false"}),
        errors.Unavailable("fusion is unreachable"),
    ],
)
async def test_an_unavailable_a_server_answered_is_not_asked_again(
    exc: errors.ChatseekError,
) -> None:
    got, calls = await _calls_with(exc, idempotent=True)
    assert type(got) is type(exc)
    assert calls == 1


async def test_an_unreachable_peer_is_unavailable() -> None:
    channel = aio_channel("127.0.0.1:1")
    stub = fusion_service_pb2_grpc.FusionServiceStub(channel)
    with pytest.raises(errors.Unavailable):
        await call(stub.Thread, pb.ThreadRequest(chat="x", msg_id=1), timeout=2, idempotent=True)
    await channel.close()


@pytest.mark.parametrize(
    "exc",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EROFS, "Read-only file system"),
        sqlean.OperationalError("database or disk is full"),
    ],
)
async def test_a_full_or_read_only_disk_arrives_as_a_storage_error_that_says_what_to_do(
    exc: Exception,
) -> None:
    got = await _call_with(exc)
    assert isinstance(got, errors.StorageError)
    assert "cannot be written" in got.message
    assert "free disk space or make the data directory writable" in got.hint
