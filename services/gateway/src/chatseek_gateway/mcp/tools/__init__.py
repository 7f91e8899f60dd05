"""The MCP tools: each the twin of a CLI command, one JSON object per result.

A tool validates its arguments (``arguments``: lengths, ranges, enums), calls one gateway RPC
(``calls``) and returns the gateway's JSON document; an expected failure comes back as a normal
result (``error_result``). The tools live by area, mirroring the gateway's services:
``search`` (refreshing a stale index first, ``refresh``), ``conversations``, ``archive`` and
``ops``; ``registry`` composes them and ``catalog`` names them, their CLI twins and hints.
"""

from __future__ import annotations

from chatseek_gateway.mcp.tools.calls import error_result
from chatseek_gateway.mcp.tools.catalog import CLI_ONLY, CLI_TWINS, TOOL_NAMES
from chatseek_gateway.mcp.tools.registry import ChatseekTools, register_tools

__all__ = [
    "CLI_ONLY",
    "CLI_TWINS",
    "TOOL_NAMES",
    "ChatseekTools",
    "error_result",
    "register_tools",
]
