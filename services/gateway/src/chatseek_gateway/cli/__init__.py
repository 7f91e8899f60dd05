"""The ``chatseek`` command line: a thin gRPC client of the gateway.

Each command module registers its subcommands on the shared parser. Output goes to stdout (human
text by default, ``--json`` for a whole document, ``--jsonl`` to stream items); diagnostics go to
stderr. Expected failures print ``error: … (REASON)`` and a hint, with an exit code per reason.
Heavy packages are never imported here nor at the top of a command module: ``--help`` loads no
gRPC, and a command loads what it uses when it runs. A reader that goes away (``| head``) ends
the command quietly with the exit code a SIGPIPE would give.
"""

from __future__ import annotations

import argparse
import os
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
# What a shell reports for a writer killed by SIGPIPE (128 + 13): `| head` took what it wanted.
BROKEN_PIPE_EXIT = 141


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
    try:
        return _run(argv)
    except BrokenPipeError:
        _drop_stdout()
        return BROKEN_PIPE_EXIT


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit:
        sys.stdout.flush()  # `--help | head`: a closed pipe shows here, not in the exit flush
        raise
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
        sys.stdout.flush()
        return exit_code_for(exc)
    sys.stdout.flush()
    return int(code or 0)


def _drop_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's exit flush finds no broken pipe."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


if __name__ == "__main__":
    raise SystemExit(main())
