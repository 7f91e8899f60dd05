"""The ``chatseek`` command line: a thin gRPC client of the gateway.

Each command module registers its subcommands on the shared parser. Output goes to stdout (human
text by default, ``--json`` for a whole document, ``--jsonl`` to stream items); diagnostics go to
stderr. Expected failures print ``error: … (REASON)`` and a hint, with an exit code per reason.
Heavy packages are never imported here nor at the top of a command module: ``--help`` loads no
gRPC, and a command loads what it uses when it runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from chatseek_core.version import VERSION
from chatseek_gateway.cli import (
    archive,
    conversations,
    indexes,
    mcp_cmd,
    messages,
    ops,
    readers,
    search,
)
from chatseek_gateway.cli.common import exit_code_for, print_error

__all__ = ["build_parser", "main"]

COMMAND_MODULES = (ops, archive, search, messages, conversations, readers, indexes, mcp_cmd)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (also used by the docs parity test)."""
    parser = argparse.ArgumentParser(
        prog="chatseek",
        description="Search your own chat history: exact messages and whole conversations.",
    )
    parser.add_argument("--version", action="version", version=f"chatseek {VERSION}")
    parser.add_argument("-v", "--verbose", action="store_true", help="DEBUG diagnostics")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.handler(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        # A ChatseekError can only have been raised once its module was imported.
        errors = sys.modules.get("chatseek_core.errors")
        if errors is None or not isinstance(exc, errors.ChatseekError):
            raise
        print_error(exc, getattr(args, "json", False))
        return exit_code_for(exc)
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(main())
