"""The unitize servicer: proto in, typed core call, proto out."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from chatseek.common.v1 import common_pb2
from chatseek.unitize.v1 import unitize_service_pb2 as pb
from chatseek.unitize.v1 import unitize_service_pb2_grpc
from chatseek_core import db
from chatseek_core.aio import stream_progress, to_thread
from chatseek_core.errors import InvalidArgument
from chatseek_core.operations import operation_progress
from chatseek_core.status import service_status
from chatseek_core.wire_json import from_json
from chatseek_unitize import batches, builds, readers, units
from chatseek_unitize.deps import Deps
from chatseek_unitize.model import RECIPE_VERSION
from chatseek_unitize.schema import OWNER
from chatseek_unitize.store import unit_counts

__all__ = ["UnitizeServicer"]

Ctx = grpc.aio.ServicerContext
PENDING_LISTED = 20


def _operation_event(kind: str, value: object, stage: str) -> common_pb2.OperationEvent:
    """An ``OperationEvent`` for one item of ``stream_progress`` (a result is a typed report)."""
    if kind == "result":
        if isinstance(value, common_pb2.RecutReport):
            return common_pb2.OperationEvent(recut=value)
        assert isinstance(value, common_pb2.ConversationBuildReport)
        return common_pb2.OperationEvent(conversations_build=value)
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], str):
        name, done, total = value
        return operation_progress(name, int(done), int(total))
    done, total, note = value if isinstance(value, tuple) else (0, 0, "")
    return operation_progress(stage, int(done), int(total), str(note))


class UnitizeServicer(unitize_service_pb2_grpc.UnitizeServiceServicer):
    """Thin adapter over the unitize core functions."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    def _account(self, account: str) -> str:
        return account or self._deps.settings.account

    def _conn(self) -> db.Connection:
        return self._deps.pool.get()

    async def Notify(
        self, request: pb.NotifyRequest, context: Ctx[pb.NotifyRequest, pb.NotifyResponse]
    ) -> pb.NotifyResponse:
        if self._deps.loop is not None:
            self._deps.loop.nudge()
        return pb.NotifyResponse()

    async def Recut(
        self, request: pb.RecutRequest, context: Ctx[pb.RecutRequest, pb.RecutResponse]
    ) -> AsyncIterator[pb.RecutResponse]:
        account = request.account or (self._deps.settings.account if request.chat_ids else "")
        chat_ids = list(request.chat_ids)

        def run(on_progress: units.Progress) -> common_pb2.RecutReport:
            report = units.recut_chats(
                self._conn(), account=account, chat_ids=chat_ids, on_progress=on_progress
            )
            return common_pb2.RecutReport(
                chats=report.chats,
                upserted=report.upserted,
                deleted=report.deleted,
                pending_left=report.pending_left,
            )

        async for kind, value in stream_progress(run):
            if kind == "result":
                await self._deps.nudger.nudge()
            yield pb.RecutResponse(event=_operation_event(kind, value, "recut"))

    async def BuildConversations(
        self,
        request: pb.BuildConversationsRequest,
        context: Ctx[pb.BuildConversationsRequest, pb.BuildConversationsResponse],
    ) -> AsyncIterator[pb.BuildConversationsResponse]:
        if not request.chat_ids and not request.all:
            raise InvalidArgument(
                "name the chats to build or ask for all of them",
                hint="chatseek conversations build --chat CHAT | --all",
                metadata={"field": "chat_ids"},
            )
        account = self._account(request.account)
        chat_ids = list(request.chat_ids)

        def run(on_progress: builds.Progress) -> common_pb2.ConversationBuildReport:
            reports = builds.build_chats(
                self._conn(), account, chat_ids, all_chats=request.all, on_progress=on_progress
            )
            doc = {"account": account, "chats": [r.to_dict() for r in reports]}
            doc["note"] = readers.IDS_NOTE
            return from_json(doc, common_pb2.ConversationBuildReport())

        async for kind, value in stream_progress(run):
            if kind == "result":
                await self._deps.nudger.nudge()
            yield pb.BuildConversationsResponse(event=_operation_event(kind, value, "build"))

    async def ListConversations(
        self,
        request: pb.ListConversationsRequest,
        context: Ctx[pb.ListConversationsRequest, pb.ListConversationsResponse],
    ) -> pb.ListConversationsResponse:
        account = self._account(request.account)
        doc = await to_thread(
            lambda: readers.list_conversations(
                self._conn(), account, request.chat_id, since=request.since, limit=request.limit
            )
        )
        return pb.ListConversationsResponse(result=from_json(doc, common_pb2.ConversationList()))

    async def ShowConversation(
        self,
        request: pb.ShowConversationRequest,
        context: Ctx[pb.ShowConversationRequest, pb.ShowConversationResponse],
    ) -> pb.ShowConversationResponse:
        account = self._account(request.account)
        doc = await to_thread(
            lambda: readers.show_conversation(
                self._conn(), account, request.chat_id, request.conversation_id
            )
        )
        return pb.ShowConversationResponse(result=from_json(doc, common_pb2.ConversationView()))

    async def MessageLinks(
        self,
        request: pb.MessageLinksRequest,
        context: Ctx[pb.MessageLinksRequest, pb.MessageLinksResponse],
    ) -> pb.MessageLinksResponse:
        account = self._account(request.account)
        doc = await to_thread(
            lambda: readers.message_links(self._conn(), account, request.chat_id, request.msg_id)
        )
        return pb.MessageLinksResponse(result=from_json(doc, common_pb2.MessageLinksResult()))

    async def ChatLinks(
        self, request: pb.ChatLinksRequest, context: Ctx[pb.ChatLinksRequest, pb.ChatLinksResponse]
    ) -> pb.ChatLinksResponse:
        account = self._account(request.account)
        parents = await to_thread(
            lambda: readers.chat_links(self._conn(), account, request.chat_id)
        )
        return pb.ChatLinksResponse(
            parents={m: p for m, p in parents.items() if p is not None},
            roots=[m for m, p in parents.items() if p is None],
        )

    async def LinkBatchStatus(
        self,
        request: pb.LinkBatchStatusRequest,
        context: Ctx[pb.LinkBatchStatusRequest, pb.LinkBatchStatusResponse],
    ) -> pb.LinkBatchStatusResponse:
        account = self._account(request.account)
        doc = await to_thread(lambda: batches.batch_status(self._conn(), account, request.chat_id))
        return pb.LinkBatchStatusResponse(result=from_json(doc, common_pb2.LinkBatchStatus()))

    async def GetLinkBatch(
        self,
        request: pb.GetLinkBatchRequest,
        context: Ctx[pb.GetLinkBatchRequest, pb.GetLinkBatchResponse],
    ) -> pb.GetLinkBatchResponse:
        account = self._account(request.account)
        size = request.size or batches.DEFAULT_BATCH_SIZE
        doc = await to_thread(
            lambda: batches.get_batch(self._conn(), account, request.chat_id, size)
        )
        return pb.GetLinkBatchResponse(result=from_json(doc, common_pb2.LinkBatch()))

    async def AnswerLinkBatch(
        self,
        request: pb.AnswerLinkBatchRequest,
        context: Ctx[pb.AnswerLinkBatchRequest, pb.AnswerLinkBatchResponse],
    ) -> pb.AnswerLinkBatchResponse:
        account = self._account(request.account)
        doc = await to_thread(
            lambda: batches.answer_batch(
                self._conn(), account, request.chat_id, request.answer_json
            )
        )
        return pb.AnswerLinkBatchResponse(result=from_json(doc, common_pb2.LinkAnswerReport()))

    async def GetStatus(
        self, request: pb.GetStatusRequest, context: Ctx[pb.GetStatusRequest, pb.GetStatusResponse]
    ) -> pb.GetStatusResponse:
        def read() -> pb.GetStatusResponse:
            conn = self._conn()
            pending = units.recut_pending(conn)
            counts = {} if request.brief else unit_counts(conn)
            built = builds.built_chats(conn)
            return pb.GetStatusResponse(
                status=service_status(
                    OWNER,
                    schema_version=db.schema_version(conn, OWNER),
                    feed_lag={"ingest": units.ingest_lag(conn)},
                    details={
                        "units": counts,
                        "recut_pending": len(pending),
                        "recut_pending_chats": [
                            {"account": a, "chat_id": c} for a, c in pending[:PENDING_LISTED]
                        ],
                        "recipe": RECIPE_VERSION,
                        "built_chats": built,
                    },
                )
            )

        return await to_thread(read)
