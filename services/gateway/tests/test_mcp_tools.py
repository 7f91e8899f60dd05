"""The MCP tools in memory: the list and its CLI twins, results, error shapes, validation.

A real SDK client session talks to the server in process; the server talks to a private local
stack (fake models) holding a small imported Telegram Desktop export.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from chatseek_core.settings import load_settings
from chatseek_gateway.cli import build_parser
from chatseek_gateway.mcp.gateway import GatewayConnection
from chatseek_gateway.mcp.instructions import INSTRUCTIONS
from chatseek_gateway.mcp.server import build_server
from chatseek_gateway.mcp.tools import CLI_ONLY, CLI_TWINS, TOOL_NAMES
from tests.stack_helpers import cli, settle, stack_env

EXPORT = Path(__file__).resolve().parents[2] / "ingest/tests/fixtures/exports/account"
CHANNEL_TITLE = "Valencia Rentals"
SUPERGROUP_ID = -1001500000001
SUPERGROUP_WELCOME_MSG = 2
UNREACHABLE_GATEWAY = "127.0.0.1:9"
RENTAL_TEXT = "New flat in Ruzafa, 900 EUR"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A private stack with the fixture export imported, shared by this module's tests."""
    base = tmp_path_factory.mktemp("mcp_tools")
    env = stack_env(base / "home")
    shutil.copytree(EXPORT, base / "export")
    try:
        cli(env, "stack", "up")
        cli(env, "import", str(base / "export"))
        settle(env)
        yield env
    finally:
        cli(env, "stack", "down", check=False)


@contextlib.asynccontextmanager
async def session(gateway_addr: str, config_path: Path) -> AsyncIterator[Client]:
    """An in-memory MCP client session with a server that reaches the gateway at an address."""
    gateway = GatewayConnection(gateway_addr)
    try:
        async with Client(build_server(gateway, config_path)) as client:
            yield client
    finally:
        await gateway.close()


@contextlib.asynccontextmanager
async def stack_session(env: dict[str, str]) -> AsyncIterator[Client]:
    """An in-memory session against the private stack."""
    settings = load_settings(env=env)
    async with session(settings.addr("gateway"), settings.config_path) as client:
        yield client


def payload(result: CallToolResult) -> dict[str, Any]:
    """The one JSON object a tool returned (structured, and the same as its text)."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    [block] = result.content
    assert isinstance(block, TextContent)
    doc: dict[str, Any] = result.structured_content
    assert json.loads(block.text) == doc
    return doc


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _has_command(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> bool:
    for name in path:
        choices = _subcommands(parser)
        if name not in choices:
            return False
        parser = choices[name]
    return True


# --- the list ---


async def test_the_server_lists_every_tool_and_teaches_the_playbook(tmp_path: Path) -> None:
    async with session(UNREACHABLE_GATEWAY, tmp_path / "config.toml") as client:
        listed = await client.list_tools()
        assert client.instructions == INSTRUCTIONS
    assert [tool.name for tool in listed.tools] == list(TOOL_NAMES)
    for tool in listed.tools:
        assert tool.description
        assert tool.input_schema["type"] == "object"
    hints = {tool.name: tool.annotations for tool in listed.tools}
    assert hints["search"] is not None and hints["search"].read_only_hint
    assert hints["sources_remove"] is not None and hints["sources_remove"].destructive_hint


def test_every_tool_has_a_cli_twin() -> None:
    parser = build_parser()
    missing = [
        f"{tool} -> chatseek {' '.join(path)}"
        for tool, path in CLI_TWINS.items()
        if not _has_command(parser, path)
    ]
    assert not missing, "tools without their CLI command: " + "; ".join(missing)


def test_terminal_only_commands_have_no_tool() -> None:
    twins = set(CLI_TWINS.values())
    assert not [path for path in CLI_ONLY if path in twins]
    names = {"_".join(path).replace("-", "_") for path in CLI_ONLY}
    assert not names & set(TOOL_NAMES)


# --- results against the stack ---


async def test_a_search_returns_one_json_document_over_the_imported_chats(
    stack: dict[str, str],
) -> None:
    async with stack_session(stack) as client:
        doc = payload(await client.call_tool("search", {"query": "flat in Ruzafa", "k": 5}))
    assert "error" not in doc
    assert isinstance(doc["hits"], list)
    assert isinstance(doc["warnings"], list)
    assert CHANNEL_TITLE in {chat["title"] for chat in doc["coverage"]["chats"]}
    # Imported chats are never synced, so nothing is stale and nothing was refreshed.
    assert doc["synced"] is None
    assert doc["index_age_min"] is None


async def test_an_unknown_chat_is_an_error_result_with_candidates(stack: dict[str, str]) -> None:
    async with stack_session(stack) as client:
        result = await client.call_tool("search", {"query": "flat", "chats": ["no such chat"]})
    doc = payload(result)
    assert doc["reason"] == "CHAT_NOT_FOUND"
    assert doc["error"] and doc["hint"]
    assert any(CHANNEL_TITLE in candidate for candidate in doc["candidates"])


async def test_thread_reads_an_imported_message_with_its_link(stack: dict[str, str]) -> None:
    async with stack_session(stack) as client:
        doc = payload(
            await client.call_tool(
                "thread", {"chat": SUPERGROUP_ID, "msg_id": SUPERGROUP_WELCOME_MSG}
            )
        )
    [message] = [m for m in doc["messages"] if m["msg_id"] == SUPERGROUP_WELCOME_MSG]
    assert message["chat_id"] == SUPERGROUP_ID
    assert message["url"].startswith("https://t.me/c/")


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "Ruzafa"},
        {
            "tree": {
                "version": 1,
                "language": "lucene-v1",
                "root": {"type": "term", "field": "text", "value": "ruzafa"},
            }
        },
    ],
    ids=["text", "tree"],
)
async def test_strict_search_takes_text_or_its_tree(
    stack: dict[str, str], arguments: dict[str, Any]
) -> None:
    async with stack_session(stack) as client:
        doc = payload(await client.call_tool("messages_search", arguments))
    assert "error" not in doc, doc
    assert [item["text"] for item in doc["items"]] == [RENTAL_TEXT]


async def test_a_strict_query_the_service_rejects_is_an_error_result(
    stack: dict[str, str],
) -> None:
    async with stack_session(stack) as client:
        doc = payload(await client.call_tool("messages_search", {"query": "Ruzafa AND has:any"}))
    assert doc["reason"] == "INVALID_VALUE"
    assert doc["hint"]


async def test_status_reports_every_service(stack: dict[str, str]) -> None:
    async with stack_session(stack) as client:
        doc = payload(await client.call_tool("status", {}))
    assert {s["name"] for s in doc["services"]} >= {"gateway", "ingest", "fusion"}


# --- validation (answered before any gateway call) ---


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("search", {"query": "   "}, "query"),
        ("search", {"query": "x" * 5000}, "query"),
        ("search", {"query": "flat", "k": 0}, "k"),
        ("search", {"query": "flat", "mode": "fuzzy"}, "mode"),
        ("search", {"query": "flat", "chats": [str(i) for i in range(51)]}, "chats"),
        ("messages_search", {}, "query"),
        ("messages_search", {"query": "a", "tree": {"version": 1}}, "query"),
        ("messages_search", {"query": "a", "limit": 1000}, "limit"),
        ("messages_search", {"query": "a", "source": "everything"}, "source"),
        ("messages_search", {"query": "a", "context": 21}, "context"),
        ("messages_stats", {"query": "a", "by": "month"}, "by"),
        ("context", {"chat": "x", "msg_id": 1, "before": -1}, "before"),
        ("evidence", {"locators": []}, "locators"),
        ("sync", {"budget_s": 0}, "budget_s"),
        ("link_batch_answer", {"chat": "x", "answers": [{"msg_id": 3, "parent": "?"}]}, "answers"),
    ],
)
async def test_invalid_arguments_are_error_results_naming_the_field(
    tmp_path: Path, tool: str, arguments: dict[str, Any], field: str
) -> None:
    async with session(UNREACHABLE_GATEWAY, tmp_path / "config.toml") as client:
        doc = payload(await client.call_tool(tool, arguments))
    assert doc["reason"] == "INVALID_ARGUMENT"
    assert doc["field"] == field
    assert doc["error"] and doc["hint"]


async def test_an_unreachable_gateway_is_an_error_result_not_a_protocol_error(
    tmp_path: Path,
) -> None:
    async with session(UNREACHABLE_GATEWAY, tmp_path / "config.toml") as client:
        doc = payload(await client.call_tool("status", {}))
    assert doc["reason"] == "UNAVAILABLE"
    assert doc["hint"]
