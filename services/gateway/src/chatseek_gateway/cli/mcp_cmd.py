"""The ``mcp`` command: serve the MCP tools over stdio for a local AI agent.

stdout carries the protocol and nothing else; diagnostics (including the note that the local
stack is being started) go to stderr. The heavy MCP imports happen only when the command runs.
Like every command, a tool call that names no account acts for this process's
``CHATSEEK_ACCOUNT`` when it is set.
"""

from __future__ import annotations

import argparse
import os

from chatseek_gateway.cli import ACCOUNT_VARIABLE
from chatseek_gateway.cli.common import Subparsers, ensure_gateway, settings

__all__ = ["register"]


def register(sub: Subparsers) -> None:
    """Add ``mcp`` to the top-level parser."""
    p = sub.add_parser(
        "mcp",
        help="serve the tools to an AI agent over MCP (stdio)",
        description=(
            "Speaks MCP on stdin/stdout until the client hangs up; logs go to stderr. Starts the "
            "local stack on the first tool call when no gateway answers."
        ),
    )
    p.set_defaults(handler=_mcp)


def _ensure_gateway() -> None:
    """Start the local stack when no gateway answers (raises ``Unavailable`` if it cannot)."""
    ensure_gateway()


def _mcp(args: argparse.Namespace) -> int:
    from chatseek_gateway.mcp.stdio import serve_stdio

    account = os.environ.get(ACCOUNT_VARIABLE, "")
    return serve_stdio(settings(), ensure=_ensure_gateway, account=account, verbose=args.verbose)
