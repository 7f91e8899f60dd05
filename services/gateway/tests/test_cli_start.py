"""The CLI's start-up: what ``--help`` loads.

Each test runs the real CLI in a subprocess: what an interpreter imports is only visible in a
fresh one.
"""

from __future__ import annotations

from tests.stack_helpers import cli_modules

HEAVY = {"chatseek_core.errors", "chatseek_core.probe", "chatseek_gateway.stack"}


def test_help_loads_no_grpc_no_protobuf_and_no_rich() -> None:
    modules, proc = cli_modules(None, "--help")
    assert proc.returncode == 0
    assert "search" in proc.stdout
    assert not {m for m in modules if m.split(".")[0] in {"grpc", "rich", "google"}}
    assert not modules & HEAVY
