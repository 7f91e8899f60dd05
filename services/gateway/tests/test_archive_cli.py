"""The Telegram archive commands through a private stack, the real CLI in a subprocess.

The private stack is the two processes these commands reach (ingest and the gateway, on fresh
ports, started and stopped here); the consumers ingest nudges are down, which only delays
them. Its ingest has no Telegram session and no API credentials, so every command that needs
Telegram must say so with an exit code and a hint; imported history is still a source.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatseek_core.probe import check
from chatseek_gateway.cli import BROKEN_PIPE_EXIT
from chatseek_gateway.cli.common import EXIT_CODES
from tests.stack_helpers import cli, cli_json, cli_modules, closed_reader, stack_env

EXPORT = (
    Path(__file__).resolve().parents[2] / "ingest" / "tests" / "fixtures" / "exports" / "account"
)
CREDENTIAL_VARIABLES = ("CHATSEEK_TELEGRAM_API_ID", "CHATSEEK_TELEGRAM_API_HASH")
PROCESSES = ("ingest", "gateway")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
POLL_S = 0.1


def _start(env: dict[str, str], name: str, home: Path) -> subprocess.Popen[bytes]:
    child_env = dict(env, CHATSEEK_LISTEN=env[f"CHATSEEK_{name.upper()}_ADDR"])
    with open(home / f"{name}.out", "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", f"chatseek_{name}"],
            env=child_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Ingest and the gateway as processes without a Telegram session; always stopped."""
    home = tmp_path_factory.mktemp("archive") / "home"
    home.mkdir()
    env = stack_env(home)
    for name in CREDENTIAL_VARIABLES:
        env.pop(name, None)
    children = [_start(env, name, home) for name in PROCESSES]
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        for name, child in zip(PROCESSES, children, strict=True):
            addr = env[f"CHATSEEK_{name.upper()}_ADDR"]
            while check(addr, timeout=1.0) != "SERVING":
                if child.poll() is not None or time.monotonic() > deadline:
                    output = (home / f"{name}.out").read_text(errors="replace")
                    pytest.fail(f"{name} did not start:\n{output}")
                time.sleep(POLL_S)
        yield env
    finally:
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def test_sync_without_a_session_exits_as_failed_precondition_with_the_auth_hint(
    stack: dict[str, str],
) -> None:
    proc = cli(stack, "sync", "--json", check=False)
    assert proc.returncode == EXIT_CODES["FAILED_PRECONDITION"]
    error = json.loads(proc.stdout)
    assert error["reason"] == "NOT_AUTHORIZED"
    assert "chatseek auth" in error["hint"]
    assert "(NOT_AUTHORIZED)" in proc.stderr and "chatseek auth" in proc.stderr


def test_auth_without_api_credentials_exits_as_failed_precondition(
    stack: dict[str, str],
) -> None:
    proc = cli(stack, "auth", "--phone", "+15550000000", check=False)
    assert proc.returncode == EXIT_CODES["FAILED_PRECONDITION"]
    assert "(FAILED_PRECONDITION)" in proc.stderr


def test_sources_ls_json_lists_the_import_source_of_an_imported_export(
    stack: dict[str, str],
) -> None:
    cli(stack, "import", str(EXPORT), "--json")
    doc = cli_json(stack, "sources", "ls", "--json")
    by_id = {s["source_id"]: s for s in doc["sources"]}
    imported = by_id["import:account"]
    assert imported["kind"] == "import"
    assert {c["title"] for c in imported["chats"]} >= {"Valencia Expats", "Bob Builder"}
    assert sum(c["message_count"] for c in imported["chats"]) > 0


def test_a_call_to_a_running_gateway_goes_straight_to_it_without_a_health_probe(
    stack: dict[str, str],
) -> None:
    modules, proc = cli_modules(stack, "sources", "ls", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "sources" in json.loads(proc.stdout)
    assert "chatseek_core.probe" not in modules
    assert "grpc_health.v1.health_pb2" not in modules
    assert "rich" not in modules
    assert "starting the local stack" not in proc.stderr


def test_a_listing_whose_reader_goes_away_ends_quietly(stack: dict[str, str]) -> None:
    cli(stack, "import", str(EXPORT), "--json")
    proc = closed_reader(stack, "sources", "ls")
    assert proc.stderr == ""
    assert proc.returncode == BROKEN_PIPE_EXIT
