"""The ingest servicer: proto in, typed core call, proto out."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import grpc

from chatseek.common.v1 import common_pb2
from chatseek.ingest.v1 import ingest_service_pb2 as pb
from chatseek.ingest.v1 import ingest_service_pb2_grpc
from chatseek_core import db, feed
from chatseek_core.aio import stream_progress, to_thread
from chatseek_core.errors import InvalidArgument
from chatseek_core.proto_json import document, operation_progress, operation_result
from chatseek_core.status import service_status
from chatseek_ingest import chats, tags
from chatseek_ingest.importer import import_export
from chatseek_ingest.media import read_export_media
from chatseek_ingest.schema import OWNER

if TYPE_CHECKING:
    from chatseek_ingest.server import Deps

__all__ = ["IngestServicer"]

Ctx = grpc.aio.ServicerContext[Any, Any]
UPLOAD_PROGRESS_BYTES = 8 * 1024 * 1024
NUDGE_MIN_INTERVAL_S = 0.5


def _safe_relative(path: str) -> PurePosixPath:
    rel = PurePosixPath(path)
    if not path or rel.is_absolute() or ".." in rel.parts or "\\" in path:
        raise InvalidArgument(
            f"upload path {path!r} must be relative and stay inside the export",
            metadata={"field": "chunk.path"},
        )
    return rel


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

    # --- import ---

    async def ImportExport(
        self, request_iterator: AsyncIterator[pb.ImportExportRequest], context: Ctx
    ) -> AsyncIterator[pb.ImportExportResponse]:
        tmp_root = self._deps.settings.data_dir / "tmp"
        tmp_root.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix="import-", dir=tmp_root))
        try:
            start: pb.ImportStart | None = None
            received = 0
            reported = 0
            handles: dict[str, Any] = {}
            async for request in request_iterator:
                item = request.WhichOneof("item")
                if item == "start":
                    start = request.start
                    continue
                if item != "chunk" or start is None:
                    raise InvalidArgument(
                        "an import stream starts with ImportStart, then file chunks",
                        metadata={"field": "item"},
                    )
                chunk = request.chunk
                rel = _safe_relative(chunk.path)
                handle = handles.get(chunk.path)
                if handle is None:
                    target = workdir / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    handle = handles[chunk.path] = open(target, "ab")  # noqa: SIM115
                await to_thread(handle.write, chunk.data)
                received += len(chunk.data)
                if chunk.last:
                    handle.close()
                    del handles[chunk.path]
                if received - reported >= UPLOAD_PROGRESS_BYTES:
                    reported = received
                    yield pb.ImportExportResponse(
                        event=operation_progress("upload", received, start.json_size, "bytes")
                    )
            for handle in handles.values():
                handle.close()
            if start is None:
                raise InvalidArgument("the import stream was empty", metadata={"field": "start"})
            json_path = workdir / _safe_relative(start.json_name or "result.json")
            conn_pool = self._deps.pool
            account = self._account(start.account)

            def run(on_progress: Callable[[Any], None]) -> dict[str, Any]:
                report = import_export(
                    conn_pool.get(),
                    account,
                    json_path,
                    folder_name=start.folder_name or None,
                    chat_title=start.chat_title or None,
                    on_progress=on_progress,
                    on_commit=committed,
                )
                media = read_export_media(
                    conn_pool.get(), workdir, [int(c["id"]) for c in report.chats]
                )
                report.media_text = media
                return report.to_dict()

            committed = self._committed_hook()
            async for kind, value in stream_progress(run):
                if kind == "progress":
                    done, total, note = value  # type: ignore[misc]
                    yield pb.ImportExportResponse(
                        event=operation_progress("import", done, total, note)
                    )
                else:
                    await self._deps.nudger.nudge()
                    yield pb.ImportExportResponse(event=operation_result(value))  # type: ignore[arg-type]
        finally:
            await to_thread(shutil.rmtree, workdir, True)

    # --- chats and tags ---

    async def ListChats(self, request: pb.ListChatsRequest, context: Ctx) -> pb.ListChatsResponse:
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

    async def AddTag(self, request: pb.AddTagRequest, context: Ctx) -> pb.AddTagResponse:
        target = self._tag_target(request.target)

        def write() -> bool:
            conn = self._deps.pool.get()
            with db.transaction(conn):
                return tags.add_tag(conn, request.tag, target)

        return pb.AddTagResponse(added=await to_thread(write))

    async def RemoveTag(self, request: pb.RemoveTagRequest, context: Ctx) -> pb.RemoveTagResponse:
        target = self._tag_target(request.target)

        def write() -> bool:
            conn = self._deps.pool.get()
            with db.transaction(conn):
                return tags.remove_tag(conn, request.tag, target)

        return pb.RemoveTagResponse(removed=await to_thread(write))

    async def ListTags(self, request: pb.ListTagsRequest, context: Ctx) -> pb.ListTagsResponse:
        account = self._account(request.account)
        rows = await to_thread(lambda: tags.list_tags(self._deps.pool.get(), account))
        return pb.ListTagsResponse(result=document({"tags": rows}))

    # --- status ---

    async def GetStatus(self, request: pb.GetStatusRequest, context: Ctx) -> pb.GetStatusResponse:
        def read() -> pb.GetStatusResponse:
            conn = self._deps.pool.get()
            counts = conn.execute(
                "SELECT (SELECT COUNT(*) FROM chats), (SELECT COUNT(*) FROM messages),"
                " (SELECT COUNT(*) FROM media WHERE extract_state = 'pending')"
            ).fetchone()
            return pb.GetStatusResponse(
                status=service_status(
                    OWNER,
                    schema_version=db.schema_version(conn, OWNER),
                    details={
                        "chats": counts[0],
                        "messages": counts[1],
                        "media_pending": counts[2],
                        "feed_head": feed.head(conn),
                    },
                )
            )

        return await to_thread(read)
