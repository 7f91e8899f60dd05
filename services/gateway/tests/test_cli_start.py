"""The CLI's start-up and exit: what ``--help`` loads, and a reader that goes away.

Each test runs the real CLI in a subprocess: what an interpreter imports is only visible in a
fresh one, and a closed pipe only behaves like ``| head`` on a real file descriptor.
"""

from __future__ import annotations

import pytest

from chatseek_gateway.cli import BROKEN_PIPE_EXIT
from tests.stack_helpers import cli_modules, closed_reader

HEAVY = {"chatseek_core.errors", "chatseek_core.probe", "chatseek_gateway.stack"}


def test_help_loads_no_grpc_no_protobuf_and_no_rich() -> None:
    modules, proc = cli_modules(None, "--help")
    assert proc.returncode == 0
    assert "search" in proc.stdout
    assert not {m for m in modules if m.split(".")[0] in {"grpc", "rich", "google"}}
    assert not modules & HEAVY


@pytest.mark.parametrize("args", [("--help",), ("--version",)])
def test_a_reader_that_goes_away_from_the_help_leaves_no_traceback(args: tuple[str, ...]) -> None:
    proc = closed_reader(None, *args)
    assert proc.stderr == ""
    assert proc.returncode in (0, BROKEN_PIPE_EXIT)


def test_a_reader_that_goes_away_ends_a_command_quietly_with_the_sigpipe_code() -> None:
    proc = closed_reader(None, "config", "path")
    assert proc.stderr == ""
    assert proc.returncode == BROKEN_PIPE_EXIT
