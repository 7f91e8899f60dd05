"""Every tool over one gateway connection, and their registration on an MCP server.

``ChatseekTools`` composes the areas (search, conversations, archive, ops), each a small class
that is handed the ``GatewayCalls`` it shares and nothing else; only search's also gets the
``AutoRefresh``. ``register_tools`` adds them in ``TOOL_NAMES`` order with their hints.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chatseek_gateway.mcp.gateway import GatewayConnection
from chatseek_gateway.mcp.tools.archive import ArchiveTools
from chatseek_gateway.mcp.tools.calls import GatewayCalls
from chatseek_gateway.mcp.tools.catalog import DESTRUCTIVE, OPEN_WORLD, READ_ONLY, TOOL_NAMES
from chatseek_gateway.mcp.tools.conversations import ConversationTools
from chatseek_gateway.mcp.tools.ops import OpsTools
from chatseek_gateway.mcp.tools.refresh import AutoRefresh
from chatseek_gateway.mcp.tools.search import SearchTools

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["ChatseekTools", "register_tools"]

Tool = Callable[..., Awaitable[dict[str, Any]]]


class ChatseekTools:
    """The chatseek operations an agent may call, over one gateway connection, by area.

    Args:
        gateway: the connection to the gateway's gRPC facade.
        config_path: the user config file (its ``[search]`` table sets the auto-refresh).
    """

    def __init__(self, gateway: GatewayConnection, config_path: Path) -> None:
        calls = GatewayCalls(gateway)
        self.search = SearchTools(calls, AutoRefresh(calls, config_path))
        self.conversations = ConversationTools(calls)
        self.archive = ArchiveTools(calls)
        self.ops = OpsTools(calls)

    def by_name(self) -> dict[str, Tool]:
        """Each area's tools (bound methods) under their names."""
        tools: dict[str, Tool] = {}
        for area in (self.search, self.conversations, self.archive, self.ops):
            tools.update({name: getattr(area, name) for name in area.TOOLS})
        return tools


def register_tools(server: MCPServer, tools: ChatseekTools) -> None:
    """Add every tool of ``TOOL_NAMES`` to an ``MCPServer``, with its hints."""
    from mcp.types import ToolAnnotations

    methods = tools.by_name()
    for name in TOOL_NAMES:
        method = methods[name]
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
