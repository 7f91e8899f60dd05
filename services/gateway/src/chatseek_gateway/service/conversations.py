"""The gateway's ``ConversationsService``: build, list, show, links and agent link batches.

Each one resolves its ``chat`` spec through ingest ``ListChats`` (exactly one chat) and forwards
to unitize; results come back typed as unitize wrote them. ``since`` takes the forms every gateway
date takes (``dates.parse_bound``: ISO day or instant, month, age such as ``7d``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from chatseek.gateway.v1 import conversations_service_pb2_grpc
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek.ingest.v1 import ingest_service_pb2 as ingest_pb
from chatseek.unitize.v1 import unitize_service_pb2 as unitize_pb
from chatseek_core.client import call
from chatseek_core.errors import InvalidArgument
from chatseek_gateway.dates import parse_bound
from chatseek_gateway.deps import Deps
from chatseek_gateway.service.common import (
    RESOLVE_TIMEOUT_S,
    Ctx,
    account_of,
    forward_events,
    reach,
)

__all__ = ["ConversationsServicer"]

BUILD_TIMEOUT_S = 24 * 3600.0
READ_TIMEOUT_S = 60.0
BATCH_ACTIONS = ("status", "get", "answer")


class ConversationsServicer(conversations_service_pb2_grpc.ConversationsServiceServicer):
    """Conversation reconstruction, forwarded to unitize."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    async def _conversation_chat(self, account: str, spec: str) -> tuple[str, int]:
        """The ``(account, chat_id)`` that ``spec`` names, exactly one."""
        if not spec:
            raise InvalidArgument(
                "name a chat",
                hint="--chat CHAT (id, @username, link or title)",
                metadata={"field": "chat"},
            )
        reply = await call(
            self._deps.peers.ingest.ListChats,
            ingest_pb.ListChatsRequest(accounts=[account], specs=[spec], exactly_one=True),
            timeout=RESOLVE_TIMEOUT_S,
            idempotent=True,
            peer="ingest",
        )
        chat = reply.chats[0].chat
        return chat.account or account, int(chat.chat_id)

    async def BuildConversations(
        self,
        request: pb.BuildConversationsRequest,
        context: Ctx[pb.BuildConversationsRequest, pb.BuildConversationsResponse],
    ) -> AsyncIterator[pb.BuildConversationsResponse]:
        account = account_of(self._deps, request.account)
        if not request.chats and not request.all:
            raise InvalidArgument(
                "name the chats to build or ask for all of them",
                hint="chatseek conversations build --chat CHAT | --all",
                metadata={"field": "chats"},
            )
        chat_ids = []
        for spec in request.chats:
            account, chat_id = await self._conversation_chat(account, spec)
            chat_ids.append(chat_id)
        await reach(self._deps, "unitize")
        stream = self._deps.peers.unitize.BuildConversations(
            unitize_pb.BuildConversationsRequest(
                account=account, chat_ids=chat_ids, all=request.all
            ),
            timeout=BUILD_TIMEOUT_S,
        )
        async for event in forward_events(
            stream, lambda e: pb.BuildConversationsResponse(event=e), "unitize"
        ):
            yield event

    async def ListConversations(
        self,
        request: pb.ListConversationsRequest,
        context: Ctx[pb.ListConversationsRequest, pb.ListConversationsResponse],
    ) -> pb.ListConversationsResponse:
        since = parse_bound(request.since, upper=False)
        account, chat_id = await self._conversation_chat(
            account_of(self._deps, request.account), request.chat
        )
        reply = await call(
            self._deps.peers.unitize.ListConversations,
            unitize_pb.ListConversationsRequest(
                account=account, chat_id=chat_id, since=since, limit=request.limit
            ),
            timeout=READ_TIMEOUT_S,
            idempotent=True,
            peer="unitize",
        )
        return pb.ListConversationsResponse(result=reply.result)

    async def ShowConversation(
        self,
        request: pb.ShowConversationRequest,
        context: Ctx[pb.ShowConversationRequest, pb.ShowConversationResponse],
    ) -> pb.ShowConversationResponse:
        account, chat_id = await self._conversation_chat(
            account_of(self._deps, request.account), request.chat
        )
        reply = await call(
            self._deps.peers.unitize.ShowConversation,
            unitize_pb.ShowConversationRequest(
                account=account, chat_id=chat_id, conversation_id=request.conversation_id
            ),
            timeout=READ_TIMEOUT_S,
            idempotent=True,
            peer="unitize",
        )
        return pb.ShowConversationResponse(result=reply.result)

    async def MessageLinks(
        self,
        request: pb.MessageLinksRequest,
        context: Ctx[pb.MessageLinksRequest, pb.MessageLinksResponse],
    ) -> pb.MessageLinksResponse:
        account, chat_id = await self._conversation_chat(
            account_of(self._deps, request.account), request.chat
        )
        reply = await call(
            self._deps.peers.unitize.MessageLinks,
            unitize_pb.MessageLinksRequest(account=account, chat_id=chat_id, msg_id=request.msg_id),
            timeout=READ_TIMEOUT_S,
            idempotent=True,
            peer="unitize",
        )
        return pb.MessageLinksResponse(result=reply.result)

    async def ChatLinks(
        self, request: pb.ChatLinksRequest, context: Ctx[pb.ChatLinksRequest, pb.ChatLinksResponse]
    ) -> pb.ChatLinksResponse:
        account, chat_id = await self._conversation_chat(
            account_of(self._deps, request.account), request.chat
        )
        reply = await call(
            self._deps.peers.unitize.ChatLinks,
            unitize_pb.ChatLinksRequest(account=account, chat_id=chat_id),
            timeout=READ_TIMEOUT_S,
            idempotent=True,
            peer="unitize",
        )
        parents: dict[int, int | None] = {int(m): None for m in reply.roots}
        parents.update({int(m): int(p) for m, p in reply.parents.items()})
        links = [pb.ChatLink(msg_id=m, parent_id=parents[m]) for m in sorted(parents)]
        return pb.ChatLinksResponse(result=pb.ChatLinksResult(links=links))

    async def LinkBatch(
        self, request: pb.LinkBatchRequest, context: Ctx[pb.LinkBatchRequest, pb.LinkBatchResponse]
    ) -> pb.LinkBatchResponse:
        if request.action not in BATCH_ACTIONS:
            raise InvalidArgument(
                f"batches action {request.action!r} is not status, get or answer",
                metadata={"field": "action"},
            )
        account, chat_id = await self._conversation_chat(
            account_of(self._deps, request.account), request.chat
        )
        unitize = self._deps.peers.unitize
        result = pb.LinkBatchResult()
        if request.action == "status":
            status = await call(
                unitize.LinkBatchStatus,
                unitize_pb.LinkBatchStatusRequest(account=account, chat_id=chat_id),
                timeout=READ_TIMEOUT_S,
                idempotent=True,
                peer="unitize",
            )
            result.status.CopyFrom(status.result)
        elif request.action == "get":
            batch = await call(
                unitize.GetLinkBatch,
                unitize_pb.GetLinkBatchRequest(account=account, chat_id=chat_id, size=request.size),
                timeout=READ_TIMEOUT_S,
                idempotent=True,
                peer="unitize",
            )
            result.get.CopyFrom(batch.result)
        else:
            answered = await call(
                unitize.AnswerLinkBatch,
                unitize_pb.AnswerLinkBatchRequest(
                    account=account, chat_id=chat_id, answer_json=request.answer_json
                ),
                timeout=READ_TIMEOUT_S,
                peer="unitize",
            )
            result.answer.CopyFrom(answered.result)
        return pb.LinkBatchResponse(result=result)
