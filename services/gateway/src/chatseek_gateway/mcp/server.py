"""Builds the chatseek MCP server: the tools over one gateway connection, with the playbook.

The same server object serves every transport (stdio for a local agent, streamable HTTP from
the gateway process, in memory in tests); only how it reaches the gateway differs.
"""

from __future__ import annotations

from pathlib import Path

from mcp.server.mcpserver import MCPServer

from chatseek_core.version import VERSION
from chatseek_gateway.mcp.gateway import GatewayConnection
from chatseek_gateway.mcp.instructions import INSTRUCTIONS
from chatseek_gateway.mcp.tools import ChatseekTools, register_tools

__all__ = ["SERVER_NAME", "build_server"]

SERVER_NAME = "chatseek"


def build_server(gateway: GatewayConnection, config_path: Path) -> MCPServer:
    """The MCP server with every tool registered.

    Args:
        gateway: how the tools reach the gateway's gRPC facade; the caller closes it.
        config_path: the user config file (read on each search for the auto-refresh settings).
    """
    server: MCPServer = MCPServer(
        SERVER_NAME,
        title="chatseek",
        description="Search the user's own chat history: exact messages and whole conversations.",
        instructions=INSTRUCTIONS,
        version=VERSION,
        log_level="WARNING",
    )
    register_tools(server, ChatseekTools(gateway, config_path))
    return server
