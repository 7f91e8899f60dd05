"""Security of a running chatseek: loopback only, private files, logs free of secrets.

A private stack runs at INFO level; its ingest service talks to a ``FakeTelegram`` (started by
``python -m tests.security_helpers``, the fake replacing Telethon and nothing else) whose login
takes a planted phone number, code and two-step password and whose channel carries planted
posts. The module fixture drives nearly every command against it: ``config init`` (with a
planted API hash), an import of an export whose messages hold planted secrets, ``auth`` with a
wrong code first, dialogs, sources (added, listed, pruned, removed), sync, extraction,
``prune-deleted``, every kind of search, the readers, tags, conversations, embedding, a lexical
reindex, verify, backup, and MCP calls over HTTP with the planted bearer token (and one with a
wrong token). The tests then check the listening sockets, the modes of the files it wrote and
every line under ``logs/`` and ``run/*.out``.
"""

from __future__ import annotations

import asyncio
import hmac
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from chatseek_core.probe import check
from chatseek_core.settings import SERVICES, load_settings
from chatseek_gateway.mcp.http import MCP_PATH, BearerAuth, check_http
from tests.security_helpers import (
    PLANTED_API_HASH,
    PLANTED_API_ID,
    PLANTED_CHANNEL_USERNAME,
    PLANTED_CODE,
    PLANTED_MCP_TOKEN,
    PLANTED_PASSWORD,
    PLANTED_PHONE,
    PLANTED_SESSION,
    SECRETS,
    TEXT_MARKERS,
    listening_addresses,
    planted_export,
)
from tests.stack_helpers import CLI_TIMEOUT_S, cli, cli_json, free_ports, settle, stack_env

ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"
WRONG_CODE = "00000"
START_TIMEOUT_S = 60.0
POLL_S = 0.1
PLANTED_CHAT = "Planted Secrets"
HTTP_UNAUTHORIZED = 401
MCP_TIMEOUT_S = 120.0
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "security-test", "version": "1"},
    },
}
MCP_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("search", {"query": "wombatquasar number"}),
    ("messages_search", {"query": "wombatquasar OR pelicanzircon"}),
    ("messages_stats", {"query": "wombatquasar", "by": "sender"}),
    ("thread", {"chat": PLANTED_CHAT, "msg_id": 2}),
    ("context", {"chat": PLANTED_CHAT, "msg_id": 3, "before": 2, "after": 2}),
    ("conversations_search", {"query": "deploy token"}),
    ("status", {}),
    ("sources", {}),
    ("dialogs", {"query": "planted"}),
    ("messages_search", {"query": "wombatquasar AND ("}),
]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@dataclass
class Planted:
    """The stack after every command ran, and what the fixture saw on the way."""

    env: dict[str, str]
    home: Path
    mcp_listen: str
    modes: dict[str, int] = field(default_factory=dict)
    session_before_auth: bool = True
    session_stamp: tuple[int, str] = (0, "")
    auth_output: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    mcp_results: list[Any] = field(default_factory=list)
    wrong_token_status: int = 0
    listening: set[str] = field(default_factory=set)


def _start_fake_ingest(env: dict[str, str], home: Path) -> subprocess.Popen[bytes]:
    run_dir = home / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    child_env = dict(
        env,
        CHATSEEK_LISTEN=env["CHATSEEK_INGEST_ADDR"],
        CHATSEEK_DATA_DIR=str(home / "data"),
        CHATSEEK_LOG_DIR=str(home / "logs"),
        CHATSEEK_LOG_FORMAT="text",
        PYTHONUNBUFFERED="1",
    )
    with open(run_dir / "ingest.out", "ab") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.security_helpers"],
            env=child_env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    (run_dir / "ingest.pid").write_text(f"{child.pid}\n")
    deadline = time.monotonic() + START_TIMEOUT_S
    while check(env["CHATSEEK_INGEST_ADDR"], timeout=1.0) != "SERVING":
        if child.poll() is not None or time.monotonic() > deadline:
            output = (run_dir / "ingest.out").read_text(errors="replace")
            pytest.fail(f"the fake-backed ingest did not start:\n{output}")
        time.sleep(POLL_S)
    return child


def _auth(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``chatseek auth`` answering a wrong code, the right one, then the 2FA password.

    A new session has no terminal, so the password prompt reads stdin as a pipe would.
    """
    return subprocess.run(
        [sys.executable, "-m", "chatseek_gateway.cli", "auth", "--phone", PLANTED_PHONE],
        env=env,
        input=f"{WRONG_CODE}\n{PLANTED_CODE}\n{PLANTED_PASSWORD}\n",
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        start_new_session=True,
        check=True,
    )


async def _mcp(url: str) -> tuple[list[Any], int]:
    """The tool calls of ``MCP_CALLS`` with the token, and the status of a wrong token."""
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {PLANTED_MCP_TOKEN}"},
            timeout=httpx2.Timeout(MCP_TIMEOUT_S),
        ) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        results = [await client.call_tool(name, args) for name, args in MCP_CALLS]
    async with httpx2.AsyncClient() as http:
        wrong = await http.post(
            url,
            json=INITIALIZE,
            headers={**MCP_HEADERS, "Authorization": f"Bearer {PLANTED_MCP_TOKEN[:-1]}X"},
        )
    return results, wrong.status_code


def _drive(planted: Planted, work: Path) -> None:
    """Run the commands whose logs the tests scan; asserts only that they worked."""
    env, home = planted.env, planted.home
    cli(env, "config", "path")
    cli(env, "config", "init")
    config = home / "config.toml"
    planted.modes["config"] = _mode(config)
    planted.modes["home"] = _mode(home)
    text = config.read_text()
    text = text.replace("# api_id = 123456", f"api_id = {PLANTED_API_ID}")
    text = text.replace(
        '# api_hash = "0123456789abcdef0123456789abcdef"', f'api_hash = "{PLANTED_API_HASH}"'
    )
    config.write_text(text)

    cli(env, "stack", "up")
    planted.modes["run"] = _mode(home / "run")
    planted.modes["logs"] = _mode(home / "logs")
    cli(env, "stack", "status", "--json")
    cli(env, "status", "--json")
    cli(env, "import", str(planted_export(work / "export")), "--json")

    session = home / "sessions" / "default.session"
    planted.session_before_auth = session.exists()
    planted.auth_output = _auth(env).stdout
    planted.modes["session"] = _mode(session)
    planted.modes["sessions"] = _mode(session.parent)
    planted.session_stamp = (session.stat().st_mtime_ns, session.read_text())

    cli(env, "dialogs", "--json", "planted")
    cli(env, "sources", "add", f"@{PLANTED_CHANNEL_USERNAME}", "--json")
    cli(env, "sync", "--json")
    cli(env, "sources", "ls", "--json")
    cli(env, "extract", "--json")
    settle(env)
    cli(env, "conversations", "build", "--all", "--json")
    settle(env)

    cli(env, "search", "--json", "--", "wombatquasar my number")
    cli(env, "search", "--mode", "lexical", "--json", "--", "накидкафрегат")
    cli(env, "search", "--mode", "dense", "--json", "--", "deploy token")
    cli(env, "messages", "search", "--json", "--", "wombatquasar OR pelicanzircon")
    cli(env, "messages", "search", "--json", "--", f'body:"{PLANTED_API_HASH}"')
    cli(env, "messages", "search", "--", "wombatquasar AND (", check=False)
    cli(env, "messages", "parse", "--json", "--", "накидкафрегат AND date>=7d")
    cli(env, "messages", "stats", "--by", "sender", "--json", "--", "wombatquasar")
    chat = PLANTED_CHAT
    cli(env, "messages", "links", "--json", "--", chat, "2")
    cli(env, "thread", "--json", "--", chat, "2")
    cli(env, "context", "--before", "2", "--after", "2", "--json", "--", chat, "3")
    hit = cli_json(env, "messages", "search", "--json", "--", "wombatquasar")["items"][0]
    planted.evidence = cli_json(env, "evidence", "--json", hit["locator"])
    cli(env, "conversations", "search", "--json", "--", "session string")
    conversations = cli_json(env, "conversations", "list", "--chat", chat, "--json")
    first = conversations["conversations"][0]["conversation_id"]
    cli(env, "conversations", "show", str(first), "--chat", chat, "--json")
    cli(env, "conversations", "links", "--chat", chat, "--json")
    cli(env, "tags", "add", "secret-stuff", "--chat", chat)
    cli(env, "tags", "ls", "--json")
    cli(env, "tags", "rm", "secret-stuff", "--chat", chat)
    cli(env, "prune-deleted", "--chat", f"@{PLANTED_CHANNEL_USERNAME}", "--json")
    cli(env, "embed", "--json")
    cli(env, "embed", "status", "--json")
    cli(env, "reindex", "lexical", "--json")
    cli(env, "sources", "prune", "--dry-run", "--json")
    cli(env, "models", "list", "--json")
    cli(env, "verify", "--json")
    cli(env, "backup", str(work / "backup"), "--json")
    cli(env, "stack", "logs", "ingest")

    url = f"http://{planted.mcp_listen}{MCP_PATH}"
    planted.mcp_results, planted.wrong_token_status = asyncio.run(_mcp(url))
    cli(env, "sources", "rm", f"@{PLANTED_CHANNEL_USERNAME}", "--json")
    settle(env)

    pids = [int(p.read_text()) for p in (home / "run").glob("*.pid")]
    planted.listening = listening_addresses(pids)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Planted]:
    """A private stack at INFO level, every command driven against it; always torn down."""
    work = tmp_path_factory.mktemp("security")
    home = work / "home"
    [mcp_port] = free_ports(1)
    mcp_listen = f"{LOOPBACK}:{mcp_port}"
    env = stack_env(
        home,
        CHATSEEK_LOG_LEVEL="INFO",
        CHATSEEK_MCP_TOKEN=PLANTED_MCP_TOKEN,
        CHATSEEK_MCP_HTTP_LISTEN=mcp_listen,
    )
    for name in ("CHATSEEK_TELEGRAM_API_ID", "CHATSEEK_TELEGRAM_API_HASH"):
        env.pop(name, None)
    result = Planted(env=env, home=home, mcp_listen=mcp_listen)
    ingest = _start_fake_ingest(env, home)
    try:
        _drive(result, work)
        yield result
    finally:
        cli(env, "stack", "down", check=False)
        if ingest.poll() is None:
            ingest.kill()
        ingest.wait()


# --- loopback ---


def test_every_service_and_the_mcp_endpoint_listen_on_loopback_by_default() -> None:
    for service in SERVICES:
        settings = load_settings(service, env={})
        assert settings.listen.rpartition(":")[0] == LOOPBACK, service
        assert {a.rpartition(":")[0] for a in settings.addrs.values()} == {LOOPBACK}
    settings = load_settings(env={"CHATSEEK_MCP_TOKEN": PLANTED_MCP_TOKEN})
    assert check_http(settings)[0] == LOOPBACK


def test_a_running_stack_listens_on_loopback_only(planted: Planted) -> None:
    expected = {planted.env[f"CHATSEEK_{name.upper()}_ADDR"] for name in SERVICES}
    assert expected | {planted.mcp_listen} <= planted.listening
    assert {address.rpartition(":")[0] for address in planted.listening} == {LOOPBACK}


# --- files ---


def test_config_session_run_and_log_files_are_private(planted: Planted) -> None:
    assert planted.modes == {
        "config": 0o600,
        "home": 0o700,
        "run": 0o700,
        "logs": 0o700,
        "session": 0o600,
        "sessions": 0o700,
    }


def test_only_auth_writes_the_session_file(planted: Planted) -> None:
    session = planted.home / "sessions" / "default.session"
    assert not planted.session_before_auth
    assert "signed in as Planted Owner" in planted.auth_output
    assert planted.session_stamp[1] == PLANTED_SESSION
    assert (session.stat().st_mtime_ns, session.read_text()) == planted.session_stamp
    assert [p.name for p in session.parent.iterdir()] == [session.name]


# --- logs ---


def _log_files(home: Path) -> list[Path]:
    return sorted(p for p in (home / "logs").rglob("*") if p.is_file()) + sorted(
        (home / "run").glob("*.out")
    )


def test_the_commands_worked_so_the_log_scan_is_not_vacuous(planted: Planted) -> None:
    packet = planted.evidence["evidence"][0]
    assert "wombatquasar" in packet["text"]
    assert [r.is_error for r in planted.mcp_results].count(False) >= len(MCP_CALLS) - 1
    assert planted.mcp_results[-1].structured_content["reason"] == "SYNTAX_ERROR"
    assert planted.wrong_token_status == HTTP_UNAUTHORIZED
    logs = {p.name: p.read_text(errors="replace") for p in _log_files(planted.home)}
    assert {f"{name}.log" for name in SERVICES} <= set(logs)
    assert "session written" in logs["ingest.log"]
    assert "SearchService/Search OK" in logs["gateway.log"]
    assert "tool search OK" in logs["gateway.log"]
    assert "without a valid bearer token" in logs["gateway.log"]


@pytest.mark.parametrize("secret", sorted(SECRETS), ids=str)
def test_no_log_line_holds_a_planted_secret(planted: Planted, secret: str) -> None:
    value = SECRETS[secret]
    for path in _log_files(planted.home):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            assert value not in line, f"{secret} in {path.name}:{number}: {line[:200]}"


def test_no_log_line_holds_message_text(planted: Planted) -> None:
    for path in _log_files(planted.home):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            found = [m for m in TEXT_MARKERS if m in line.lower()]
            assert not found, f"message text {found} in {path.name}:{number}: {line[:200]}"


# --- the bearer token ---


async def test_the_bearer_check_compares_every_token_in_constant_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    reached: list[bytes] = []
    statuses: list[int] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        reached.append(dict(scope["headers"])[b"authorization"])

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    auth = BearerAuth(app, PLANTED_MCP_TOKEN)
    token = PLANTED_MCP_TOKEN.encode()
    presented = [b"", b"x", token[:-1] + b"X", token + b"0", token]
    for value in presented:
        headers = [(b"authorization", b"Bearer " + value)] if value else []
        scope = {"type": "http", "headers": headers, "client": (LOOPBACK, 1)}
        await auth(scope, receive, send)
    assert compared == [(value, token) for value in presented]
    assert reached == [b"Bearer " + token]
    assert statuses == [HTTP_UNAUTHORIZED] * (len(presented) - 1)


def _text(path: Path) -> str:
    if path.suffix in (".db", ".db-wal", ".db-shm"):
        return ""
    return path.read_text(errors="replace")


def test_no_file_but_the_databases_holds_the_mcp_token(planted: Planted) -> None:
    files = [p for p in planted.home.rglob("*") if p.is_file()]
    assert [p for p in files if PLANTED_MCP_TOKEN in _text(p)] == []
