"""The lexical servicer: proto in, typed core call, proto out."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import grpc

from chatseek.common.v1 import common_pb2
from chatseek.lexical.v1 import lexical_service_pb2 as pb
from chatseek.lexical.v1 import lexical_service_pb2_grpc
from chatseek_core import db, deadline
from chatseek_core.aio import stream_progress, to_thread
from chatseek_core.errors import IndexBehind, IndexNotReady, InvalidArgument
from chatseek_core.operations import operation_progress
from chatseek_core.status import service_status
from chatseek_core.wire_json import from_json
from chatseek_lexical import indexer, ranked, readiness
from chatseek_lexical.deps import Deps
from chatseek_lexical.query import (
    SearchRequest,
    parse,
    search,
    stats,
    tree_from_json,
    tree_to_json,
)
from chatseek_lexical.schema import OWNER

__all__ = ["LexicalServicer"]

Ctx = grpc.aio.ServicerContext
MAX_LIST_LIMIT = 1000
DEFAULT_LIST_LIMIT = 40
DEFAULT_SEARCH_LIMIT = 20
# Empty, "active" and "telegram" (the CLI's name) all mean the active account's chats.
# A strict request that needs words while the indexer is behind waits this long at most for it
# to index every message stored when the request arrived; it keeps ANSWER_RESERVE_S of its
# deadline for the search itself (whose own time budget is 2 s).
CATCH_UP_MAX_S = 20.0
CATCH_UP_POLL_S = 0.05
ANSWER_RESERVE_S = 2.5
BEHIND_RETRY_S = 2.0

Answer = Callable[[db.Connection, bool], dict[str, Any]]


def _limit(value: int) -> int:
    if value < 0 or value > MAX_LIST_LIMIT:
        raise InvalidArgument(
            f"limit must be between 1 and {MAX_LIST_LIMIT}", metadata={"field": "limit"}
        )
    return value or DEFAULT_LIST_LIMIT


def _filter_args(flt: pb.ListFilter) -> dict[str, Any]:
    return {
        "account_scope": list(flt.accounts) or None,
        "chat_ids": list(flt.chat_ids) or None,
        "since": flt.range.since or None,
        "until": flt.range.until or None,
    }


class LexicalServicer(lexical_service_pb2_grpc.LexicalServiceServicer):
    """Thin adapter over the lexical core functions."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    def _conn(
        self, needs: tuple[str, ...] = ("ingest", "unitize"), *, writes: bool = False
    ) -> db.Connection:
        """This thread's connection: the read-only query pool's, or the writing pool's."""
        pool = self._deps.pool if writes else self._deps.reads
        missing = [name for name in needs if not pool.attached(name)]
        if missing:
            raise IndexNotReady(
                f"the word index has nothing to read yet: {', '.join(missing)} has not started",
                hint="start the stack with `chatseek stack up`",
            )
        return pool.get()

    async def Notify(
        self, request: pb.NotifyRequest, context: Ctx[pb.NotifyRequest, pb.NotifyResponse]
    ) -> pb.NotifyResponse:
        self._deps.loop.nudge()
        return pb.NotifyResponse()

    async def UnitList(
        self, request: pb.UnitListRequest, context: Ctx[pb.UnitListRequest, pb.UnitListResponse]
    ) -> pb.UnitListResponse:
        limit = _limit(request.limit)

        def run() -> pb.UnitListResponse:
            conn = self._conn()
            found = ranked.unit_list(
                conn,
                request.query,
                kinds=list(request.filter.kinds) or None,
                limit=limit,
                **_filter_args(request.filter),
            )
            return pb.UnitListResponse(
                units=[pb.RankedUnit(unit_id=u, score=s) for u, s in found],
                words_ready=readiness.words_ready(conn),
            )

        return await to_thread(run)

    async def MessageList(
        self,
        request: pb.MessageListRequest,
        context: Ctx[pb.MessageListRequest, pb.MessageListResponse],
    ) -> pb.MessageListResponse:
        limit = _limit(request.limit)

        def run() -> pb.MessageListResponse:
            conn = self._conn()
            found = ranked.message_list(
                conn,
                request.query,
                kinds=list(request.filter.kinds) or None,
                limit=limit,
                **_filter_args(request.filter),
            )
            return pb.MessageListResponse(
                units=[pb.RankedUnit(unit_id=u, score=s, best_msg_id=m) for u, s, m in found],
                words_ready=readiness.words_ready(conn),
            )

        return await to_thread(run)

    async def ChunkList(
        self, request: pb.ChunkListRequest, context: Ctx[pb.ChunkListRequest, pb.ChunkListResponse]
    ) -> pb.ChunkListResponse:
        limit = _limit(request.limit)

        def run() -> pb.ChunkListResponse:
            conn = self._conn()
            # AND-then-OR already widens to any word when too few chunks hold them all.
            found = ranked.chunk_list(
                conn, request.query, limit=limit, **_filter_args(request.filter)
            )
            return pb.ChunkListResponse(
                units=[pb.RankedUnit(unit_id=u, score=s) for u, s in found],
                words_ready=readiness.words_ready(conn),
            )

        return await to_thread(run)

    async def _as_of_arrival(self, answer: Answer) -> dict[str, Any]:
        """Answer a strict request over every message stored when it arrived.

        ``answer(conn, words_ready)`` runs the request. When the message word index lags ingest
        and the query needs words, the indexer is nudged and the request waits, within its
        deadline, until the cursor reaches the ingest head seen at arrival; then it is answered
        with ``words_ready`` true (complete as of arrival). A wait that runs out is IndexBehind
        (UNAVAILABLE, retryable: the backlog drains by itself); an index that must be rebuilt
        is IndexNotReady.
        """

        def first() -> tuple[dict[str, Any] | IndexNotReady, readiness.FeedLag]:
            conn = self._conn(("ingest",))
            lag = readiness.message_lag(conn)
            try:
                return answer(conn, lag.caught_up), lag
            except IndexNotReady as exc:
                return exc, lag

        outcome, lag = await to_thread(first)
        if not isinstance(outcome, IndexNotReady):
            return outcome
        if lag.needs_rebuild:
            raise IndexNotReady(
                "the message word index is ahead of ingest.db: the file was replaced under it",
                hint="run `chatseek reindex lexical`",
                metadata={"needs_rebuild": "true"},
            )
        if not await self._caught_up(lag.head):
            raise IndexBehind(
                f"the message word index is still {lag.behind} change(s) behind the messages"
                " stored when this search arrived (an import is being indexed)",
                hint="retry shortly, or search without text terms meanwhile",
                retry_after_s=BEHIND_RETRY_S,
                metadata={"ingest_behind": str(lag.behind)},
            )
        return await to_thread(lambda: answer(self._conn(("ingest",)), True))

    async def _caught_up(self, seq: int) -> bool:
        """Wait until ingest feed event ``seq`` is indexed; False when the wait runs out."""
        left = deadline.remaining()
        budget = CATCH_UP_MAX_S if left is None else min(CATCH_UP_MAX_S, left - ANSWER_RESERVE_S)
        until = time.monotonic() + budget
        self._deps.loop.nudge()

        def indexed() -> bool:
            return readiness.messages_indexed_through(self._conn(("ingest",)), seq)

        while not await to_thread(indexed):
            if time.monotonic() >= until:
                return False
            await asyncio.sleep(CATCH_UP_POLL_S)
        return True

    def _search_request(
        self, request: pb.SearchMessagesRequest, conn: db.Connection, words_ready: bool
    ) -> SearchRequest:
        if bool(request.query) == bool(request.tree_json):
            raise InvalidArgument(
                "give exactly one of a query text and a query tree", metadata={"field": "query"}
            )
        query: Any = request.query
        if request.tree_json:
            try:
                query = json.loads(request.tree_json)
            except (ValueError, RecursionError) as exc:
                raise InvalidArgument(
                    f"the query tree is not JSON: {exc}", metadata={"field": "tree_json"}
                ) from None
        if request.source not in common_pb2.Source.values():
            raise InvalidArgument(
                f"source {request.source} is not active or all", metadata={"field": "source"}
            )
        source = "all" if request.source == common_pb2.SOURCE_ALL else "active"
        # Every account is searched with source "all": the default one need not exist.
        default = None if source == "all" else self._deps.settings.account
        return SearchRequest(
            query=query,
            account=request.account or default,
            source=source,
            chats=tuple(request.chats),
            timezone=request.timezone or None,
            limit=request.limit or DEFAULT_SEARCH_LIMIT,
            page_token=request.page_token or None,
            newest=request.newest,
            context=request.context,
            words_ready=words_ready,
        )

    async def SearchMessages(
        self,
        request: pb.SearchMessagesRequest,
        context: Ctx[pb.SearchMessagesRequest, pb.SearchMessagesResponse],
    ) -> pb.SearchMessagesResponse:
        def answer(conn: db.Connection, words_ready: bool) -> dict[str, Any]:
            asked = self._search_request(request, conn, words_ready)
            return search(conn, asked, splitter=self._deps.splitter).to_json()

        envelope = await self._as_of_arrival(answer)
        return pb.SearchMessagesResponse(result=from_json(envelope, common_pb2.MessagesResult()))

    async def ParseQuery(
        self,
        request: pb.ParseQueryRequest,
        context: Ctx[pb.ParseQueryRequest, pb.ParseQueryResponse],
    ) -> pb.ParseQueryResponse:
        if bool(request.query) == bool(request.tree_json):
            raise InvalidArgument(
                "give exactly one of a query text and a query tree", metadata={"field": "query"}
            )
        if request.query:
            tree = parse(request.query)
        else:
            try:
                obj = json.loads(request.tree_json)
            except (ValueError, RecursionError) as exc:
                raise InvalidArgument(
                    f"the query tree is not JSON: {exc}", metadata={"field": "tree_json"}
                ) from None
            tree = tree_from_json(obj)
        return pb.ParseQueryResponse(tree=from_json(tree_to_json(tree), common_pb2.QueryTree()))

    async def MessageStats(
        self,
        request: pb.MessageStatsRequest,
        context: Ctx[pb.MessageStatsRequest, pb.MessageStatsResponse],
    ) -> pb.MessageStatsResponse:
        def answer(conn: db.Connection, words_ready: bool) -> dict[str, Any]:
            counted = stats(
                conn,
                self._search_request(request.search, conn, words_ready),
                by=request.by or "chat",
                timezone=request.search.timezone or None,
            )
            return counted.to_json()

        doc = await self._as_of_arrival(answer)
        return pb.MessageStatsResponse(result=from_json(doc, common_pb2.StatsResult()))

    async def Reindex(
        self, request: pb.ReindexRequest, context: Ctx[pb.ReindexRequest, pb.ReindexResponse]
    ) -> AsyncIterator[pb.ReindexResponse]:
        def run(on_progress: Callable[[object], None]) -> dict[str, Any]:
            on_progress(("reindex", 0, "dropping the word indexes"))
            counts = indexer.rebuild(self._conn(writes=True))
            return {"messages": counts.messages, "units": counts.units, "chunks": counts.chunks}

        async for kind, value in stream_progress(run):
            if kind == "progress":
                stage, done, note = cast(tuple[str, int, str], value)
                yield pb.ReindexResponse(event=operation_progress(stage, done, 0, note))
            else:
                typed = common_pb2.WordIndexReport(**cast(dict[str, int], value))
                yield pb.ReindexResponse(event=common_pb2.OperationEvent(word_index=typed))

    async def GetStatus(
        self, request: pb.GetStatusRequest, context: Ctx[pb.GetStatusRequest, pb.GetStatusResponse]
    ) -> pb.GetStatusResponse:
        def read() -> pb.GetStatusResponse:
            conn = self._deps.reads.get()
            version = db.schema_version(conn, OWNER)
            if not self._deps.ready_to_index():
                return pb.GetStatusResponse(
                    status=service_status(
                        OWNER, schema_version=version, details={"words_ready": False}
                    )
                )
            status = readiness.words_status(conn, counts=not request.brief)
            details: dict[str, object] = {"words_ready": status.ready}
            if status.messages is not None:
                details["messages_indexed"] = status.messages
                details["units_indexed"] = status.units
            return pb.GetStatusResponse(
                status=service_status(
                    OWNER,
                    schema_version=version,
                    feed_lag={f.feed: f.behind for f in status.feeds},
                    details=details,
                )
            )

        return await to_thread(read)
