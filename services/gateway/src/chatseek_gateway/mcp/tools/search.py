"""The search tools: ranked search (refreshing a stale index first), strict search and counts.

Each tool is the twin of a CLI command and calls one RPC of the gateway's search service.
``search`` first refreshes a stale index (``refresh``) and searches again when the refresh
synced; the refresh's warnings join the hits'.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import Field

from chatseek_core.limits import MAX_K, SEARCH_MODES
from chatseek_core.log import redact
from chatseek_gateway.mcp.tools.arguments import (
    MAX_BOUND_CHARS,
    MAX_QUESTION_CHARS,
    ChatSpecs,
    LuceneText,
    LuceneTree,
    MessagesSource,
    Question,
    Since,
    Timezone,
    Until,
    bounded_int,
    checked_text,
    choice,
    int_range,
    lucene,
    specs,
)
from chatseek_gateway.mcp.tools.calls import SEARCH_TIMEOUT_S, GatewayCalls, tool
from chatseek_gateway.mcp.tools.refresh import AutoRefresh, index_age_min

if TYPE_CHECKING:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

__all__ = ["SearchTools"]

log = logging.getLogger(__name__)

DEFAULT_K = 10
DEFAULT_MESSAGES_LIMIT = 20
MAX_MESSAGES_LIMIT = 100
MAX_NEIGHBOURS = 20
MAX_TIMEZONE_CHARS = 64
MAX_PAGE_TOKEN_CHARS = 4096
STATS_BY = ("chat", "sender", "day", "hour")


class SearchTools:
    """``search``, ``messages_search`` and ``messages_stats``.

    Args:
        calls: the gateway calls.
        refresh: the refresh ``search`` runs before answering.
    """

    TOOLS: ClassVar[tuple[str, ...]] = ("search", "messages_search", "messages_stats")

    def __init__(self, calls: GatewayCalls, refresh: AutoRefresh) -> None:
        self._calls = calls
        self._refresh = refresh

    @tool
    async def search(
        self,
        query: Question,
        chats: ChatSpecs = None,
        since: Since = None,
        until: Until = None,
        k: Annotated[int, bounded_int("number of hits", 1, MAX_K)] = DEFAULT_K,
        mode: Annotated[
            str,
            Field(
                description="hybrid (words and meaning), lexical (words) or dense (meaning)",
                json_schema_extra={"enum": list(SEARCH_MODES)},
            ),
        ] = "hybrid",
        rerank: Annotated[
            bool | None,
            Field(description="re-score candidates with the cross-encoder (default: configured)"),
        ] = None,
        full: Annotated[bool, Field(description="include each hit's whole unit text")] = False,
    ) -> dict[str, Any]:
        """Find the discussions (windows, reply threads, channel posts) that answer a question.

        Hybrid retrieval by words and by meaning, reranked. Each hit has its chat, kind, dates,
        a snippet, msg_ids, a link and `by` (which lists found it); score orders this answer
        only. An album is one hit, its `album` listing every photo's caption and read-out text.
        Refreshes a stale index with a short sync first; `synced` holds that report and
        `index_age_min` the age of the oldest searched chat. Read thread/context before
        concluding from a snippet.
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb
        from chatseek_core.wire_json import parse_mode

        request = pb.SearchRequest(
            query=checked_text("query", query, MAX_QUESTION_CHARS),
            chats=specs("chats", chats),
            since=checked_text("since", since, MAX_BOUND_CHARS, required=False),
            until=checked_text("until", until, MAX_BOUND_CHARS, required=False),
            mode=parse_mode(mode),
            k=int_range("k", k, 1, MAX_K),
            full=full,
        )
        if rerank is not None:
            request.rerank = rerank
        log.debug("search %s", redact(request.query))
        result = await self._calls.document(
            lambda g: g.search.Search, request, timeout=SEARCH_TIMEOUT_S
        )
        refresh = await self._refresh.refresh(result)
        if refresh.report is not None:
            result = await self._calls.document(
                lambda g: g.search.Search, request, timeout=SEARCH_TIMEOUT_S
            )
        result.setdefault("warnings", []).extend(refresh.warnings)
        result["synced"] = refresh.report
        if result.get("index_age_min") is None:
            result["index_age_min"] = index_age_min(result, time.time())
        return result

    @tool
    async def messages_search(
        self,
        query: LuceneText = None,
        tree: LuceneTree = None,
        source: MessagesSource = "active",
        chats: ChatSpecs = None,
        timezone: Timezone = None,
        limit: Annotated[
            int, bounded_int("messages per page", 1, MAX_MESSAGES_LIMIT)
        ] = DEFAULT_MESSAGES_LIMIT,
        page: Annotated[
            str | None, Field(description="next_page_token of the previous page, unchanged")
        ] = None,
        newest: Annotated[bool, Field(description="order by time, newest first")] = False,
        context: Annotated[
            int, bounded_int("neighbours shown before and after each hit", 0, MAX_NEIGHBOURS)
        ] = 0,
    ) -> dict[str, Any]:
        """Strict message search in Lucene syntax: every hit satisfies the query exactly.

        For exact tokens, IDs, amounts, names, links and filters: fields text, body, from, chat,
        date, kind, has, topic, in, preset, filename, mime, size, tag. Upper-case AND/OR/NOT;
        explicit AND binds tighter than OR. The envelope carries items, has_more,
        next_page_token, the query versions and timezone, words_ready and coverage. An album is
        one item: its `album` lists every photo, `matched` marking those the query hit.
        """
        request = _messages_request(query, tree, source, chats, timezone)
        request.limit = int_range("limit", limit, 1, MAX_MESSAGES_LIMIT)
        request.page_token = checked_text("page", page, MAX_PAGE_TOKEN_CHARS, required=False)
        request.newest = newest
        request.context = int_range("context", context, 0, MAX_NEIGHBOURS)
        return await self._calls.document(
            lambda g: g.search.SearchMessages, request, timeout=SEARCH_TIMEOUT_S
        )

    @tool
    async def messages_stats(
        self,
        query: LuceneText = None,
        tree: LuceneTree = None,
        by: Annotated[
            str,
            Field(
                description="group counts by chat, sender, day or hour",
                json_schema_extra={"enum": list(STATS_BY)},
            ),
        ] = "chat",
        source: MessagesSource = "active",
        chats: ChatSpecs = None,
        timezone: Timezone = None,
    ) -> dict[str, Any]:
        """Count the messages a strict query matches, grouped by chat, sender, day or hour.

        Counts exactly what messages_search would return for the same query and scope.
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.MessageStatsRequest(
            search=_messages_request(query, tree, source, chats, timezone),
            by=choice("by", by, STATS_BY),
        )
        return await self._calls.document(
            lambda g: g.search.MessageStats, request, timeout=SEARCH_TIMEOUT_S
        )


def _messages_request(
    query: str | None,
    tree: dict[str, Any] | None,
    source: str,
    chats: list[int | str] | None,
    timezone: str | None,
) -> pb.SearchMessagesRequest:
    """The strict search both ``messages_search`` and ``messages_stats`` run, checked."""
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import parse_source

    text, tree_json = lucene(query, tree)
    return pb.SearchMessagesRequest(
        query=text,
        tree_json=tree_json,
        source=parse_source(source),
        chats=specs("chats", chats),
        timezone=checked_text("timezone", timezone, MAX_TIMEZONE_CHARS, required=False),
    )
