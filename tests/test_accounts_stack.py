"""Two Telegram accounts end to end: their own session files, one store, search per account.

A real stack whose ingest process serves two fake accounts (``home`` and ``work``) by session
string. Both read the public channel ``City news`` (one chat id, two copies, one per account);
each has a chat of its own. Strict, hybrid and conversation search answer per account and, with
``--source all``, across both; a message deleted on Telegram for one account goes only there.
The JSON of the Telegram commands (dialogs, sources add/rm/prune, sync, prune-deleted) is pinned
in ``tests/wire/`` (see ``tests/wire_helpers.py``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

from tests.fault_helpers import (
    HOME_USER,
    SHARED_CHANNEL,
    Stack,
    delete_in_fake_world,
    start_fake_ingest,
)
from tests.stack_helpers import cli, cli_json, settle, stack_env
from tests.wire_helpers import assert_pinned

SHARED = -1_000_000_000_000 - SHARED_CHANNEL
TRAM_POST = 2
# The first `sources add` and `sync` of home, as the fixture's commands printed them.
FIRST: dict[str, Any] = {}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("accounts") / "home"
    stack = Stack(home=home, env=stack_env(home))
    fake = start_fake_ingest(stack, world="accounts")
    try:
        stack.up()
        for account, chat in (("home", "Family"), ("work", "Team")):
            added = cli_json(
                stack.env, "sources", "add", "--account", account, "@citynews", "--json"
            )
            FIRST.setdefault("sources_add", added)
            cli(stack.env, "sources", "add", "--account", account, _chat_id(stack, account, chat))
            report = cli_json(stack.env, "sync", "--account", account, "--json")
            FIRST.setdefault("sync", report)
            assert report["stopped_by"] is None, report
        settle(stack.env)
        for account in ("home", "work"):
            cli(stack.env, "conversations", "build", "--all", "--account", account)
        settle(stack.env)
        yield stack
    finally:
        stack.down()
        fake.kill()
        fake.wait(timeout=30)


def _chat_id(stack: Stack, account: str, title: str) -> str:
    found = cli_json(stack.env, "dialogs", "--account", account, "--json", "--", title)
    return str(next(m["target"] for m in found["matches"] if m["kind"] == "chat"))


def strict(stack: Stack, query: str, *scope: str) -> list[str]:
    doc = cli_json(stack.env, "messages", "search", "--json", "--limit", "50", *scope, "--", query)
    return sorted(item["locator"] for item in doc["items"])


def accounts_in(doc: Any) -> set[str]:
    """The accounts a result names, by locator (``tg:<account>/…``) or by its chat."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            chat = value.get("chat")
            if isinstance(chat, dict) and chat.get("account"):
                found.add(str(chat["account"]))
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str) and value.startswith("tg:"):
            found.add(value[3:].split("/")[0])

    walk(doc)
    return found


def test_strict_search_answers_per_account_and_across_both(stack: Stack) -> None:
    both = strict(stack, "tram", "--source", "all")
    assert both == [f"tg:home/{SHARED}/{TRAM_POST}", f"tg:work/{SHARED}/{TRAM_POST}"]
    assert strict(stack, "tram", "--account", "work") == [f"tg:work/{SHARED}/{TRAM_POST}"]
    assert strict(stack, "invoice", "--account", "home") == []
    assert {loc.split("/")[0] for loc in strict(stack, "invoice", "--source", "all")} == {"tg:work"}


def test_hybrid_search_finds_each_accounts_own_chat_only_in_its_scope(stack: Stack) -> None:
    query = "invoice totals or apple pie for Sunday dinner"
    everywhere = cli_json(stack.env, "search", "--source", "all", "--json", "--", query)
    assert accounts_in(everywhere["hits"]) == {"home", "work"}
    for account in ("home", "work"):
        own = cli_json(stack.env, "search", "--account", account, "--json", "--", query)
        assert own["hits"] and accounts_in(own["hits"]) == {account}


def test_conversation_search_answers_per_account_and_across_both(stack: Stack) -> None:
    question = "who bakes the apple pie for dinner at grandma's"
    everywhere = cli_json(
        stack.env, "conversations", "search", "--source", "all", "--json", "--", question
    )
    assert "home" in accounts_in(everywhere["results"])
    work = cli_json(
        stack.env, "conversations", "search", "--account", "work", "--json", "--", question
    )
    assert accounts_in(work["results"]) <= {"work"}


def test_without_account_the_cli_acts_for_its_own_chatseek_account(stack: Stack) -> None:
    # The stack started without CHATSEEK_ACCOUNT (its active account is "default"); a shell
    # that sets the variable searches that account, as the README says.
    env = {**stack.env, "CHATSEEK_ACCOUNT": "work"}

    def strict_in(*scope: str) -> list[str]:
        doc = cli_json(env, "messages", "search", "--json", *scope, "--", "tram")
        return sorted(item["locator"] for item in doc["items"])

    assert strict_in() == [f"tg:work/{SHARED}/{TRAM_POST}"]
    query = "invoice totals or apple pie for Sunday dinner"
    hybrid = cli_json(env, "search", "--json", "--", query)
    assert hybrid["hits"] and accounts_in(hybrid["hits"]) == {"work"}
    # --account still decides, and --source all still means every account.
    assert strict_in("--account", "home") == [f"tg:home/{SHARED}/{TRAM_POST}"]
    assert strict_in("--source", "all") == [
        f"tg:home/{SHARED}/{TRAM_POST}",
        f"tg:work/{SHARED}/{TRAM_POST}",
    ]
    # Without the variable, the stack's own active account answers, and it holds nothing.
    refused = cli(stack.env, "messages", "search", "--", "tram", check=False)
    assert refused.returncode != 0 and "'default' is not in the store" in refused.stderr


def _structured(result: CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None, result.content
    return result.structured_content


async def test_without_account_mcp_over_stdio_acts_for_its_own_chatseek_account(
    stack: Stack, tmp_path: Path
) -> None:
    # An agent's `chatseek mcp` runs with its own environment; the stack's active account is
    # "default", which holds nothing.
    def server(account: str | None) -> StdioServerParameters:
        env = {k: v for k, v in stack.env.items() if k != "CHATSEEK_ACCOUNT"}
        if account is not None:
            env["CHATSEEK_ACCOUNT"] = account
        return StdioServerParameters(
            command=sys.executable, args=["-m", "chatseek_gateway.cli", "mcp"], env=env
        )

    def locators(doc: dict[str, Any]) -> list[str]:
        return sorted(item["locator"] for item in doc["items"])

    with open(tmp_path / "stderr.txt", "w") as errlog:
        async with Client(stdio_client(server("work"), errlog=errlog)) as client:
            own = _structured(await client.call_tool("messages_search", {"query": "tram"}))
            every = _structured(
                await client.call_tool("messages_search", {"query": "tram", "source": "all"})
            )
            query = "invoice totals or apple pie for Sunday dinner"
            hybrid = _structured(await client.call_tool("search", {"query": query}))
            stats = _structured(
                await client.call_tool("messages_stats", {"query": "tram", "by": "chat"})
            )
        async with Client(stdio_client(server(None), errlog=errlog)) as client:
            unset = _structured(await client.call_tool("messages_search", {"query": "tram"}))
    assert locators(own) == [f"tg:work/{SHARED}/{TRAM_POST}"]
    assert locators(every) == [f"tg:home/{SHARED}/{TRAM_POST}", f"tg:work/{SHARED}/{TRAM_POST}"]
    assert hybrid["hits"] and accounts_in(hybrid["hits"]) == {"work"}
    assert accounts_in(stats) == {"work"}, stats
    assert "'default' is not in the store" in unset["error"], unset


def test_a_message_deleted_for_one_account_goes_from_that_account_only(stack: Stack) -> None:
    delete_in_fake_world(stack, HOME_USER, SHARED, TRAM_POST)
    report = cli_json(stack.env, "sync", "--account", "home", "--json")
    assert report["deleted"] == 1
    settle(stack.env)
    assert strict(stack, "tram", "--source", "all") == [f"tg:work/{SHARED}/{TRAM_POST}"]
    # The deleted post left home's conversation chunks too, with no rebuild.
    found = cli_json(
        stack.env, "conversations", "search", "--account", "home", "--json", "--", "tram line"
    )
    assert "tram" not in json.dumps(found["results"]).lower()
    assert cli_json(stack.env, "verify", "--json")["ok"] is True


def test_each_account_keeps_its_own_session_file(stack: Stack) -> None:
    sessions = sorted(p.name for p in (stack.home / "sessions").iterdir())
    assert sessions == ["home.session", "work.session"]
    status = cli_json(stack.env, "sources", "ls", "--account", "work", "--json")
    titles = {c["title"] for s in status["sources"] for c in s["chats"]}
    assert titles == {"City news", "Team"}


def test_sync_json_streams_its_progress_events_on_stderr_and_the_report_on_stdout(
    stack: Stack,
) -> None:
    proc = cli(stack.env, "sync", "--account", "work", "--json")
    report = json.loads(proc.stdout)
    events = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert report["stopped_by"] is None
    assert events and all(e["event"] == "progress" and e["stage"] == "sync" for e in events)
    assert {e.get("account") for e in events} == {"work"}
    assert {"City news", "Team"} <= {e["item"] for e in events}


def test_the_telegram_commands_json_is_unchanged(stack: Stack) -> None:
    assert_pinned("cli_sources_add", FIRST["sources_add"])
    assert_pinned("cli_sync", FIRST["sync"])
    dialogs = cli_json(stack.env, "dialogs", "--account", "home", "--json", "--", "Family")
    assert_pinned("cli_dialogs", dialogs)
    pruned = cli_json(stack.env, "prune-deleted", "--account", "work", "--json")
    assert_pinned("cli_prune_deleted", pruned)
    preview = cli_json(stack.env, "sources", "prune", "--dry-run", "--account", "work", "--json")
    assert_pinned("cli_sources_prune_dry_run", preview)
    listed = cli_json(stack.env, "sources", "ls", "--account", "home", "--json")
    # Sources added within one second list by id, else by when they were added.
    listed["sources"].sort(key=lambda source: source["source_id"])
    assert_pinned("cli_sources_ls_telegram", listed)


def test_removing_a_source_prints_the_json_main_printed(stack: Stack) -> None:
    """Last in the module: it deletes the Team chat of work."""
    team = _chat_id(stack, "work", "Team")
    removed = cli_json(stack.env, "sources", "rm", "--account", "work", "--json", "--", team)
    assert_pinned("cli_sources_rm", removed)
