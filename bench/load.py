"""Load: 32 gateway clients — hybrid searches, strict searches and thread reads — on a settled
stack, then the same clients while an import of a second, larger archive runs.

The reference is the same client mix against the idle stack, measured first in the same run:
every latency under import is reported beside its idle figure and as their ratio. Answers are
tallied by kind and status. The only acceptable non-OK answers are explicit overload answers
with a retry hint (RESOURCE_EXHAUSTED, UNAVAILABLE); anything else is a failure, and any error
mentioning ``database is locked`` is counted apart. ``tests/test_load.py`` drives the same clients
and asserts exactly that, never a latency.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from bench.measure import percentile, ratio
from bench.queries import RANKED

if TYPE_CHECKING:
    from chatseek_gateway.stubs import GatewayStubs

__all__ = [
    "CLIENTS",
    "HYBRID_QUERIES",
    "STRICT_QUERIES",
    "Tally",
    "gateway_stub",
    "load_section",
    "run_load",
    "thread_targets",
]

CLIENTS = 32
LOAD_S = 30.0
SEED_MESSAGES = 5_000
CALL_TIMEOUT_S = 30.0
THREAD_TARGETS = 500
IMPORT_TIMEOUT_S = 3600.0
SETTLE_TIMEOUT_S = 3600.0
KINDS = ("hybrid", "strict", "thread")
HYBRID_QUERIES = RANKED[:6]
STRICT_QUERIES = (
    "квартира AND залог",
    "bank OR банк",
    "has:photo",
    "kind:group AND has:link",
    "(ремонт OR repair) AND date:[2024-01-01 TO 2024-12-31]",
    "from:Anna AND date:[2024-01-01 TO 2024-06-30]",
)
RETRYABLE = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE)


@dataclass
class Tally:
    """Every request of a load run: latencies per kind, answers per status, failures verbatim."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    answers: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    locked: list[str] = field(default_factory=list)
    shed: int = 0
    warnings: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ok(self, kind: str, seconds: float, doc: dict[str, Any]) -> None:
        """Record an answered call and the warnings its document carries."""
        with self.lock:
            self.latencies.setdefault(kind, []).append(seconds)
            self.answers[f"{kind} OK"] += 1
            for warning in doc.get("warnings") or []:
                self.warnings[str(warning.get("code"))] += 1

    def error(self, kind: str, err: grpc.RpcError) -> float:
        """Record a failed call; returns how long to wait before the next one."""
        from chatseek_core.client import decode_error

        code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
        decoded = decode_error(err)
        text = f"{kind} {code.name} {decoded.reason}: {decoded.message}"
        with self.lock:
            self.answers[f"{kind} {code.name} {decoded.reason}"] += 1
            locked = "database is locked" in (decoded.message + str(err.details())).lower()
            if locked or decoded.reason == "DATABASE_BUSY":
                self.locked.append(text)
            if code in RETRYABLE and (decoded.retry_after_s is not None or decoded.hint):
                self.shed += 1
            else:
                self.failures.append(text)
        return decoded.retry_after_s or 0.1

    def summary(self) -> dict[str, Any]:
        """Counts, and p50/p99/max latency in ms per kind of request."""
        out: dict[str, Any] = {
            "requests": sum(self.answers.values()),
            "answered": sum(len(v) for v in self.latencies.values()),
            "shed_with_retry_hint": self.shed,
            "failed": len(self.failures),
            "database_locked": len(self.locked),
            "answers": dict(self.answers),
            "warnings": dict(self.warnings),
        }
        for kind, values in sorted(self.latencies.items()):
            ms = [v * 1000 for v in values]
            out[kind] = {
                "n": len(ms),
                "p50_ms": round(percentile(ms, 0.5), 1),
                "p99_ms": round(percentile(ms, 0.99), 1),
                "max_ms": round(max(ms), 1),
            }
        out["failures"] = self.failures[:20]
        return out


def gateway_stub(addr: str) -> GatewayStubs:
    """Blocking stubs of the gateway's services at ``addr``."""
    from chatseek_core.client import sync_channel
    from chatseek_gateway.stubs import GatewayStubs

    return GatewayStubs.over(sync_channel(addr))


def thread_targets(ingest_db: Path, limit: int = THREAD_TARGETS) -> list[tuple[str, int]]:
    """``(chat, msg_id)`` of stored messages of the busiest chat, to read threads of."""
    from chatseek_core import db

    conn = db.connect(ingest_db, readonly=True)
    try:
        rows = conn.execute(
            "SELECT chat_id, msg_id FROM messages WHERE kind = 'message' AND chat_id ="
            " (SELECT chat_id FROM messages GROUP BY chat_id ORDER BY COUNT(*) DESC LIMIT 1)"
            " ORDER BY msg_id LIMIT ?",
            (limit,),
        ).fetchall()
    finally:
        conn.close()
    if not rows:
        raise RuntimeError(f"{ingest_db} holds no messages to read threads of")
    return [(str(r[0]), int(r[1])) for r in rows]


def _requests(
    n: int, targets: list[tuple[str, int]], stubs: GatewayStubs
) -> Iterator[tuple[str, Any, Any]]:
    """An endless, deterministic mix of ``(kind, stub method, request)`` for client ``n``."""
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

    i = n
    while True:
        i += 1
        if i % 3 == 0:
            q = HYBRID_QUERIES[i % len(HYBRID_QUERIES)]
            yield "hybrid", stubs.search.Search, pb.SearchRequest(query=q, k=10)
        elif i % 3 == 1:
            q = STRICT_QUERIES[i % len(STRICT_QUERIES)]
            request = pb.SearchMessagesRequest(query=q, limit=20, timezone="UTC")
            yield "strict", stubs.search.SearchMessages, request
        else:
            chat, msg_id = targets[(i * 7919) % len(targets)]
            yield "thread", stubs.search.Thread, pb.ThreadRequest(chat=chat, msg_id=msg_id)


def _client(
    addr: str,
    n: int,
    stop: threading.Event,
    tally: Tally,
    targets: list[tuple[str, int]],
    timeout_s: float,
) -> None:
    from chatseek_core.wire_json import to_json

    for kind, method, request in _requests(n, targets, gateway_stub(addr)):
        if stop.is_set():
            return
        started = time.perf_counter()
        try:
            reply = method(request, timeout=timeout_s)
        except grpc.RpcError as err:
            time.sleep(tally.error(kind, err))
            continue
        tally.ok(kind, time.perf_counter() - started, to_json(reply.result))


def run_load(
    addr: str,
    ingest_db: Path,
    *,
    clients: int = CLIENTS,
    seconds: float = LOAD_S,
    timeout_s: float = CALL_TIMEOUT_S,
) -> Tally:
    """``clients`` threads calling the gateway at ``addr`` for ``seconds``; every answer tallied.

    Thread reads target messages already in ``ingest_db`` when the run starts.
    """
    tally = Tally()
    stop = threading.Event()
    targets = thread_targets(ingest_db)
    threads = [
        threading.Thread(
            target=_client, args=(addr, n, stop, tally, targets, timeout_s), daemon=True
        )
        for n in range(clients)
    ]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(timeout=timeout_s + 10)
    return tally


def _import(env: dict[str, str], export: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "chatseek_gateway.cli", "import", str(export), "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=IMPORT_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"import failed ({proc.returncode}): {err[-2000:]}")
    report: dict[str, Any] = json.loads(out)
    return report


def _settle(settings: Any) -> None:
    from bench.pipeline import stage_done

    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while not all(stage_done(settings, s) for s in ("unitize", "lexical", "vector")):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the stack did not settle within {SETTLE_TIMEOUT_S:.0f}s")
        time.sleep(0.5)


def _import_and_settle(
    env: dict[str, str], export: Path, settings: Any, timeline: dict[str, Any]
) -> None:
    """Import ``export`` and wait for the stack to settle, noting when each ended."""
    started = time.perf_counter()
    try:
        report = _finish(_import(env, export))
        timeline["import_s"] = round(time.perf_counter() - started, 1)
        timeline["messages_imported"] = report.get("messages_imported")
        _settle(settings)
        timeline["settled_s"] = round(time.perf_counter() - started, 1)
    except Exception as exc:  # noqa: BLE001 - reported by the section, which then fails
        timeline["error"] = repr(exc)


def _ratios(busy: dict[str, Any], idle: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for kind in KINDS:
        if kind in busy and kind in idle:
            out[kind] = {q: ratio(busy[kind][q], idle[kind][q], 2) for q in ("p50_ms", "p99_ms")}
    return out


def load_section(
    messages: int, progress: Callable[[str], None], *, seconds: float = LOAD_S
) -> dict[str, Any]:
    """Latency and answers of 32 clients on an idle stack, then during an import of ``messages``."""
    from bench.generate import generate
    from bench.pipeline import Stack, stack_env
    from chatseek_core.settings import SERVICES, load_settings

    out: dict[str, Any] = {"clients": CLIENTS, "load_s": seconds, "import_messages": messages}
    with tempfile.TemporaryDirectory(prefix="chatseek-bench-load-") as tmp:
        seed, big = Path(tmp) / "seed", Path(tmp) / "big"
        generate(seed / "result.json", SEED_MESSAGES, seed=3)
        generate(big / "result.json", messages, seed=7)
        env = stack_env(Path(tmp) / "home")
        settings = load_settings(env=env)
        for folder in (settings.run_dir, settings.log_dir, settings.data_dir):
            folder.mkdir(parents=True, exist_ok=True)
        stack = Stack(env, settings)
        addr = settings.addr("gateway")
        ingest_db = settings.db_path("ingest")
        try:
            stack.start(tuple(SERVICES))
            _finish(_import(env, seed))
            _settle(settings)
            progress(f"load: idle stack with {SEED_MESSAGES} messages, {CLIENTS} clients")
            idle = run_load(addr, ingest_db, seconds=seconds).summary()
            progress(f"load: idle {idle['requests']} requests, {idle['failed']} failed")
            timeline: dict[str, Any] = {}
            behind = threading.Thread(
                target=_import_and_settle, args=(env, big, settings, timeline), daemon=True
            )
            behind.start()
            busy = run_load(addr, ingest_db, seconds=seconds).summary()
            out["import_running_when_load_ended"] = "import_s" not in timeline
            behind.join(timeout=IMPORT_TIMEOUT_S + SETTLE_TIMEOUT_S)
            if "error" in timeline or "settled_s" not in timeline:
                raise RuntimeError(f"the import under load did not finish: {timeline}")
            out.update(timeline)
            progress(f"load: under import {busy['requests']} requests, {busy['failed']} failed")
        finally:
            stack.stop()
    out.update({"idle": idle, "under_import": busy, "under_import_over_idle": _ratios(busy, idle)})
    return out
