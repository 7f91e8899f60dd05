"""The gateway's archive RPCs: import, tags (and, through ingest, sync, sources, extract)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek.ingest.v1 import ingest_service_pb2 as ingest_pb
from chatseek_core.client import call, decode_error
from chatseek_core.errors import InvalidArgument
from chatseek_core.proto_json import document
from chatseek_gateway.facade.base import Ctx, FacadeBase

__all__ = ["ArchiveFacade"]

IMPORT_TIMEOUT_S = 24 * 3600.0
TAG_TIMEOUT_S = 30.0


class ArchiveFacade(FacadeBase):
    """Archive operations, forwarded to ingest."""

    async def Import(
        self, request_iterator: AsyncIterator[pb.ImportRequest], context: Ctx
    ) -> AsyncIterator[pb.ImportResponse]:
        account = self._deps.settings.account

        async def forward() -> AsyncIterator[ingest_pb.ImportExportRequest]:
            async for request in request_iterator:
                if request.WhichOneof("item") == "start":
                    s = request.start
                    yield ingest_pb.ImportExportRequest(
                        start=ingest_pb.ImportStart(
                            json_name=s.json_name,
                            folder_name=s.folder_name,
                            chat_title=s.chat_title,
                            account=s.account or account,
                            json_size=s.json_size,
                        )
                    )
                else:
                    c = request.chunk
                    yield ingest_pb.ImportExportRequest(
                        chunk=ingest_pb.FileChunk(path=c.path, data=c.data, last=c.last)
                    )

        stream = self._deps.peers.ingest.ImportExport(forward(), timeout=IMPORT_TIMEOUT_S)
        try:
            async for response in stream:
                yield pb.ImportResponse(event=response.event)
        except grpc.aio.AioRpcError as err:
            raise decode_error(err, "ingest") from None

    async def _chat_id(self, account: str, spec: str) -> int:
        reply = await call(
            self._deps.peers.ingest.ListChats,
            ingest_pb.ListChatsRequest(accounts=[account], specs=[spec], exactly_one=True),
            timeout=TAG_TIMEOUT_S,
            idempotent=True,
            peer="ingest",
        )
        return int(reply.chats[0].chat.chat_id)

    async def _tag_target(self, request: pb.TagsRequest, account: str) -> ingest_pb.TagTarget:
        given = [bool(request.chat), bool(request.sender), bool(request.message)]
        if sum(given) != 1:
            raise InvalidArgument(
                "name exactly one of --chat, --sender or --message",
                metadata={"field": "target"},
            )
        if request.chat:
            chat_id = await self._chat_id(account, request.chat)
            return ingest_pb.TagTarget(account=account, kind="chat", chat_id=chat_id)
        if request.sender:
            sender = request.sender.lstrip("@")
            if not sender.lstrip("-").isdigit():
                raise InvalidArgument(
                    f"--sender {request.sender!r} is not a numeric sender id",
                    hint="use the sender id shown in search results",
                    metadata={"field": "sender"},
                )
            return ingest_pb.TagTarget(account=account, kind="sender", sender_id=int(sender))
        chat_spec, sep, msg = request.message.rpartition("/")
        if not sep or not msg.isdigit() or not chat_spec:
            raise InvalidArgument(
                f"--message {request.message!r} is not CHAT/MSG",
                hint="e.g. --message -1001234567890/42",
                metadata={"field": "message"},
            )
        chat_id = await self._chat_id(account, chat_spec)
        return ingest_pb.TagTarget(
            account=account, kind="message", chat_id=chat_id, msg_id=int(msg)
        )

    async def Tags(self, request: pb.TagsRequest, context: Ctx) -> pb.TagsResponse:
        account = self._account(request.account)
        ingest = self._deps.peers.ingest
        if request.action == "ls":
            reply = await call(
                ingest.ListTags, ingest_pb.ListTagsRequest(account=account), idempotent=True
            )
            return pb.TagsResponse(result=reply.result)
        if request.action not in ("add", "rm"):
            raise InvalidArgument(
                f"tags action {request.action!r} is not add, rm or ls",
                metadata={"field": "action"},
            )
        target = await self._tag_target(request, account)
        result: dict[str, Any]
        if request.action == "add":
            added = await call(
                ingest.AddTag, ingest_pb.AddTagRequest(tag=request.tag, target=target)
            )
            result = {"tag": request.tag, "added": added.added}
        else:
            removed = await call(
                ingest.RemoveTag, ingest_pb.RemoveTagRequest(tag=request.tag, target=target)
            )
            result = {"tag": request.tag, "removed": removed.removed}
        result["target"] = {
            "kind": target.kind,
            "chat_id": target.chat_id,
            "sender_id": target.sender_id,
            "msg_id": target.msg_id,
        }
        return pb.TagsResponse(result=document(result))
