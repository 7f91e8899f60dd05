"""The gateway's index operations: embed (with status) and reindex."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
from google.protobuf import json_format

from chatseek.embed.v1 import embed_service_pb2 as embed_pb
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek.ingest.v1 import ingest_service_pb2 as ingest_pb
from chatseek.lexical.v1 import lexical_service_pb2 as lexical_pb
from chatseek.vector.v1 import vector_service_pb2 as vector_pb
from chatseek_core.client import call, decode_error
from chatseek_core.errors import InvalidArgument
from chatseek_core.proto_json import document, to_python
from chatseek_gateway.facade.base import Ctx, FacadeBase

__all__ = ["IndexesFacade"]

LONG_TIMEOUT_S = 24 * 3600.0
MODELS_TIMEOUT_S = 3600.0
STATUS_TIMEOUT_S = 30.0


class IndexesFacade(FacadeBase):
    """``Embed``, ``EmbedStatus`` and ``Reindex``."""

    async def _chat_ids(self, account: str, specs: list[str]) -> list[int]:
        if not specs:
            return []
        reply = await call(
            self._deps.peers.ingest.ListChats,
            ingest_pb.ListChatsRequest(accounts=[account], specs=specs),
            timeout=STATUS_TIMEOUT_S,
            idempotent=True,
            peer="ingest",
        )
        return [int(c.chat.chat_id) for c in reply.chats]

    async def Embed(
        self, request: pb.EmbedRequest, context: Ctx
    ) -> AsyncIterator[pb.EmbedResponse]:
        account = self._account(request.account)
        chat_ids = await self._chat_ids(account, list(request.chats))
        stream = self._deps.peers.vector.IndexUnits(
            vector_pb.IndexUnitsRequest(
                account=account, chat_ids=chat_ids, reembed=request.reembed, confirmed=request.yes
            ),
            timeout=LONG_TIMEOUT_S,
        )
        try:
            async for response in stream:
                yield pb.EmbedResponse(event=response.event)
        except grpc.aio.AioRpcError as err:
            raise decode_error(err, "vector") from None

    async def EmbedStatus(
        self, request: pb.EmbedStatusRequest, context: Ctx
    ) -> pb.EmbedStatusResponse:
        reply = await call(
            self._deps.peers.vector.EmbedStatus,
            vector_pb.EmbedStatusRequest(account=self._account(request.account)),
            timeout=STATUS_TIMEOUT_S,
            idempotent=True,
            peer="vector",
        )
        return pb.EmbedStatusResponse(result=reply.result)

    async def Reindex(
        self, request: pb.ReindexRequest, context: Ctx
    ) -> AsyncIterator[pb.ReindexResponse]:
        if request.target == "lexical":
            stream = self._deps.peers.lexical.Reindex(
                lexical_pb.ReindexRequest(), timeout=LONG_TIMEOUT_S
            )
        elif request.target == "vector":
            stream = self._deps.peers.vector.IndexUnits(
                vector_pb.IndexUnitsRequest(reembed=True, confirmed=True), timeout=LONG_TIMEOUT_S
            )
        else:
            raise InvalidArgument(
                f"reindex target {request.target!r} is not lexical or vector",
                metadata={"field": "target"},
            )
        try:
            async for response in stream:
                yield pb.ReindexResponse(event=response.event)
        except grpc.aio.AioRpcError as err:
            raise decode_error(err, request.target) from None

    async def Models(self, request: pb.ModelsRequest, context: Ctx) -> pb.ModelsResponse:
        embed = self._deps.peers.embed
        if request.action == "list":
            reply = await call(
                embed.KnownModels, embed_pb.KnownModelsRequest(), idempotent=True, peer="embed"
            )
        elif request.action == "download":
            if len(request.names) != 1:
                raise InvalidArgument("download takes one model name", metadata={"field": "names"})
            reply = await call(
                embed.DownloadModel,
                embed_pb.DownloadModelRequest(name=request.names[0]),
                timeout=MODELS_TIMEOUT_S,
                peer="embed",
            )
        elif request.action == "verify":
            reply = await call(
                embed.VerifyModels,
                embed_pb.VerifyModelsRequest(names=list(request.names)),
                timeout=MODELS_TIMEOUT_S,
                idempotent=True,
                peer="embed",
            )
        else:
            raise InvalidArgument(
                f"models action {request.action!r} is not list, download or verify",
                metadata={"field": "action"},
            )
        return pb.ModelsResponse(
            result=document(to_python(json_format.MessageToDict(reply.result)))
        )
