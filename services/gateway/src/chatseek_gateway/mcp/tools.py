"""The MCP tools: each the twin of a CLI command, one JSON object per result.

A tool validates its arguments here (lengths, ranges, enums), calls one gateway RPC and returns
the gateway's JSON document. An expected failure, raised by validation or decoded from the
gateway, comes back as a normal result ``{"error", "reason", "hint", "candidates"?, "field"?}``;
anything else is a bug and surfaces as a tool error. ``search`` first refreshes a stale index
with a short budgeted sync of chats synced before (never a chat's first sync); whatever stops
that refresh becomes a warning beside the hits. ``CLI_TWINS`` names the CLI command behind each
tool and ``CLI_ONLY`` the commands deliberately left without one.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Concatenate, ParamSpec, TypeVar

from pydantic import Field

from chatseek_core import config as config_file
from chatseek_core.aio import to_thread
from chatseek_core.client import call, stream
from chatseek_core.errors import ChatseekError, FloodWait, InvalidArgument, SyncRunning
from chatseek_core.limits import (
    DEFAULT_AROUND,
    MAX_CONVERSATIONS_FOUND,
    MAX_K,
    MAX_QUERY_BYTES,
    SEARCH_MODES,
)
from chatseek_core.log import redact
from chatseek_core.wire_json import answer_json, event_report
from chatseek_gateway.mcp.gateway import GatewayConnection
from chatseek_gateway.shapes import Evented

if TYPE_CHECKING:
    import grpc
    from google.protobuf.message import Message
    from mcp.server.mcpserver import MCPServer

    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_gateway.stubs import AsyncGatewayStubs

__all__ = [
    "CLI_ONLY",
    "CLI_TWINS",
    "TOOL_NAMES",
    "ChatseekTools",
    "error_result",
    "register_tools",
]

log = logging.getLogger(__name__)

P = ParamSpec("P")
Req = TypeVar("Req")
Doc = TypeVar("Doc", bound="Message")
Evt = TypeVar("Evt", bound=Evented)
ToolMethod = Callable[Concatenate["ChatseekTools", P], Awaitable[dict[str, Any]]]

# --- limits ---

READ_TIMEOUT_S = 60.0
SEARCH_TIMEOUT_S = 120.0
WRITE_TIMEOUT_S = 120.0
SYNC_MARGIN_S = 30.0
SECONDS_PER_MINUTE = 60.0
AGE_DECIMALS = 1

MAX_QUESTION_CHARS = 2000
MAX_TREE_BYTES = 256 * 1024
MAX_SPEC_CHARS = 256
MAX_CHATS = 50
MAX_BOUND_CHARS = 64
MAX_TIMEZONE_CHARS = 64
MAX_PAGE_TOKEN_CHARS = 4096
MAX_DIALOG_QUERY_CHARS = 256

DEFAULT_K = 10
DEFAULT_MESSAGES_LIMIT = 20
MAX_MESSAGES_LIMIT = 100
MAX_NEIGHBOURS = 20
STATS_BY = ("chat", "sender", "day", "hour")
MESSAGE_SOURCES = ("active", "all")
DEFAULT_CONVERSATIONS = 10
DEFAULT_CONVERSATIONS_LISTED = 50
MAX_CONVERSATIONS_LISTED = 200
MAX_AROUND = 100
MAX_LOCATORS = 50
MAX_EVIDENCE_CHARS = 20000
DEFAULT_DIALOGS = 20
MAX_DIALOGS = 100
DEFAULT_SYNC_BUDGET_S = 45.0
MAX_SYNC_BUDGET_S = 600.0
DEFAULT_BATCH_SIZE = 20
MAX_BATCH_SIZE = 200
MAX_ANSWERS = 500
NEW_CONVERSATION = "new"

# Tool name → the CLI command (subcommand path in ``chatseek_gateway.cli.build_parser()``).
CLI_TWINS: dict[str, tuple[str, ...]] = {
    "search": ("search",),
    "messages_search": ("messages", "search"),
    "messages_stats": ("messages", "stats"),
    "conversations_search": ("conversations", "search"),
    "conversations_list": ("conversations", "list"),
    "conversations_show": ("conversations", "show"),
    "message_links": ("messages", "links"),
    "thread": ("thread",),
    "context": ("context",),
    "evidence": ("evidence",),
    "status": ("status",),
    "sources": ("sources", "ls"),
    "dialogs": ("dialogs",),
    "sources_add": ("sources", "add"),
    "sources_remove": ("sources", "rm"),
    "sync": ("sync",),
    "link_batches_status": ("conversations", "batches", "status"),
    "link_batch_get": ("conversations", "batches", "get"),
    "link_batch_answer": ("conversations", "batches", "answer"),
}
TOOL_NAMES = tuple(CLI_TWINS)
# Deliberately terminal-only: they read local paths, run long network passes or delete history.
CLI_ONLY: tuple[tuple[str, ...], ...] = (
    ("import",),
    ("extract",),
    ("prune-deleted",),
    ("sources", "prune"),
    ("reindex",),
)
# Tools that change nothing the user chose (the read-only hint): search's refresh only fetches
# new messages of chats already synced. The rest write config, delete data or store answers.
READ_ONLY = frozenset(TOOL_NAMES) - {
    "sources_add",
    "sources_remove",
    "sync",
    "link_batch_answer",
}
DESTRUCTIVE = frozenset({"sources_remove"})
# Tools that reach Telegram.
OPEN_WORLD = frozenset({"search", "dialogs", "sources_add", "sync"})

# --- argument types (descriptions and advertised bounds; enforced by the validators below) ---

Question = Annotated[str, Field(description="what to look for, in natural language")]
ChatSpec = Annotated[
    int | str,
    Field(description="one chat: id as results give it, @username, t.me link or title"),
]
ChatSpecs = Annotated[
    list[int | str] | None,
    Field(
        description="restrict to these chats: ids, @usernames, t.me links, folder:<name>, "
        "import:<slug> or titles",
        json_schema_extra={"maxItems": MAX_CHATS},
    ),
]
Since = Annotated[
    str | None,
    Field(
        description="lower bound: ISO date or datetime, month (2026-03) or age before now: "
        "30m (minutes), 12h, 7d, 3w, 6M (months), 1y"
    ),
]
Until = Annotated[str | None, Field(description="inclusive upper bound, same forms as since")]
MsgId = Annotated[int, Field(description="the message id within its chat")]
LuceneText = Annotated[
    str | None,
    Field(
        description="a Lucene-syntax query, e.g. invoice AND has:file AND date>=30d "
        "(give this or tree, not both)"
    ),
]
LuceneTree = Annotated[
    dict[str, Any] | None,
    Field(
        description='the parsed tree instead of text: {"version": 1, "language": "lucene-v1", '
        '"root": {...}}'
    ),
]
MessagesSource = Annotated[
    str,
    Field(
        description="active: the active account's chats; all: every account in the store",
        json_schema_extra={"enum": list(MESSAGE_SOURCES)},
    ),
]
Timezone = Annotated[
    str | None,
    Field(description="IANA timezone for calendar days, e.g. Europe/Madrid (default: system's)"),
]


def _bounded_int(description: str, low: int, high: int) -> Any:
    return Field(description=description, json_schema_extra={"minimum": low, "maximum": high})


# --- validation ---


def _invalid(field_name: str, message: str, hint: str) -> InvalidArgument:
    return InvalidArgument(message, hint=hint, metadata={"field": field_name})


def _text(field_name: str, value: str | None, max_chars: int, *, required: bool = True) -> str:
    text = (value or "").strip()
    if required and not text:
        raise _invalid(field_name, f"{field_name} is empty", f"pass a non-empty {field_name}")
    if len(text) > max_chars:
        raise _invalid(
            field_name,
            f"{field_name} is {len(text)} characters long; the limit is {max_chars}",
            f"shorten {field_name}",
        )
    return text


def _spec(field_name: str, value: int | str) -> str:
    return _text(field_name, str(value), MAX_SPEC_CHARS)


def _specs(field_name: str, values: list[int | str] | None, limit: int = MAX_CHATS) -> list[str]:
    items = list(values or [])
    if len(items) > limit:
        raise _invalid(
            field_name,
            f"{field_name} lists {len(items)} entries; the limit is {limit}",
            f"pass at most {limit}, or leave {field_name} out to search everything",
        )
    return [_spec(field_name, item) for item in items]


def _int_range(field_name: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise _invalid(
            field_name,
            f"{field_name}={value} is outside {low}..{high}",
            f"pass {field_name} between {low} and {high}",
        )
    return value


def _float_range(field_name: str, value: float, low: float, high: float) -> float:
    if not low <= value <= high:
        raise _invalid(
            field_name,
            f"{field_name}={value:g} is outside {low:g}..{high:g}",
            f"pass {field_name} between {low:g} and {high:g}",
        )
    return value


def _choice(field_name: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise _invalid(
            field_name,
            f"{field_name}={value!r} is not one of {', '.join(choices)}",
            f"pass {field_name} as one of {', '.join(choices)}",
        )
    return value


def _lucene(query: str | None, tree: dict[str, Any] | None) -> tuple[str, str]:
    """The (query text, tree JSON) pair of a strict search; exactly one is non-empty."""
    if (query is None or not query.strip()) == (tree is None):
        raise _invalid(
            "query",
            "pass exactly one of query (Lucene text) and tree (its parsed form)",
            "use query for text such as `invoice AND has:file`",
        )
    if tree is not None:
        tree_json = json.dumps(tree, ensure_ascii=False)
        if len(tree_json.encode()) > MAX_TREE_BYTES:
            raise _invalid(
                "tree",
                f"tree is {len(tree_json.encode())} bytes of JSON; the limit is {MAX_TREE_BYTES}",
                "send a smaller query",
            )
        return "", tree_json
    text = (query or "").strip()
    size = len(text.encode())
    if size > MAX_QUERY_BYTES:
        raise _invalid(
            "query",
            f"query is {size} bytes long; the limit is {MAX_QUERY_BYTES}",
            "shorten the query or split it into several",
        )
    return text, ""


def _answers(answers: list[dict[str, Any]]) -> str:
    """The ``answer_json`` of a link batch answer, checked entry by entry."""
    if not answers:
        raise _invalid("answers", "answers is empty", "answer at least one message of the batch")
    if len(answers) > MAX_ANSWERS:
        raise _invalid(
            "answers",
            f"answers lists {len(answers)} entries; the limit is {MAX_ANSWERS}",
            f"answer at most {MAX_ANSWERS} messages per call",
        )
    clean: list[dict[str, Any]] = []
    for index, entry in enumerate(answers):
        msg_id = entry.get("msg_id")
        parent = entry.get("parent")
        valid_msg = isinstance(msg_id, int) and not isinstance(msg_id, bool) and msg_id > 0
        valid_parent = parent == NEW_CONVERSATION or (
            isinstance(parent, int) and not isinstance(parent, bool) and parent > 0
        )
        if not (valid_msg and valid_parent):
            raise _invalid(
                "answers",
                f"answers[{index}] is not {{msg_id: positive integer, parent: message id or "
                f"{NEW_CONVERSATION!r}}}",
                f"give each answer a msg_id from the batch and a parent id or {NEW_CONVERSATION!r}",
            )
        clean.append({"msg_id": msg_id, "parent": parent})
    return json.dumps({"answers": clean})


def error_result(exc: ChatseekError) -> dict[str, Any]:
    """The tool result for an expected failure: ``{"error", "reason", "hint", ...}``.

    The field an invalid argument names is lifted to the top level as ``field``.
    """
    out: dict[str, Any] = dict(exc.to_dict())
    field_name = exc.metadata.get("field")
    if field_name:
        out["field"] = field_name
    return out


def _tool(method: ToolMethod[P]) -> ToolMethod[P]:
    """Turn expected failures into error results and log one line per call (no arguments)."""

    @functools.wraps(method)
    async def wrapper(self: ChatseekTools, /, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            result = await method(self, *args, **kwargs)
        except ChatseekError as exc:
            ms = (time.perf_counter() - started) * 1000
            log.info("tool %s %s %.1fms", method.__name__, exc.reason, ms)
            return error_result(exc)
        log.info("tool %s OK %.1fms", method.__name__, (time.perf_counter() - started) * 1000)
        return result

    return wrapper


def _warning(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": message}


@dataclass
class _Refresh:
    """What the automatic refresh before a search did."""

    report: dict[str, Any] | None = None
    warnings: list[dict[str, str]] = field(default_factory=list)


def _index_age_min(result: dict[str, Any], now: float) -> float | None:
    """Minutes since the least recently synced chat of the result's coverage was synced.

    Imported chats are never synced and do not count; None when no covered chat was synced.
    """
    fetched: list[float] = [
        float(chat["last_fetched_at"])
        for chat in (result.get("coverage") or {}).get("chats", [])
        if chat.get("last_fetched_at")
    ]
    if not fetched:
        return None
    return round(max(0.0, now - min(fetched)) / SECONDS_PER_MINUTE, AGE_DECIMALS)


# --- the tools ---


class ChatseekTools:
    """The chatseek operations an agent may call, over one gateway connection.

    Args:
        gateway: the connection to the gateway's gRPC facade.
        config_path: the user config file (its ``[search]`` table sets the auto-refresh).
    """

    def __init__(self, gateway: GatewayConnection, config_path: Path) -> None:
        self._gateway = gateway
        self._config_path = config_path

    async def _document(
        self,
        rpc: Callable[[AsyncGatewayStubs], grpc.aio.UnaryUnaryMultiCallable[Req, Doc]],
        request: Req,
        *,
        timeout: float = READ_TIMEOUT_S,
        idempotent: bool = True,
    ) -> dict[str, Any]:
        """Call the unary RPC that ``rpc`` picks from the gateway's stubs; its answer as JSON."""
        method = rpc(await self._gateway.stubs())
        reply = await call(method, request, timeout=timeout, idempotent=idempotent, peer="gateway")
        return answer_json(reply)

    async def _operation(
        self,
        rpc: Callable[[AsyncGatewayStubs], grpc.aio.UnaryStreamMultiCallable[Req, Evt]],
        request: Req,
        timeout: float,
    ) -> dict[str, Any]:
        """Run a streaming operation; returns its final report (progress is dropped)."""
        method = rpc(await self._gateway.stubs())
        report: dict[str, Any] = {}
        responses = stream(method, request, timeout=timeout, peer="gateway")
        async for response in responses:
            if (result := event_report(response.event)) is not None:
                report = result
        return report

    async def _sync(self, budget_s: float, chats: list[str]) -> dict[str, Any]:
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.SyncRequest(budget_s=budget_s, chats=chats)
        return await self._operation(lambda g: g.archive.Sync, request, budget_s + SYNC_MARGIN_S)

    async def _refresh(self, result: dict[str, Any]) -> _Refresh:
        """Sync the searched chats that are older than ``auto_sync_after_min``, within budget.

        Only chats synced before take part, so this never starts a chat's first sync; an
        ``auto_sync_after_min`` of 0 turns the refresh off. A running sync, a flood wait or a
        gateway that cannot sync becomes a warning, never a failed search.
        """
        out = _Refresh()
        try:
            settings = (await to_thread(config_file.load, self._config_path)).search
        except ChatseekError as exc:
            out.warnings.append(
                _warning("AUTO_SYNC_SKIPPED", f"the index was not refreshed: {exc.message}")
            )
            return out
        if settings.auto_sync_after_min <= 0:
            return out
        now = time.time()
        cutoff = now - settings.auto_sync_after_min * SECONDS_PER_MINUTE
        stale = [
            str(chat["id"])
            for chat in (result.get("coverage") or {}).get("chats", [])
            if chat.get("last_fetched_at") and chat["last_fetched_at"] < cutoff
        ]
        if not stale:
            return out
        age = _index_age_min(result, now)
        try:
            out.report = await self._sync(settings.auto_sync_budget_s, stale)
        except SyncRunning:
            out.warnings.append(
                _warning(
                    "SYNC_RUNNING",
                    f"the index is {age} min old and another sync is running; searched it as it is",
                )
            )
        except FloodWait as exc:
            wait = f" for {exc.retry_after_s:.0f} s" if exc.retry_after_s is not None else ""
            out.warnings.append(
                _warning(
                    "FLOOD_WAIT",
                    f"Telegram asked to wait{wait}; the index ({age} min old) was not refreshed",
                )
            )
        except ChatseekError as exc:
            out.warnings.append(
                _warning(
                    "AUTO_SYNC_SKIPPED",
                    f"the index is {age} min old and could not be refreshed ({exc.reason}); "
                    "searched it as it is",
                )
            )
        else:
            if out.report.get("stopped_by") == "flood_wait":
                out.warnings.append(
                    _warning(
                        "FLOOD_WAIT",
                        "Telegram asked to wait; the refresh stopped early and some chats are "
                        f"still stale (wait {out.report.get('flood_wait_s', 0):.0f} s)",
                    )
                )
            elif out.report.get("chats_remaining"):
                out.warnings.append(
                    _warning(
                        "AUTO_SYNC_INCOMPLETE",
                        f"the refresh ran out of its {settings.auto_sync_budget_s:g} s budget; "
                        f"{out.report['chats_remaining']} chat(s) are still stale (run sync)",
                    )
                )
        return out

    # --- search ---

    @_tool
    async def search(
        self,
        query: Question,
        chats: ChatSpecs = None,
        since: Since = None,
        until: Until = None,
        k: Annotated[int, _bounded_int("number of hits", 1, MAX_K)] = DEFAULT_K,
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
            query=_text("query", query, MAX_QUESTION_CHARS),
            chats=_specs("chats", chats),
            since=_text("since", since, MAX_BOUND_CHARS, required=False),
            until=_text("until", until, MAX_BOUND_CHARS, required=False),
            mode=parse_mode(mode),
            k=_int_range("k", k, 1, MAX_K),
            full=full,
        )
        if rerank is not None:
            request.rerank = rerank
        log.debug("search %s", redact(request.query))
        result = await self._document(lambda g: g.search.Search, request, timeout=SEARCH_TIMEOUT_S)
        refresh = await self._refresh(result)
        if refresh.report is not None:
            result = await self._document(
                lambda g: g.search.Search, request, timeout=SEARCH_TIMEOUT_S
            )
        result.setdefault("warnings", []).extend(refresh.warnings)
        result["synced"] = refresh.report
        if result.get("index_age_min") is None:
            result["index_age_min"] = _index_age_min(result, time.time())
        return result

    def _messages_request(
        self,
        query: str | None,
        tree: dict[str, Any] | None,
        source: str,
        chats: list[int | str] | None,
        timezone: str | None,
    ) -> pb.SearchMessagesRequest:
        from chatseek.gateway.v1 import gateway_service_pb2 as pb
        from chatseek_core.wire_json import parse_source

        text, tree_json = _lucene(query, tree)
        return pb.SearchMessagesRequest(
            query=text,
            tree_json=tree_json,
            source=parse_source(source),
            chats=_specs("chats", chats),
            timezone=_text("timezone", timezone, MAX_TIMEZONE_CHARS, required=False),
        )

    @_tool
    async def messages_search(
        self,
        query: LuceneText = None,
        tree: LuceneTree = None,
        source: MessagesSource = "active",
        chats: ChatSpecs = None,
        timezone: Timezone = None,
        limit: Annotated[
            int, _bounded_int("messages per page", 1, MAX_MESSAGES_LIMIT)
        ] = DEFAULT_MESSAGES_LIMIT,
        page: Annotated[
            str | None, Field(description="next_page_token of the previous page, unchanged")
        ] = None,
        newest: Annotated[bool, Field(description="order by time, newest first")] = False,
        context: Annotated[
            int, _bounded_int("neighbours shown before and after each hit", 0, MAX_NEIGHBOURS)
        ] = 0,
    ) -> dict[str, Any]:
        """Strict message search in Lucene syntax: every hit satisfies the query exactly.

        For exact tokens, IDs, amounts, names, links and filters: fields text, body, from, chat,
        date, kind, has, topic, in, preset, filename, mime, size, tag. Upper-case AND/OR/NOT;
        explicit AND binds tighter than OR. The envelope carries items, has_more,
        next_page_token, the query versions and timezone, words_ready and coverage. An album is
        one item: its `album` lists every photo, `matched` marking those the query hit.
        """
        request = self._messages_request(query, tree, source, chats, timezone)
        request.limit = _int_range("limit", limit, 1, MAX_MESSAGES_LIMIT)
        request.page_token = _text("page", page, MAX_PAGE_TOKEN_CHARS, required=False)
        request.newest = newest
        request.context = _int_range("context", context, 0, MAX_NEIGHBOURS)
        return await self._document(
            lambda g: g.search.SearchMessages, request, timeout=SEARCH_TIMEOUT_S
        )

    @_tool
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
            search=self._messages_request(query, tree, source, chats, timezone),
            by=_choice("by", by, STATS_BY),
        )
        return await self._document(
            lambda g: g.search.MessageStats, request, timeout=SEARCH_TIMEOUT_S
        )

    # --- conversations ---

    @_tool
    async def conversations_search(
        self,
        query: Question,
        chats: ChatSpecs = None,
        since: Since = None,
        limit: Annotated[
            int, _bounded_int("number of conversations", 1, MAX_CONVERSATIONS_FOUND)
        ] = DEFAULT_CONVERSATIONS,
    ) -> dict[str, Any]:
        """Find reconstructed conversations (reply-graph discussions) that answer a question.

        Each result names its conversation (chat, conversation_id, first/last message, dates,
        size, participants), its evidence (the best matching chunks, whole, with their message
        ids), a link and `by` (words, meaning); read the whole conversation with
        conversations_show. Conversation ids change when a chat is rebuilt: re-list rather
        than keep them.
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.SearchConversationsRequest(
            question=_text("query", query, MAX_QUESTION_CHARS),
            chats=_specs("chats", chats),
            since=_text("since", since, MAX_BOUND_CHARS, required=False),
            k=_int_range("limit", limit, 1, MAX_CONVERSATIONS_FOUND),
        )
        return await self._document(
            lambda g: g.search.SearchConversations, request, timeout=SEARCH_TIMEOUT_S
        )

    @_tool
    async def conversations_list(
        self,
        chat: ChatSpec,
        since: Since = None,
        limit: Annotated[
            int, _bounded_int("number of conversations", 1, MAX_CONVERSATIONS_LISTED)
        ] = DEFAULT_CONVERSATIONS_LISTED,
    ) -> dict[str, Any]:
        """List the conversations of one chat's current build, newest first."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.ListConversationsRequest(
            chat=_spec("chat", chat),
            since=_text("since", since, MAX_BOUND_CHARS, required=False),
            limit=_int_range("limit", limit, 1, MAX_CONVERSATIONS_LISTED),
        )
        return await self._document(lambda g: g.conversations.ListConversations, request)

    @_tool
    async def conversations_show(
        self,
        chat: ChatSpec,
        conversation_id: Annotated[
            int, Field(description="from conversations_list/search of the current build")
        ],
    ) -> dict[str, Any]:
        """The messages of one conversation, in order, each with its link and parent."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.ShowConversationRequest(
            chat=_spec("chat", chat), conversation_id=conversation_id
        )
        return await self._document(lambda g: g.conversations.ShowConversation, request)

    @_tool
    async def message_links(self, chat: ChatSpec, msg_id: MsgId) -> dict[str, Any]:
        """Why a message sits where it does: its candidate parents, the chosen one and the reason.

        Explains the graph (reply, agent answer, mention, same-author rule) with confidences.
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.MessageLinksRequest(chat=_spec("chat", chat), msg_id=msg_id)
        return await self._document(lambda g: g.conversations.MessageLinks, request)

    # --- readers ---

    @_tool
    async def thread(self, chat: ChatSpec, msg_id: MsgId) -> dict[str, Any]:
        """The whole reply thread a message belongs to, root first.

        For a channel post: the post, then its comments from the discussion group (each message
        names its own chat_id; pass that one back to context).
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.ThreadRequest(chat=_spec("chat", chat), msg_id=msg_id)
        return await self._document(lambda g: g.search.Thread, request)

    @_tool
    async def context(
        self,
        chat: ChatSpec,
        msg_id: MsgId,
        before: Annotated[int, _bounded_int("messages before", 0, MAX_AROUND)] = DEFAULT_AROUND,
        after: Annotated[int, _bounded_int("messages after", 0, MAX_AROUND)] = DEFAULT_AROUND,
    ) -> dict[str, Any]:
        """The messages around one, chronologically, within its thread or forum topic."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.ContextRequest(
            chat=_spec("chat", chat),
            msg_id=msg_id,
            before=_int_range("before", before, 0, MAX_AROUND),
            after=_int_range("after", after, 0, MAX_AROUND),
        )
        return await self._document(lambda g: g.search.Context, request)

    @_tool
    async def evidence(
        self,
        locators: Annotated[
            list[str],
            Field(
                description="message locators tg:<account>/<chat>/<msg> from results",
                json_schema_extra={"minItems": 1, "maxItems": MAX_LOCATORS},
            ),
        ],
        max_chars: Annotated[
            int, _bounded_int("text per message; 0 = default (4000)", 0, MAX_EVIDENCE_CHARS)
        ] = 0,
    ) -> dict[str, Any]:
        """Evidence packets for messages: chat, sender, date, text, link and a fingerprint.

        Says whether the text was truncated and whether the chat's history is complete.
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        if not locators:
            raise _invalid("locators", "locators is empty", "pass the locators of the hits")
        request = pb.EvidenceRequest(
            locators=_specs("locators", list(locators), MAX_LOCATORS),
            max_chars=_int_range("max_chars", max_chars, 0, MAX_EVIDENCE_CHARS),
        )
        return await self._document(lambda g: g.search.Evidence, request)

    # --- archive ---

    @_tool
    async def status(self) -> dict[str, Any]:
        """Every service's health, version, schema and feed lag (how far each index trails)."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        return await self._document(lambda g: g.ops.Status, pb.StatusRequest())

    @_tool
    async def sources(self) -> dict[str, Any]:
        """The sources the index holds chats under, each with its chats and their last sync.

        Configured sources first, then any other source still in the store (imports).
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        return await self._document(lambda g: g.archive.Sources, pb.SourcesRequest(action="ls"))

    @_tool
    async def dialogs(
        self,
        query: Annotated[str, Field(description="part of a chat or folder name, or @username")],
        limit: Annotated[int, _bounded_int("number of matches", 1, MAX_DIALOGS)] = DEFAULT_DIALOGS,
    ) -> dict[str, Any]:
        """Chats and folders of the Telegram account matching a name (for sources_add).

        Each match has kind, id, title, type, username, folders, score and target: the string
        to pass to sources_add.
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.DialogsRequest(
            query=_text("query", query, MAX_DIALOG_QUERY_CHARS),
            limit=_int_range("limit", limit, 1, MAX_DIALOGS),
        )
        return await self._document(lambda g: g.archive.Dialogs, request)

    @_tool
    async def sources_add(
        self,
        target: Annotated[
            str, Field(description="from dialogs: chat id, @username, t.me link or folder:<name>")
        ],
        since: Annotated[
            str | None, Field(description="skip history before this day (YYYY-MM-DD)")
        ] = None,
        comments: Annotated[
            bool, Field(description="channels: also index their discussion threads")
        ] = False,
    ) -> dict[str, Any]:
        """Add a chat or folder to the indexed sources (saved to the config); then run sync."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.SourcesRequest(
            action="add",
            target=_text("target", target, MAX_SPEC_CHARS),
            since=_text("since", since, MAX_BOUND_CHARS, required=False),
            comments=comments,
        )
        return await self._document(
            lambda g: g.archive.Sources, request, timeout=WRITE_TIMEOUT_S, idempotent=False
        )

    @_tool
    async def sources_remove(
        self,
        target: Annotated[
            str,
            Field(description="a source id from sources, folder name, chat id, @username or title"),
        ],
    ) -> dict[str, Any]:
        """Remove a source and delete its chats' stored history from every index.

        Refused while a sync runs. Only on the user's explicit request.
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.SourcesRequest(action="rm", target=_text("target", target, MAX_SPEC_CHARS))
        return await self._document(
            lambda g: g.archive.Sources, request, timeout=WRITE_TIMEOUT_S, idempotent=False
        )

    @_tool
    async def sync(
        self,
        budget_s: Annotated[
            float,
            Field(
                description="seconds the run may take; it stops between batches",
                json_schema_extra={"minimum": 1, "maximum": MAX_SYNC_BUDGET_S},
            ),
        ] = DEFAULT_SYNC_BUDGET_S,
        chats: ChatSpecs = None,
    ) -> dict[str, Any]:
        """Fetch new messages of the sources from Telegram, within a time budget.

        Returns the report: new, updated, deleted, chats_done, chats_remaining, unavailable,
        stopped_by (budget or flood_wait) and warnings. Run again to continue.
        """
        return await self._sync(
            _float_range("budget_s", budget_s, 1, MAX_SYNC_BUDGET_S), _specs("chats", chats)
        )

    # --- agent-assisted linking ---

    @_tool
    async def link_batches_status(self, chat: ChatSpec) -> dict[str, Any]:
        """Agent-assisted linking in one chat: messages, answered, uncertain ones without an answer.

        Also counts stale answers (their message or parent changed since); the build id says
        which build the numbers describe.
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.LinkBatchRequest(action="status", chat=_spec("chat", chat))
        return await self._document(lambda g: g.conversations.LinkBatch, request)

    @_tool
    async def link_batch_get(
        self,
        chat: ChatSpec,
        size: Annotated[int, _bounded_int("messages in the batch", 1, MAX_BATCH_SIZE)] = (
            DEFAULT_BATCH_SIZE
        ),
    ) -> dict[str, Any]:
        """A batch of messages the rules could not place, each with its candidate parents."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.LinkBatchRequest(
            action="get",
            chat=_spec("chat", chat),
            size=_int_range("size", size, 1, MAX_BATCH_SIZE),
        )
        return await self._document(lambda g: g.conversations.LinkBatch, request)

    @_tool
    async def link_batch_answer(
        self,
        chat: ChatSpec,
        answers: Annotated[
            list[dict[str, Any]],
            Field(
                description='one per message: {"msg_id": id, "parent": candidate id or "new"}',
                json_schema_extra={
                    "minItems": 1,
                    "maxItems": MAX_ANSWERS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "msg_id": {"type": "integer", "minimum": 1},
                            "parent": {
                                "anyOf": [
                                    {"type": "integer", "minimum": 1},
                                    {"const": NEW_CONVERSATION},
                                ]
                            },
                        },
                        "required": ["msg_id", "parent"],
                    },
                },
            ),
        ],
    ) -> dict[str, Any]:
        """Store the agent's parent choices for a batch; the next conversation build uses them."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.LinkBatchRequest(
            action="answer", chat=_spec("chat", chat), answer_json=_answers(answers)
        )
        return await self._document(
            lambda g: g.conversations.LinkBatch, request, timeout=WRITE_TIMEOUT_S, idempotent=False
        )


def register_tools(server: MCPServer, tools: ChatseekTools) -> None:
    """Add every tool of ``TOOL_NAMES`` to an ``MCPServer``, with its hints."""
    from mcp.types import ToolAnnotations

    for name in TOOL_NAMES:
        method = getattr(tools, name)
        server.add_tool(
            method,
            name=name,
            description=inspect.cleandoc(method.__doc__ or ""),
            annotations=ToolAnnotations(
                read_only_hint=name in READ_ONLY,
                destructive_hint=name in DESTRUCTIVE,
                open_world_hint=name in OPEN_WORLD,
            ),
            structured_output=True,
        )
