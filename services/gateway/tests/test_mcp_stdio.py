"""``chatseek mcp`` over stdio: nothing but protocol on stdout, the stack started on demand.

The real command runs as a subprocess against a private local stack (fake models). One session
is driven by hand so every byte of stdout can be checked; one goes through the SDK's stdio
client. The stdout guard itself is exercised in a subprocess of its own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.stack_helpers import cli, stack_env

EXPORT = Path(__file__).resolve().parents[2] / "ingest/tests/fixtures/exports/account"
MCP_COMMAND = [sys.executable, "-m", "chatseek_gateway.cli"]
CHANNEL_TITLE = "Valencia Rentals"
EXIT_TIMEOUT_S = 60
PROTOCOL_VERSION = "2025-06-18"
GUARD_SCRIPT = """
import os, sys
from chatseek_gateway.mcp.stdio import StdoutWriteError, guarded_stdio

with guarded_stdio() as (wire_in, wire_out):
    wire_out.write(b'{"jsonrpc": "2.0"}\\n')
    wire_out.flush()
    try:
        print("stray print")
    except StdoutWriteError:
        sys.stderr.write("the guard refused a print\\n")
    os.write(1, b"stray fd write\\n")
print("stdout restored")
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    """A private stack's environment and an export to import; the stack is torn down after."""
    base = tmp_path_factory.mktemp("mcp_stdio")
    env = stack_env(base / "home")
    shutil.copytree(EXPORT, base / "export")
    try:
        yield env, base / "export"
    finally:
        cli(env, "stack", "down", check=False)


def _send(proc: subprocess.Popen[str], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()


def _frame(line: str) -> dict[str, Any]:
    """One line of stdout, which must be one JSON-RPC 2.0 message."""
    message = json.loads(line)
    assert isinstance(message, dict)
    assert message["jsonrpc"] == "2.0"
    return message


def _answer(proc: subprocess.Popen[str], request_id: int, seen: list[str]) -> dict[str, Any]:
    """Read stdout frames until the response to ``request_id``; every line is checked."""
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        assert line, "the server closed stdout before answering"
        seen.append(line)
        message = _frame(line)
        if message.get("id") == request_id:
            return message


def _tool_call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def test_stdout_carries_only_protocol_while_the_stack_is_started_and_tools_run(
    stack: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    env, _ = stack
    cli(env, "stack", "down")
    stderr_path = tmp_path / "stderr.txt"
    seen: list[str] = []
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen(
            [*MCP_COMMAND, "--verbose", "mcp"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        try:
            _send(
                proc,
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": PROTOCOL_VERSION,
                        "capabilities": {},
                        "clientInfo": {"name": "test", "version": "1"},
                    },
                },
            )
            initialized = _answer(proc, 1, seen)
            _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            _send(proc, _tool_call(2, "status", {}))
            status = _answer(proc, 2, seen)
            _send(proc, _tool_call(3, "search", {"query": "flat", "chats": ["no such chat"]}))
            missing = _answer(proc, 3, seen)
            _send(proc, _tool_call(4, "search", {"query": "flat", "k": 0}))
            invalid = _answer(proc, 4, seen)
        finally:
            out, _ = proc.communicate(timeout=EXIT_TIMEOUT_S)
    seen.extend(out.splitlines(keepends=True))
    for line in seen:
        _frame(line)
    assert proc.returncode == 0

    assert initialized["result"]["instructions"]
    health = {s["name"]: s["health"] for s in status["result"]["structuredContent"]["services"]}
    assert set(health.values()) == {"SERVING"}
    assert missing["result"]["structuredContent"]["reason"] == "CHAT_NOT_FOUND"
    assert invalid["result"]["structuredContent"]["field"] == "k"
    diagnostics = stderr_path.read_text()
    assert "starting the local stack" in diagnostics
    assert "tool search" in diagnostics


async def test_a_search_through_the_sdk_stdio_client(
    stack: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    env, export = stack
    cli(env, "import", str(export))
    params = StdioServerParameters(command=MCP_COMMAND[0], args=[*MCP_COMMAND[1:], "mcp"], env=env)
    stderr: IO[str]
    with open(tmp_path / "stderr.txt", "w") as stderr:
        async with Client(stdio_client(params, errlog=stderr)) as client:
            listed = await client.list_tools()
            result = await client.call_tool("search", {"query": "flat in Ruzafa"})
    assert "search" in {tool.name for tool in listed.tools}
    assert not result.is_error and result.structured_content is not None
    doc = result.structured_content
    assert isinstance(doc["hits"], list)
    assert CHANNEL_TITLE in {chat["title"] for chat in doc["coverage"]["chats"]}


def test_the_stdout_guard_refuses_prints_and_diverts_raw_writes_to_stderr() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", GUARD_SCRIPT],
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == '{"jsonrpc": "2.0"}\nstdout restored\n'
    assert "the guard refused a print" in proc.stderr
    assert "stray fd write" in proc.stderr
