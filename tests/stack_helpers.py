"""Helpers for tests that run the local stack as real processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from chatseek_core.settings import SERVICES

CLI_TIMEOUT_S = 240


def free_ports(count: int) -> list[int]:
    """Ephemeral loopback ports that were free a moment ago."""
    sockets = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def stack_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment for a private stack under ``home`` on fresh ports with fake models."""
    env = dict(os.environ)
    env["CHATSEEK_HOME"] = str(home)
    env["CHATSEEK_FAKE_MODELS"] = "1"
    env["CHATSEEK_POLL_INTERVAL_S"] = "0.3"
    for name, port in zip(SERVICES, free_ports(len(SERVICES)), strict=True):
        env[f"CHATSEEK_{name.upper()}_ADDR"] = f"127.0.0.1:{port}"
    env.update(extra)
    return env


def cli(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the real ``chatseek`` CLI in a subprocess."""
    proc = subprocess.run(
        [sys.executable, "-m", "chatseek_gateway.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"chatseek {' '.join(args)} exited {proc.returncode}\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc


# Runs the CLI in-process, then writes which modules it had loaded on stderr, after its own
# output, whatever the exit.
_LOADED = """
import json, sys
from chatseek_gateway.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
sys.stderr.write("\\nLOADED " + json.dumps(sorted(sys.modules)) + "\\n")
raise SystemExit(code)
"""


def cli_modules(
    env: dict[str, str] | None, *args: str
) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """Run the CLI in a fresh interpreter; the modules it loaded, and the process."""
    proc = subprocess.run(
        [sys.executable, "-c", _LOADED, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    before, sep, loaded = proc.stderr.rpartition("\nLOADED ")
    if not sep:
        raise AssertionError(f"the CLI did not get to report its modules:\n{proc.stderr}")
    return set(json.loads(loaded)), subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout, before
    )


def closed_reader(env: dict[str, str] | None, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI with stdout on a pipe whose reader has already gone (``| head`` done)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "chatseek_gateway.cli", *args],
            env=env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )
    finally:
        os.close(write_end)


def cli_json(env: dict[str, str], *args: str) -> Any:
    """Run the CLI and parse its stdout as JSON."""
    return json.loads(cli(env, *args).stdout)


def alive(pid: int) -> bool:
    """Whether ``pid`` names a live (non-zombie) process."""
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        return False
    return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


SETTLE_TIMEOUT_S = 240


def settle(env: dict[str, str], timeout_s: float = SETTLE_TIMEOUT_S) -> dict[str, Any]:
    """Wait until units, word indexes and vectors cover everything stored; returns the status."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        services = {s["name"]: s for s in cli_json(env, "status", "--json")["services"]}
        lags = [
            v for n in ("unitize", "lexical", "vector") for v in services[n]["feed_lag"].values()
        ]
        pending = services["vector"]["details"].get("pending") or 0
        if services["lexical"]["details"].get("words_ready") and not any(lags) and not pending:
            return services
        time.sleep(0.3)
    raise AssertionError("the indexes did not settle")
