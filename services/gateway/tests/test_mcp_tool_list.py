"""The MCP tool list is pinned: every tool's name, description, schemas and hints, in order.

``mcp_tool_list.json`` beside this file holds what ``tools/list`` answers, as the SDK's
``Tool`` writes it (camelCase keys); an agent sees exactly that. Any change to a tool's
arguments, their bounds, its docstring or its hints shows up here. ``CHATSEEK_WIRE_CAPTURE=1``
rewrites the copy after a deliberate change. Each tool lives in exactly one area class.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mcp import Client

from chatseek_gateway.mcp.gateway import GatewayConnection
from chatseek_gateway.mcp.server import build_server
from chatseek_gateway.mcp.tools import TOOL_NAMES
from chatseek_gateway.mcp.tools.archive import ArchiveTools
from chatseek_gateway.mcp.tools.conversations import ConversationTools
from chatseek_gateway.mcp.tools.ops import OpsTools
from chatseek_gateway.mcp.tools.search import SearchTools
from tests.wire_helpers import CAPTURE_ENV

PINNED = Path(__file__).resolve().parent / "mcp_tool_list.json"
# Listing the tools never opens the channel, so nothing need answer here.
UNREACHABLE_GATEWAY = "127.0.0.1:9"


async def _listed(config_path: Path) -> list[dict[str, Any]]:
    gateway = GatewayConnection(UNREACHABLE_GATEWAY)
    try:
        async with Client(build_server(gateway, config_path)) as client:
            listed = await client.list_tools()
    finally:
        await gateway.close()
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listed.tools]


async def test_the_tool_list_matches_its_pinned_copy(tmp_path: Path) -> None:
    tools = await _listed(tmp_path / "config.toml")
    if os.environ.get(CAPTURE_ENV) == "1":
        PINNED.write_text(json.dumps(tools, indent=2, ensure_ascii=False) + "\n")
    pinned = json.loads(PINNED.read_text())
    assert [tool["name"] for tool in tools] == [tool["name"] for tool in pinned]
    for tool, expected in zip(tools, pinned, strict=True):
        assert tool == expected, tool["name"]


def test_each_tool_belongs_to_exactly_one_area() -> None:
    owned = [
        name
        for area in (SearchTools, ConversationTools, ArchiveTools, OpsTools)
        for name in area.TOOLS
    ]
    assert sorted(owned) == sorted(TOOL_NAMES)
