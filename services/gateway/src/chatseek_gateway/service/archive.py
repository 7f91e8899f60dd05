"""The gateway's ``ArchiveService``, forwarded to ingest: import, tags, Telegram auth, dialogs,
sources, sync, extract and prune-deleted.

Chat specs (ids, @usernames, titles, ``import:<slug>``) are resolved to chat ids through ingest's
``ListChats``; dates such as ``--since`` become unix seconds here. Streaming operations pass
ingest's progress events and typed final report through unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from chatseek.common.v1 import common_pb2
from chatseek.gateway.v1 import archive_service_pb2_grpc
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek.ingest.v1 import ingest_service_pb2 as ingest_pb
from chatseek_core.aio import drain
from chatseek_core.client import call, decode_error
from chatseek_core.errors import InvalidArgument
from chatseek_core.wire_json import from_json
from chatseek_gateway.dates import parse_bound
from chatseek_gateway.deps import Deps
from chatseek_gateway.service.common import (
    RESOLVE_TIMEOUT_S,
    Ctx,
    account_of,
    chat_ids,
    forward_events,
    reach,
)

__all__ = ["ArchiveServicer"]

IMPORT_TIMEOUT_S = 24 * 3600.0
OPERATION_TIMEOUT_S = 24 * 3600.0
TAG_TIMEOUT_S = 30.0
TELEGRAM_TIMEOUT_S = 120.0
PRUNE_TIMEOUT_S = 600.0
SOURCE_ACTIONS = ("ls", "add", "rm", "prune")
# Any Telegram id has fewer digits; more would not fit the int64 fields of the requests.
MAX_ID_DIGITS = 18


def _id(text: str) -> int | None:
    """The integer ``text`` spells in ASCII digits (maybe negative), if it fits an id."""
    digits = text[1:] if text.startswith("-") else text
    if digits.isascii() and digits.isdigit() and len(digits) <= MAX_ID_DIGITS:
        return int(text)
    return None


class ArchiveServicer(archive_service_pb2_grpc.ArchiveServiceServicer):
    """Archive operations, forwarded to ingest."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    async def Import(
        self,
        request_iterator: AsyncIterator[pb.ImportRequest],
        context: Ctx[pb.ImportRequest, pb.ImportResponse],
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
                            json_path=s.json_path,
                        )
                    )
                else:
                    c = request.chunk
                    yield ingest_pb.ImportExportRequest(
                        chunk=ingest_pb.FileChunk(path=c.path, data=c.data, last=c.last)
                    )

        await reach(self._deps, "ingest")
        stream = self._deps.peers.ingest.ImportExport(forward(), timeout=IMPORT_TIMEOUT_S)
        try:
            async for response in stream:
                yield pb.ImportResponse(event=response.event)
        except grpc.aio.AioRpcError as err:
            await drain(request_iterator)  # so that the client is told why (see ``drain``)
            raise decode_error(err, "ingest") from None

    async def _chat_id(self, account: str, spec: str) -> int:
        reply = await call(
            self._deps.peers.ingest.ListChats,
            ingest_pb.ListChatsRequest(accounts=[account], specs=[spec], exactly_one=True),
            timeout=RESOLVE_TIMEOUT_S,
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
            sender_id = _id(request.sender.lstrip("@"))
            if sender_id is None:
                raise InvalidArgument(
                    f"--sender {request.sender!r} is not a numeric sender id",
                    hint="use the sender id shown in search results",
                    metadata={"field": "sender"},
                )
            return ingest_pb.TagTarget(account=account, kind="sender", sender_id=sender_id)
        chat_spec, sep, msg = request.message.rpartition("/")
        msg_id = _id(msg)
        if not sep or msg_id is None or not chat_spec:
            raise InvalidArgument(
                f"--message {request.message!r} is not CHAT/MSG",
                hint="e.g. --message -1001234567890/42",
                metadata={"field": "message"},
            )
        chat_id = await self._chat_id(account, chat_spec)
        return ingest_pb.TagTarget(account=account, kind="message", chat_id=chat_id, msg_id=msg_id)

    async def Tags(
        self, request: pb.TagsRequest, context: Ctx[pb.TagsRequest, pb.TagsResponse]
    ) -> pb.TagsResponse:
        account = account_of(self._deps, request.account)
        ingest = self._deps.peers.ingest
        if request.action == "ls":
            reply = await call(
                ingest.ListTags, ingest_pb.ListTagsRequest(account=account), idempotent=True
            )
            return pb.TagsResponse(listed=reply.result)
        if request.action not in ("add", "rm"):
            raise InvalidArgument(
                f"tags action {request.action!r} is not add, rm or ls",
                metadata={"field": "action"},
            )
        target = await self._tag_target(request, account)
        tagged = from_json(
            {
                "kind": target.kind,
                "chat_id": target.chat_id,
                "sender_id": target.sender_id,
                "msg_id": target.msg_id,
            },
            common_pb2.TaggedTarget(),
        )
        if request.action == "add":
            added = await call(
                ingest.AddTag, ingest_pb.AddTagRequest(tag=request.tag, target=target)
            )
            return pb.TagsResponse(
                added=common_pb2.TagAdded(tag=request.tag, added=added.added, target=tagged)
            )
        removed = await call(
            ingest.RemoveTag, ingest_pb.RemoveTagRequest(tag=request.tag, target=target)
        )
        return pb.TagsResponse(
            removed=common_pb2.TagRemoved(tag=request.tag, removed=removed.removed, target=tagged)
        )

    # --- Telegram ---

    async def StartAuth(
        self, request: pb.StartAuthRequest, context: Ctx[pb.StartAuthRequest, pb.StartAuthResponse]
    ) -> pb.StartAuthResponse:
        reply = await call(
            self._deps.peers.ingest.StartAuth,
            ingest_pb.StartAuthRequest(
                account=account_of(self._deps, request.account), phone=request.phone
            ),
            timeout=TELEGRAM_TIMEOUT_S,
            peer="ingest",
        )
        return pb.StartAuthResponse(login_token=reply.login_token)

    async def CompleteAuth(
        self,
        request: pb.CompleteAuthRequest,
        context: Ctx[pb.CompleteAuthRequest, pb.CompleteAuthResponse],
    ) -> pb.CompleteAuthResponse:
        reply = await call(
            self._deps.peers.ingest.CompleteAuth,
            ingest_pb.CompleteAuthRequest(
                account=account_of(self._deps, request.account),
                login_token=request.login_token,
                code=request.code,
                password=request.password,
            ),
            timeout=TELEGRAM_TIMEOUT_S,
            peer="ingest",
        )
        return pb.CompleteAuthResponse(user=reply.user, session_path=reply.session_path)

    async def Dialogs(
        self, request: pb.DialogsRequest, context: Ctx[pb.DialogsRequest, pb.DialogsResponse]
    ) -> pb.DialogsResponse:
        reply = await call(
            self._deps.peers.ingest.Dialogs,
            ingest_pb.DialogsRequest(
                account=account_of(self._deps, request.account),
                query=request.query,
                limit=request.limit,
            ),
            timeout=TELEGRAM_TIMEOUT_S,
            idempotent=True,
            peer="ingest",
        )
        return pb.DialogsResponse(result=reply.result)

    async def Sources(
        self, request: pb.SourcesRequest, context: Ctx[pb.SourcesRequest, pb.SourcesResponse]
    ) -> pb.SourcesResponse:
        account = account_of(self._deps, request.account)
        ingest = self._deps.peers.ingest
        action = request.action or "ls"
        if action not in SOURCE_ACTIONS:
            raise InvalidArgument(
                f"sources action {action!r} is not {', '.join(SOURCE_ACTIONS)}",
                metadata={"field": "action"},
            )
        if action in ("add", "rm") and not request.target.strip():
            raise InvalidArgument(
                f"sources {action} needs a target",
                hint="a chat id, @username, t.me link, folder:<name> or a title",
                metadata={"field": "target"},
            )
        if action == "ls":
            listed = await call(
                ingest.ListSources,
                ingest_pb.ListSourcesRequest(account=account),
                timeout=TAG_TIMEOUT_S,
                idempotent=True,
                peer="ingest",
            )
            return pb.SourcesResponse(listed=listed.result)
        if action == "add":
            added = await call(
                ingest.AddSource,
                ingest_pb.AddSourceRequest(
                    account=account,
                    target=request.target,
                    since=parse_bound(request.since, upper=False),
                    comments=request.comments,
                ),
                timeout=TELEGRAM_TIMEOUT_S,
                peer="ingest",
            )
            return pb.SourcesResponse(added=added.result)
        if action == "rm":
            removed = await call(
                ingest.RemoveSource,
                ingest_pb.RemoveSourceRequest(account=account, target=request.target),
                timeout=PRUNE_TIMEOUT_S,
                peer="ingest",
            )
            return pb.SourcesResponse(removed=removed.result)
        pruned = await call(
            ingest.PruneSources,
            ingest_pb.PruneSourcesRequest(account=account, dry_run=request.dry_run),
            timeout=PRUNE_TIMEOUT_S,
            idempotent=request.dry_run,
            peer="ingest",
        )
        if pruned.WhichOneof("result") == "preview":
            return pb.SourcesResponse(would_prune=pruned.preview)
        return pb.SourcesResponse(pruned=pruned.pruned)

    async def Sync(
        self, request: pb.SyncRequest, context: Ctx[pb.SyncRequest, pb.SyncResponse]
    ) -> AsyncIterator[pb.SyncResponse]:
        account = account_of(self._deps, request.account)
        ids = sorted(set(await chat_ids(self._deps, account, list(request.chats))))
        await reach(self._deps, "ingest")
        stream = self._deps.peers.ingest.Sync(
            ingest_pb.SyncRequest(
                budget_s=request.budget_s,
                account=account,
                chat_ids=ids,
                refresh_only=request.refresh_only,
                takeout=request.takeout,
            ),
            timeout=OPERATION_TIMEOUT_S,
        )
        async for event in forward_events(stream, lambda e: pb.SyncResponse(event=e), "ingest"):
            yield event

    async def Extract(
        self, request: pb.ExtractRequest, context: Ctx[pb.ExtractRequest, pb.ExtractResponse]
    ) -> AsyncIterator[pb.ExtractResponse]:
        await reach(self._deps, "ingest")
        stream = self._deps.peers.ingest.Extract(
            ingest_pb.ExtractRequest(
                budget_s=request.budget_s,
                retry_failed=request.retry_failed,
                account=account_of(self._deps, request.account),
            ),
            timeout=OPERATION_TIMEOUT_S,
        )
        async for event in forward_events(stream, lambda e: pb.ExtractResponse(event=e), "ingest"):
            yield event

    async def PruneDeleted(
        self,
        request: pb.PruneDeletedRequest,
        context: Ctx[pb.PruneDeletedRequest, pb.PruneDeletedResponse],
    ) -> AsyncIterator[pb.PruneDeletedResponse]:
        account = account_of(self._deps, request.account)
        chat_id = await self._chat_id(account, request.chat) if request.chat else 0
        await reach(self._deps, "ingest")
        stream = self._deps.peers.ingest.PruneDeleted(
            ingest_pb.PruneDeletedRequest(
                account=account, chat_id=chat_id, budget_s=request.budget_s
            ),
            timeout=OPERATION_TIMEOUT_S,
        )
        async for event in forward_events(
            stream, lambda e: pb.PruneDeletedResponse(event=e), "ingest"
        ):
            yield event
