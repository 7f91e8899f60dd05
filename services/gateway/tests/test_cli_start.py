"""The CLI's start-up and exit: what ``--help`` loads, and a reader that goes away.

Each test runs the real CLI in a subprocess: what an interpreter imports is only visible in a
fresh one, and a closed pipe only behaves like ``| head`` on a real file descriptor.
"""

from __future__ import annotations

import argparse

import pytest

from chatseek_gateway.cli import BROKEN_PIPE_EXIT, COMMANDS, build_parser
from tests.stack_helpers import cli_modules, closed_reader

HEAVY = {"chatseek_core.errors", "chatseek_core.probe", "chatseek_gateway.stack"}


def test_help_loads_no_grpc_no_protobuf_and_no_rich() -> None:
    modules, proc = cli_modules(None, "--help")
    assert proc.returncode == 0
    assert "search" in proc.stdout
    assert not {m for m in modules if m.split(".")[0] in {"grpc", "rich", "google"}}
    assert not modules & HEAVY


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


def test_every_command_is_mapped_to_the_module_that_registers_it() -> None:
    assert set(COMMANDS) == _commands(build_parser())
    for command in COMMANDS:
        assert command in _commands(build_parser(command))


def test_a_command_loads_only_the_module_that_registers_it() -> None:
    modules, proc = cli_modules(None, "-v", "search", "--help")
    assert proc.returncode == 0
    assert "--mode" in proc.stdout
    assert "chatseek_gateway.cli.search" in modules
    assert "chatseek_gateway.cli.archive" not in modules


def test_an_unknown_command_is_refused_with_the_whole_list() -> None:
    _, proc = cli_modules(None, "serach", "flat")
    assert proc.returncode == 2
    assert "invalid choice: 'serach'" in proc.stderr
    assert "search" in proc.stderr and "import" in proc.stderr


@pytest.mark.parametrize("args", [("--help",), ("--version",)])
def test_a_reader_that_goes_away_from_the_help_leaves_no_traceback(args: tuple[str, ...]) -> None:
    proc = closed_reader(None, *args)
    assert proc.stderr == ""
    assert proc.returncode in (0, BROKEN_PIPE_EXIT)


def test_a_reader_that_goes_away_ends_a_command_quietly_with_the_sigpipe_code() -> None:
    proc = closed_reader(None, "config", "path")
    assert proc.stderr == ""
    assert proc.returncode == BROKEN_PIPE_EXIT
