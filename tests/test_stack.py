"""The whole local stack: up, healthy, reflective, observable when one dies, and down cleanly."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from chatseek_core.settings import SERVICES
from chatseek_gateway.cli.common import EXIT_CODES
from chatseek_gateway.server import SERVICE_NAMES as GATEWAY_SERVICES
from chatseek_testing.faults import armed_env
from tests.stack_helpers import alive, cli, cli_json, settle, stack_env

EXPORT = Path(__file__).resolve().parents[1] / "services/ingest/tests/fixtures/exports/account"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A private stack on fresh ports; always torn down."""
    env = stack_env(tmp_path / "home")
    try:
        yield env
    finally:
        cli(env, "stack", "down", check=False)


def _reflected_services(addr: str) -> set[str]:
    channel = grpc.insecure_channel(addr)
    try:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
        )
        return {s.name for r in responses for s in r.list_services_response.service}
    finally:
        channel.close()


def test_the_stack_comes_up_healthy_reflective_and_goes_down_leaving_no_process(
    stack: dict[str, str],
) -> None:
    up = cli_json(stack, "stack", "up", "--json")
    states = {s["name"]: s for s in up["services"]}
    assert set(states) == set(SERVICES)
    assert all(s["health"] == "SERVING" for s in states.values())
    pids = {name: s["pid"] for name, s in states.items()}
    assert all(isinstance(pid, int) and alive(pid) for pid in pids.values())

    for name in SERVICES:
        names = _reflected_services(states[name]["address"])
        if name == "gateway":
            assert set(GATEWAY_SERVICES) <= names
        else:
            assert f"chatseek.{name}.v1.{name.capitalize()}Service" in names
        assert "grpc.health.v1.Health" in names

    status = cli_json(stack, "status", "--json")
    by_name = {s["name"]: s for s in status["services"]}
    from chatseek_ingest.schema import MIGRATIONS

    assert by_name["ingest"]["schema_version"] == MIGRATIONS[-1].number
    assert by_name["lexical"]["health"] == "SERVING"
    assert (Path(stack["CHATSEEK_HOME"]) / "data" / "ingest.db").exists()

    os.kill(pids["lexical"], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while alive(pids["lexical"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    report = cli(stack, "stack", "status", "--json", check=False)
    assert report.returncode == 1
    import json

    healths = {s["name"]: s["health"] for s in json.loads(report.stdout)["services"]}
    assert healths["lexical"] == "DOWN"
    assert healths["ingest"] == "SERVING"

    cli(stack, "stack", "down")
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in pids.values())


def test_a_command_that_finds_no_gateway_starts_the_stack_and_says_so(
    stack: dict[str, str],
) -> None:
    proc = cli(stack, "status", "--json")
    assert "starting the local stack" in proc.stderr
    assert "gateway" in proc.stdout


def test_a_command_whose_stack_cannot_start_says_which_service_and_where_to_look(
    stack: dict[str, str],
) -> None:
    # The services refuse a malformed fault-injection variable at start; the CLI never reads it.
    env = armed_env(stack, "not-a-kill-point")
    proc = cli(env, "status", check=False)
    assert proc.returncode == EXIT_CODES["UNAVAILABLE"]
    assert "starting the local stack" in proc.stderr
    assert "(UNAVAILABLE)" in proc.stderr
    assert "chatseek stack logs SERVICE" in proc.stderr


def test_a_stopped_stack_leaves_every_database_checkpointed_and_no_write_ahead_log(
    stack: dict[str, str],
) -> None:
    cli(stack, "stack", "up")
    cli(stack, "import", str(EXPORT))
    settle(stack)
    data = Path(stack["CHATSEEK_HOME"]) / "data"
    written = {p.name: p.stat().st_size for p in data.glob("*.db-wal")}
    assert written, "the import wrote no WAL: nothing was tested"

    pids = [s["pid"] for s in cli_json(stack, "stack", "status", "--json")["services"]]
    cli(stack, "stack", "down")
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in pids)

    left = []
    for owner in ("ingest", "unitize", "lexical", "vector"):
        size = (data / f"{owner}.db").stat().st_size
        wal = data / f"{owner}.db-wal"
        if size == 0 or (wal.exists() and wal.stat().st_size > 0):
            wal_size = wal.stat().st_size if wal.exists() else 0
            left.append(f"{owner}.db: {size} B, {wal.name}: {wal_size} B")
    assert not left, "; ".join(left) + _service_logs(Path(stack["CHATSEEK_HOME"]))


LOG_TAIL_LINES = 40


def _service_logs(home: Path) -> str:
    """The last lines of every service's log, and what its raw output holds beyond the log.

    An exception that escapes a service's shutdown is printed (not logged), so only
    ``run/<svc>.out`` has its traceback.
    """
    parts = []
    for name in SERVICES:
        log_file = home / "logs" / f"{name}.log"
        logged = log_file.read_text(errors="replace").splitlines() if log_file.exists() else []
        parts.append(f"\n--- {log_file} (last {LOG_TAIL_LINES} lines) ---")
        parts.extend(logged[-LOG_TAIL_LINES:] or ["(missing or empty)"])
        out_file = home / "run" / f"{name}.out"
        if out_file.exists():
            seen = set(logged)
            extra = [
                line
                for line in out_file.read_text(errors="replace").splitlines()
                if line not in seen
            ]
            if extra:
                parts.append(f"--- {out_file}, lines not in the log (last {LOG_TAIL_LINES}) ---")
                parts.extend(extra[-LOG_TAIL_LINES:])
    return "\n".join(parts)
