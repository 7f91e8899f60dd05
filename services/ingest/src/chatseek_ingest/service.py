"""The ingest servicer: proto in, typed core call, proto out.

Telegram RPCs connect one client per call (``runtime.account_client``); a pass that writes
gets a connection of its own with it (``runtime.telegram_pass``). Long passes stream
``OperationEvent`` progress, then their typed report; consumers are nudged after commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import cast

import grpc

from chatseek.common.v1 import common_pb2
from chatseek.ingest.v1 import ingest_service_pb2 as pb
from chatseek.ingest.v1 import ingest_service_pb2_grpc
from chatseek_core import db
from chatseek_core.aio import drain, progress_stream, to_thread
from chatseek_core.operations import operation_progress
from chatseek_core.status import service_status
from chatseek_core.wire_json import from_json
from chatseek_ingest import chats, store, tags
from chatseek_ingest.auth import complete_login, start_login
from chatseek_ingest.deps import Deps
from chatseek_ingest.downloads import extract_media, media_limits
from chatseek_ingest.prune import prune_deleted
from chatseek_ingest.runtime import (
    LazyClient,
    account_client,
    login_factory,
    telegram_pass,
)
from chatseek_ingest.schema import OWNER
from chatseek_ingest.sources import (
    DIALOGS_LIMIT,
    add_source,
    dialogs,
    list_sources,
    prune_sources,
    remove_source,
)
from chatseek_ingest.sync import SyncProgress, sync
from chatseek_ingest.telegram import FloodPolicy, TelegramClientLike, session_path
from chatseek_ingest.upload import (
    TMP_DIR,
    UploadChunk,
    UploadItem,
    UploadStart,
    import_upload,
)

__all__ = ["IngestServicer"]

log = logging.getLogger(__name__)

Ctx = grpc.aio.ServicerContext
NUDGE_MIN_INTERVAL_S = 0.5

ProgressValue = tuple[int, int, str] | SyncProgress
"""What a pass reports: ``(done, total, note)`` or a ``SyncProgress``."""
Progress = Callable[[ProgressValue], None]
Work = Callable[[Progress], Awaitable[common_pb2.OperationEvent]]
"""A pass: it reports progress, then returns the event carrying its typed report."""


def _progress_event(stage: str, value: ProgressValue) -> common_pb2.OperationEvent:
    if isinstance(value, SyncProgress):
        event: common_pb2.OperationEvent = operation_progress(
            stage,
            value.chats_done,
            value.chats_total,
            value.note,
            item=value.chat,
            item_done=value.chat_messages,
            count=value.messages,
            wait_s=value.wait_s,
            account=value.account,
        )
        return event
    done, total, note = value
    plain: common_pb2.OperationEvent = operation_progress(stage, done, total, note)
    return plain


async def _upload_items(
    requests: AsyncIterator[pb.ImportExportRequest],
) -> AsyncIterator[UploadItem]:
    async for request in requests:
        item = request.WhichOneof("item")
        if item == "start":
            start = request.start
            yield UploadStart(
                account=start.account,
                json_name=start.json_name,
                json_path=start.json_path,
                folder_name=start.folder_name,
                chat_title=start.chat_title,
                json_size=start.json_size,
            )
        elif item == "chunk":
            chunk = request.chunk
            yield UploadChunk(path=chunk.path, data=chunk.data, last=chunk.last)
        else:
            yield None


class IngestServicer(ingest_service_pb2_grpc.IngestServiceServicer):
    """Thin adapter over the ingest core functions."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._last_nudge = 0.0

    def _account(self, account: str) -> str:
        return account or self._deps.settings.account

    def _committed_hook(self) -> Callable[[], None]:
        """A thread-safe callback that nudges the consumers, at most every half second."""
        loop = asyncio.get_running_loop()

        def committed() -> None:
            now = time.monotonic()
            if now - self._last_nudge < NUDGE_MIN_INTERVAL_S:
                return
            self._last_nudge = now
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._deps.nudger.nudge()))

        return committed

    def _budget(self, budget_s: float) -> float | None:
        return budget_s if budget_s > 0 else None

    def _telegram(self, account: str) -> contextlib.AbstractAsyncContextManager[TelegramClientLike]:
        return account_client(self._deps.settings, account, self._deps.telegram_factory)

    def _pass(
        self, account: str, *, exclusive: bool = False
    ) -> contextlib.AbstractAsyncContextManager[tuple[db.Connection, TelegramClientLike]]:
        return telegram_pass(
            self._deps.settings, account, self._deps.telegram_factory, exclusive=exclusive
        )

    async def _stream(self, stage: str, work: Work) -> AsyncIterator[common_pb2.OperationEvent]:
        """Run ``work(on_progress)`` on the loop; stream its progress, nudges, then its report.

        ``on_progress`` may be called from any thread; each call follows a commit, so it also
        nudges the consumers (throttled). A cancelled RPC cancels the work.
        """
        committed = self._committed_hook()

        def nudging(on_progress: Progress) -> Awaitable[common_pb2.OperationEvent]:
            def report(value: ProgressValue) -> None:
                committed()
                on_progress(value)

            return work(report)

        report = common_pb2.OperationEvent()
        async for kind, value in progress_stream(nudging, cancel=True):
            if kind == "progress":
                yield _progress_event(stage, cast(ProgressValue, value))
            else:
                report = cast(common_pb2.OperationEvent, value)
        await self._deps.nudger.nudge()
        yield report

    # --- import ---

    async def ImportExport(
        self,
        request_iterator: AsyncIterator[pb.ImportExportRequest],
        context: Ctx[pb.ImportExportRequest, pb.ImportExportResponse],
    ) -> AsyncIterator[pb.ImportExportResponse]:
        try:
            async for response in self._import(request_iterator):
                yield response
        except Exception:
            await drain(request_iterator)  # so that the client is told why (see ``drain``)
            raise

    async def _import(
        self, request_iterator: AsyncIterator[pb.ImportExportRequest]
    ) -> AsyncIterator[pb.ImportExportResponse]:
        events = import_upload(
            _upload_items(request_iterator),
            data_dir=self._deps.settings.data_dir,
            connect=self._deps.pool.get,
            account=self._account,
            on_commit=self._committed_hook(),
        )
        async for event in events:
            if isinstance(event, tuple):
                yield pb.ImportExportResponse(event=operation_progress(*event))
            else:
                await self._deps.nudger.nudge()
                report = from_json(event, common_pb2.ImportReport())
                yield pb.ImportExportResponse(event=common_pb2.OperationEvent(import_report=report))

    # --- Telegram: auth ---

    async def StartAuth(
        self, request: pb.StartAuthRequest, context: Ctx[pb.StartAuthRequest, pb.StartAuthResponse]
    ) -> pb.StartAuthResponse:
        account = self._account(request.account)
        session_path(self._deps.settings.home, account)
        factory = await to_thread(login_factory, self._deps.settings, self._deps.telegram_factory)
        token = await start_login(factory, request.phone.strip(), pending=self._deps.logins)
        return pb.StartAuthResponse(login_token=token)

    async def CompleteAuth(
        self,
        request: pb.CompleteAuthRequest,
        context: Ctx[pb.CompleteAuthRequest, pb.CompleteAuthResponse],
    ) -> pb.CompleteAuthResponse:
        result = await complete_login(
            self._deps.logins,
            request.login_token,
            request.code,
            request.password or None,
            home=self._deps.settings.home,
            account=self._account(request.account),
        )
        return pb.CompleteAuthResponse(user=result.user, session_path=str(result.session_path))

    # --- Telegram: sources and dialogs ---

    async def Dialogs(
        self, request: pb.DialogsRequest, context: Ctx[pb.DialogsRequest, pb.DialogsResponse]
    ) -> pb.DialogsResponse:
        async with self._telegram(self._account(request.account)) as client:
            matches = await dialogs(client, request.query, request.limit or DIALOGS_LIMIT)
        found = {"query": request.query, "matches": [m.to_dict() for m in matches]}
        return pb.DialogsResponse(result=from_json(found, common_pb2.DialogsResult()))

    async def ListSources(
        self,
        request: pb.ListSourcesRequest,
        context: Ctx[pb.ListSourcesRequest, pb.ListSourcesResponse],
    ) -> pb.ListSourcesResponse:
        account = self._account(request.account)
        rows = await to_thread(lambda: list_sources(self._deps.pool.get(), account))
        listed = {"sources": [r.to_dict() for r in rows]}
        return pb.ListSourcesResponse(result=from_json(listed, common_pb2.ListSourcesResult()))

    async def AddSource(
        self, request: pb.AddSourceRequest, context: Ctx[pb.AddSourceRequest, pb.AddSourceResponse]
    ) -> pb.AddSourceResponse:
        account = self._account(request.account)
        async with self._pass(account) as (conn, client):
            added = await add_source(
                conn,
                client,
                account,
                request.target,
                since=request.since or None,
                comments=request.comments,
            )
        return pb.AddSourceResponse(result=from_json(added.to_dict(), common_pb2.AddSourceResult()))

    async def RemoveSource(
        self,
        request: pb.RemoveSourceRequest,
        context: Ctx[pb.RemoveSourceRequest, pb.RemoveSourceResponse],
    ) -> pb.RemoveSourceResponse:
        account = self._account(request.account)
        removed = await to_thread(
            lambda: remove_source(self._deps.pool.get(), account, request.target)
        )
        await self._deps.nudger.nudge()
        return pb.RemoveSourceResponse(
            result=from_json(removed.to_dict(), common_pb2.RemoveSourceResult())
        )

    async def PruneSources(
        self,
        request: pb.PruneSourcesRequest,
        context: Ctx[pb.PruneSourcesRequest, pb.PruneSourcesResponse],
    ) -> pb.PruneSourcesResponse:
        account = self._account(request.account)
        async with self._pass(account) as (conn, client):
            report = await prune_sources(conn, client, account, dry_run=request.dry_run)
        if not request.dry_run:
            await self._deps.nudger.nudge()
        if report.dry_run:
            preview = from_json(report.to_dict(), common_pb2.PruneSourcesPreview())
            return pb.PruneSourcesResponse(preview=preview)
        pruned = from_json(report.to_dict(), common_pb2.PruneSourcesResult())
        return pb.PruneSourcesResponse(pruned=pruned)

    # --- Telegram: passes ---

    async def Sync(
        self, request: pb.SyncRequest, context: Ctx[pb.SyncRequest, pb.SyncResponse]
    ) -> AsyncIterator[pb.SyncResponse]:
        account = self._account(request.account)
        async with self._pass(account, exclusive=True) as (conn, client):

            async def work(on_progress: Progress) -> common_pb2.OperationEvent:
                report = await sync(
                    conn,
                    client,
                    account,
                    budget_s=self._budget(request.budget_s),
                    refresh_only=request.refresh_only,
                    chat_ids=list(request.chat_ids) or None,
                    on_progress=on_progress,
                    takeout=request.takeout,
                )
                typed = from_json(report.to_dict(), common_pb2.SyncReport())
                return common_pb2.OperationEvent(sync=typed)

            async for event in self._stream("sync", work):
                yield pb.SyncResponse(event=event)

    async def PruneDeleted(
        self,
        request: pb.PruneDeletedRequest,
        context: Ctx[pb.PruneDeletedRequest, pb.PruneDeletedResponse],
    ) -> AsyncIterator[pb.PruneDeletedResponse]:
        account = self._account(request.account)
        async with self._pass(account, exclusive=True) as (conn, client):

            async def work(on_progress: Progress) -> common_pb2.OperationEvent:
                report = await prune_deleted(
                    conn,
                    client,
                    account,
                    request.chat_id or None,
                    budget_s=self._budget(request.budget_s),
                    on_progress=on_progress,
                )
                typed = from_json(report.to_dict(), common_pb2.PruneDeletedReport())
                return common_pb2.OperationEvent(prune_deleted=typed)

            async for event in self._stream("prune", work):
                yield pb.PruneDeletedResponse(event=event)

    async def Extract(
        self, request: pb.ExtractRequest, context: Ctx[pb.ExtractRequest, pb.ExtractResponse]
    ) -> AsyncIterator[pb.ExtractResponse]:
        account = self._account(request.account)
        settings = self._deps.settings
        limits = await to_thread(media_limits, settings)
        budget = self._budget(request.budget_s)
        clock = time.monotonic
        policy = FloodPolicy(deadline=clock() + budget if budget is not None else None)
        lazy = LazyClient(settings, account, self._deps.telegram_factory)
        loop = asyncio.get_running_loop()

        def run(on_progress: Progress) -> common_pb2.OperationEvent:
            report = extract_media(
                self._deps.pool.get(),
                loop=loop,
                connect=lazy.get,
                account=account,
                policy=policy,
                limits=limits,
                budget_s=budget,
                retry_failed=request.retry_failed,
                on_progress=on_progress,
                work_dir=settings.data_dir / TMP_DIR,
                clock=clock,
            )
            return common_pb2.OperationEvent(extract=from_json(report, common_pb2.ExtractReport()))

        async def work(on_progress: Progress) -> common_pb2.OperationEvent:
            return await to_thread(run, on_progress)

        try:
            async for event in self._stream("extract", work):
                yield pb.ExtractResponse(event=event)
        finally:
            await lazy.close()

    # --- chats and tags ---

    async def ListChats(
        self, request: pb.ListChatsRequest, context: Ctx[pb.ListChatsRequest, pb.ListChatsResponse]
    ) -> pb.ListChatsResponse:
        accounts: list[str] | None
        if "*" in request.accounts:
            accounts = None
        else:
            accounts = list(request.accounts) or [self._deps.settings.account]

        def read() -> list[chats.ChatRow]:
            return chats.resolve(
                self._deps.pool.get(),
                list(request.specs),
                accounts=accounts,
                exactly_one=request.exactly_one,
            )

        rows = await to_thread(read)
        return pb.ListChatsResponse(
            chats=[
                common_pb2.ChatCoverage(
                    chat=common_pb2.ChatRef(
                        account=r.account,
                        chat_id=r.chat_id,
                        type=r.type,
                        title=r.title,
                        username=r.username or "",
                    ),
                    history_complete=r.history_complete,
                    last_fetched_at=r.last_fetched_at or 0,
                    message_count=r.message_count,
                )
                for r in rows
            ]
        )

    def _tag_target(self, target: pb.TagTarget) -> tags.TagTarget:
        return tags.TagTarget(
            account=self._account(target.account),
            kind=target.kind,
            chat_id=target.chat_id,
            sender_id=target.sender_id,
            msg_id=target.msg_id,
        )

    async def AddTag(
        self, request: pb.AddTagRequest, context: Ctx[pb.AddTagRequest, pb.AddTagResponse]
    ) -> pb.AddTagResponse:
        target = self._tag_target(request.target)

        added = await to_thread(lambda: tags.add_tag(self._deps.pool.get(), request.tag, target))
        return pb.AddTagResponse(added=added)

    async def RemoveTag(
        self, request: pb.RemoveTagRequest, context: Ctx[pb.RemoveTagRequest, pb.RemoveTagResponse]
    ) -> pb.RemoveTagResponse:
        target = self._tag_target(request.target)

        removed = await to_thread(
            lambda: tags.remove_tag(self._deps.pool.get(), request.tag, target)
        )
        return pb.RemoveTagResponse(removed=removed)

    async def ListTags(
        self, request: pb.ListTagsRequest, context: Ctx[pb.ListTagsRequest, pb.ListTagsResponse]
    ) -> pb.ListTagsResponse:
        account = self._account(request.account)
        rows = await to_thread(lambda: tags.list_tags(self._deps.pool.get(), account))
        return pb.ListTagsResponse(result=from_json({"tags": rows}, common_pb2.ListTagsResult()))

    # --- status ---

    async def GetStatus(
        self, request: pb.GetStatusRequest, context: Ctx[pb.GetStatusRequest, pb.GetStatusResponse]
    ) -> pb.GetStatusResponse:
        def read() -> pb.GetStatusResponse:
            schema_version, details = store.status(self._deps.pool.get())
            return pb.GetStatusResponse(
                status=service_status(OWNER, schema_version=schema_version, details=details)
            )

        return await to_thread(read)
