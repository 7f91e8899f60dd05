"""MCP over streamable HTTP: the bearer token, the startup refusal, a search through it.

The endpoint is the one the gateway process serves (``open_http``), started in the test's event
loop on an ephemeral port; a real SDK client session talks to it, and the tools reach a private
local stack holding a small imported export.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from chatseek_core.errors import ChatseekError, FailedPrecondition, InvalidArgument
from chatseek_core.settings import load_settings
from chatseek_gateway.mcp.http import MCP_PATH, HttpEndpoint, http_enabled, open_http
from tests.stack_helpers import cli, free_ports, stack_env

EXPORT = Path(__file__).resolve().parents[2] / "ingest/tests/fixtures/exports/account"
TOKEN = "test-token-0123456789abcdef"
WRONG_TOKEN = "test-token-0123456789abcdeX"
EPHEMERAL_LISTEN = "127.0.0.1:0"
CHANNEL_TITLE = "Valencia Rentals"
CONNECT_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 300.0  # a tool call answers only when the gateway has; the SDK's own default
HTTP_OK = 200
HTTP_UNAUTHORIZED = 401
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A private stack with the fixture export imported, shared by this module's tests.

    Its gateway serves MCP over HTTP on a fresh loopback port, behind ``TOKEN``.
    """
    base = tmp_path_factory.mktemp("mcp_http")
    [mcp_port] = free_ports(1)
    env = stack_env(
        base / "home",
        CHATSEEK_MCP_TOKEN=TOKEN,
        CHATSEEK_MCP_HTTP_LISTEN=f"127.0.0.1:{mcp_port}",
    )
    shutil.copytree(EXPORT, base / "export")
    try:
        cli(env, "stack", "up")
        cli(env, "import", str(base / "export"))
        yield env
    finally:
        cli(env, "stack", "down", check=False)


def _settings(home: Path, **variables: str) -> Any:
    env = {"CHATSEEK_HOME": str(home), **variables}
    return load_settings(env=env)


@contextlib.asynccontextmanager
async def endpoint(settings: Any) -> AsyncIterator[HttpEndpoint]:
    """The endpoint serving in this loop until the block ends (then cancelled, gracefully)."""
    opened = open_http(settings)
    task = asyncio.create_task(opened.serve())
    try:
        yield opened
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _post_initialize(url: str, headers: dict[str, str]) -> httpx2.Response:
    async with httpx2.AsyncClient() as http:
        return await http.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **headers})


# --- the token ---


async def test_requests_without_or_with_a_wrong_token_get_401(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path, CHATSEEK_MCP_TOKEN=TOKEN, CHATSEEK_MCP_HTTP_LISTEN=EPHEMERAL_LISTEN
    )
    async with endpoint(settings) as opened:
        missing = await _post_initialize(opened.url, {})
        wrong = await _post_initialize(opened.url, {"Authorization": f"Bearer {WRONG_TOKEN}"})
        other_scheme = await _post_initialize(opened.url, {"Authorization": f"Basic {TOKEN}"})
        right = await _post_initialize(opened.url, {"Authorization": f"Bearer {TOKEN}"})
    for refused in (missing, wrong, other_scheme):
        assert refused.status_code == HTTP_UNAUTHORIZED
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert refused.json()["reason"] == "UNAUTHENTICATED"
    assert right.status_code == HTTP_OK


async def _search_over_http(url: str) -> None:
    """A search and an unknown chat through a real SDK session with the bearer token."""
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=httpx2.Timeout(CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S),
        ) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        assert client.instructions
        result = await client.call_tool("search", {"query": "flat in Ruzafa"})
        missing = await client.call_tool("search", {"query": "flat", "chats": ["no such chat"]})
    assert not result.is_error and result.structured_content is not None
    doc = result.structured_content
    assert isinstance(doc["hits"], list)
    assert CHANNEL_TITLE in {chat["title"] for chat in doc["coverage"]["chats"]}
    assert missing.structured_content is not None
    assert missing.structured_content["reason"] == "CHAT_NOT_FOUND"
    assert missing.structured_content["candidates"]


async def test_a_search_through_the_endpoint_with_the_token(stack: dict[str, str]) -> None:
    settings = load_settings(env={**stack, "CHATSEEK_MCP_HTTP_LISTEN": EPHEMERAL_LISTEN})
    async with endpoint(settings) as opened:
        await _search_over_http(opened.url)


async def test_the_gateway_process_serves_the_endpoint(stack: dict[str, str]) -> None:
    listen = stack["CHATSEEK_MCP_HTTP_LISTEN"]
    await _search_over_http(f"http://{listen}{MCP_PATH}")


# --- starting ---


def test_the_endpoint_is_off_unless_configured(tmp_path: Path) -> None:
    assert not http_enabled(_settings(tmp_path))
    assert not http_enabled(_settings(tmp_path, CHATSEEK_MCP_LOOPBACK_ONLY="0"))
    assert http_enabled(_settings(tmp_path, CHATSEEK_MCP_LOOPBACK_ONLY="1"))
    assert http_enabled(_settings(tmp_path, CHATSEEK_MCP_TOKEN=TOKEN))
    assert http_enabled(_settings(tmp_path, CHATSEEK_MCP_HTTP_LISTEN=EPHEMERAL_LISTEN))


@pytest.mark.parametrize(
    ("variables", "error", "variable"),
    [
        ({"CHATSEEK_MCP_HTTP_LISTEN": EPHEMERAL_LISTEN}, FailedPrecondition, "CHATSEEK_MCP_TOKEN"),
        ({"CHATSEEK_MCP_HTTP_LISTEN": "0.0.0.0:0"}, FailedPrecondition, "CHATSEEK_MCP_TOKEN"),
        (
            {"CHATSEEK_MCP_HTTP_LISTEN": "0.0.0.0:0", "CHATSEEK_MCP_LOOPBACK_ONLY": "1"},
            InvalidArgument,
            "CHATSEEK_MCP_HTTP_LISTEN",
        ),
        (
            {"CHATSEEK_MCP_HTTP_LISTEN": EPHEMERAL_LISTEN, "CHATSEEK_MCP_TOKEN": "short"},
            FailedPrecondition,
            "CHATSEEK_MCP_TOKEN",
        ),
    ],
    ids=["no-token", "no-token-public", "loopback-only-public", "short-token"],
)
def test_the_endpoint_refuses_to_start_without_a_usable_token(
    tmp_path: Path, variables: dict[str, str], error: type[ChatseekError], variable: str
) -> None:
    with pytest.raises(error) as refused:
        open_http(_settings(tmp_path, **variables))
    assert refused.value.metadata["variable"] == variable
    assert refused.value.hint


async def test_a_loopback_only_endpoint_may_run_without_a_token(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path, CHATSEEK_MCP_HTTP_LISTEN=EPHEMERAL_LISTEN, CHATSEEK_MCP_LOOPBACK_ONLY="1"
    )
    async with endpoint(settings) as opened:
        assert opened.host == "127.0.0.1"
        response = await _post_initialize(opened.url, {})
    assert response.status_code == HTTP_OK
