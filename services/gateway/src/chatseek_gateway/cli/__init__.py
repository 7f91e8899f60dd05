"""The ``chatseek`` command line: a thin gRPC client of the gateway.

Each command module registers its subcommands on the shared parser. Output goes to stdout (human
text by default, ``--json`` for a whole document, ``--jsonl`` to stream items); diagnostics go to
stderr. Expected failures print ``error: … (REASON)`` and a hint, with an exit code per reason.
Heavy packages are never imported here nor at the top of a command module: ``--help`` loads no
gRPC, and a command loads what it uses when it runs. Running one command imports (and, without
cached bytecode, compiles) only the module that registers it (``COMMANDS``); ``--help``, an
unknown command or none build the whole parser. A reader that goes away (``| head``) ends
the command quietly with the exit code a SIGPIPE would give. Without ``--account``, a command
acts for this shell's ``CHATSEEK_ACCOUNT`` when it is set, not only for the account the stack
was started with.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from chatseek_core.version import VERSION
from chatseek_gateway.cli.common import exit_code_for, print_error

__all__ = ["COMMANDS", "build_parser", "main"]

ACCOUNT_VARIABLE = "CHATSEEK_ACCOUNT"

COMMAND_MODULES = (
    "ops",
    "archive",
    "search",
    "messages",
    "conversations",
    "readers",
    "indexes",
    "mcp_cmd",
)
# Top-level command → the module under chatseek_gateway.cli that registers it (a test checks
# this against the whole parser).
COMMANDS = {
    **dict.fromkeys(("stack", "status", "verify", "backup", "config"), "ops"),
    **dict.fromkeys(
        ("import", "tags", "auth", "dialogs", "sources", "sync", "extract", "prune-deleted"),
        "archive",
    ),
    "search": "search",
    "messages": "messages",
    "conversations": "conversations",
    **dict.fromkeys(("thread", "context", "evidence"), "readers"),
    **dict.fromkeys(("embed", "models", "reindex"), "indexes"),
    "mcp": "mcp_cmd",
}
# What a shell reports for a writer killed by SIGPIPE (128 + 13): `| head` took what it wanted.
BROKEN_PIPE_EXIT = 141


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: whole (also used by the docs parity test), or only what ``command``
    needs (the subcommands of the one module that registers it)."""
    parser = argparse.ArgumentParser(
        prog="chatseek",
        description="Search your own chat history: exact messages and whole conversations.",
    )
    parser.add_argument("--version", action="version", version=f"chatseek {VERSION}")
    parser.add_argument("-v", "--verbose", action="store_true", help="DEBUG diagnostics")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    names = COMMAND_MODULES if command is None else (COMMANDS[command],)
    for name in names:
        importlib.import_module(f"chatseek_gateway.cli.{name}").register(sub)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs, when a parser for it alone will do; else None.

    The top-level options take no value, so the first word that is not an option is the
    command; a help option before it needs the whole parser.
    """
    for word in argv:
        if word in ("-h", "--help"):
            return None
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    try:
        return _run(argv)
    except BrokenPipeError:
        _drop_stdout()
        return BROKEN_PIPE_EXIT


def _run(argv: Sequence[str] | None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command(words))
    try:
        args = parser.parse_args(words)
    except SystemExit:
        sys.stdout.flush()  # `--help | head`: a closed pipe shows here, not in the exit flush
        raise
    _account_from_environment(args)
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


def _account_from_environment(args: argparse.Namespace) -> None:
    """``--account`` left out: ``CHATSEEK_ACCOUNT`` of this process, when set.

    The gateway answers an empty account with its own active one, which is the variable as it
    was when the stack started. A ``--source`` other than the active account (``all``) already
    says which accounts it means, and keeps the empty account.
    """
    if getattr(args, "account", None) != "":
        return
    if getattr(args, "source", "active") not in ("", "active", "telegram"):
        return
    args.account = os.environ.get(ACCOUNT_VARIABLE, "")


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
