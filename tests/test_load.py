"""Load: concurrent clients of the gateway while an import runs, overload shedding, and search
degrading to words when embed dies.

The clients are ``bench.load``'s (``make bench`` runs them too, against an idle reference).
Latency is recorded (``bench/results/load-<timestamp>.json``), never asserted. What is asserted:
no request fails except with an explicit, retryable overload answer (RESOURCE_EXHAUSTED or
UNAVAILABLE carrying a retry hint) — a strict search waits for the word index to reach the
messages stored when it arrived rather than refusing — and no error ever says "database is
locked".
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from bench.generate import generate
from bench.load import CLIENTS, HYBRID_QUERIES, Tally, gateway_stub, run_load
from chatseek.common.v1 import common_pb2
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek.gateway.v1.search_service_pb2_grpc import SearchServiceStub
from chatseek_core.client import decode_error
from chatseek_core.server import DEFAULT_MAX_CONCURRENT_PER_METHOD
from chatseek_core.wire_json import to_json
from tests.fault_helpers import (
    Operation,
    Stack,
    check_store,
    exported_messages,
    settle,
    start_stack,
    wait_dead,
)
from tests.stack_helpers import alive, cli

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
LOAD_S = 60.0
IMPORT_MESSAGES = 200_000
SEED_MESSAGES = 5_000
QUICK_MESSAGES = 2_000
QUICK_TIMEOUT_S = 10.0
AFTER_KILL_WAIT_S = 30.0
AFTER_KILL_ANSWERS = 3
OVERLOAD_CALLS = 96
OVERLOAD_LIMIT = DEFAULT_MAX_CONCURRENT_PER_METHOD
STALL_DEADLINE_S = 4.0
LONG_TIMEOUT_S = 2400


def _stub(stack: Stack) -> SearchServiceStub:
    return gateway_stub(stack.env["CHATSEEK_GATEWAY_ADDR"]).search


@pytest.fixture(scope="module")
def small_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A private stack with a small generated export imported and settled."""
    base = tmp_path_factory.mktemp("load")
    generate(base / "export" / "result.json", QUICK_MESSAGES, seed=3)
    stack = start_stack(base / "home")
    try:
        cli(stack.env, "import", str(base / "export"), "--json")
        settle(stack)
        yield stack
    finally:
        stack.down()


def test_a_method_past_its_concurrency_limit_sheds_with_a_retry_hint(small_stack: Stack) -> None:
    fusion = small_stack.pid("fusion")
    assert fusion is not None
    stub = _stub(small_stack)
    request = pb.SearchRequest(query="bank account", mode=common_pb2.SEARCH_MODE_LEXICAL, k=5)
    os.kill(fusion, signal.SIGSTOP)  # every Search now waits on fusion inside the gateway
    try:
        calls = [
            stub.Search.future(request, timeout=QUICK_TIMEOUT_S) for _ in range(OVERLOAD_CALLS)
        ]
        deadline = time.monotonic() + QUICK_TIMEOUT_S
        while time.monotonic() < deadline:
            if sum(1 for c in calls if c.done()) >= OVERLOAD_CALLS - OVERLOAD_LIMIT:
                break  # every call past the limit has been answered
            time.sleep(0.05)
    finally:
        os.kill(fusion, signal.SIGCONT)
    shed: list[grpc.RpcError] = []
    answered = []
    for call in calls:
        try:
            answered.append(call.result(timeout=QUICK_TIMEOUT_S + 5))
        except grpc.RpcError as failure:
            shed.append(failure)
    assert shed
    assert len(answered) <= OVERLOAD_LIMIT
    assert all(reply.result is not None for reply in answered)
    for refusal in shed:
        assert refusal.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
        decoded = decode_error(refusal)
        assert decoded.reason == "OVERLOADED"
        assert decoded.retry_after_s is not None and decoded.retry_after_s > 0


def test_hybrid_search_answers_from_words_within_its_deadline_when_embed_stalls(
    small_stack: Stack,
) -> None:
    embed = small_stack.pid("embed")
    assert embed is not None
    stub = _stub(small_stack)
    request = pb.SearchRequest(query="bank account", k=5)
    stub.Search(request, timeout=QUICK_TIMEOUT_S)  # every channel to embed is connected
    os.kill(embed, signal.SIGSTOP)  # alive and listening, answering nothing: a slow embed
    try:
        reply = stub.Search(
            pb.SearchRequest(query="cheap flight ticket", k=5),
            timeout=STALL_DEADLINE_S,
        )
    finally:
        os.kill(embed, signal.SIGCONT)
    doc = to_json(reply.result)
    assert doc["hits"]
    assert "DENSE_UNAVAILABLE" in {w["code"] for w in doc.get("warnings") or []}


def test_hybrid_search_answers_from_words_within_its_deadline_when_embed_is_killed(
    small_stack: Stack,
) -> None:
    embed = small_stack.pid("embed")
    assert embed is not None
    tally = Tally()
    stop = threading.Event()
    stub = _stub(small_stack)
    after_kill: list[dict[str, Any]] = []
    killed = threading.Event()

    def searcher(n: int) -> None:
        for i in range(10_000):
            if stop.is_set():
                return
            request = pb.SearchRequest(query=HYBRID_QUERIES[(n + i) % 6], k=10)
            was_killed = killed.is_set()
            started = time.perf_counter()
            try:
                reply = stub.Search(request, timeout=QUICK_TIMEOUT_S)
            except grpc.RpcError as err:
                time.sleep(tally.error("hybrid", err))
                continue
            doc = to_json(reply.result)
            tally.ok("hybrid", time.perf_counter() - started, doc)
            if was_killed:
                with tally.lock:
                    after_kill.append(doc)

    with futures.ThreadPoolExecutor(8) as pool:
        jobs = [pool.submit(searcher, n) for n in range(8)]
        time.sleep(1.5)
        os.kill(embed, signal.SIGKILL)
        assert wait_dead(embed)
        killed.set()
        # Until a few searches begun after the kill have answered (on a busy machine the ones in
        # flight at the kill can take seconds), within a bound.
        deadline = time.monotonic() + AFTER_KILL_WAIT_S
        while time.monotonic() < deadline:
            with tally.lock:
                if len(after_kill) >= AFTER_KILL_ANSWERS:
                    break
            time.sleep(0.1)
        stop.set()
        for job in jobs:
            job.result(timeout=QUICK_TIMEOUT_S + 5)
    try:
        assert not tally.failures, tally.summary()
        assert not tally.locked
        assert after_kill, tally.summary()
        for doc in after_kill:
            codes = {w["code"] for w in doc.get("warnings") or []}
            assert "DENSE_UNAVAILABLE" in codes, doc.get("warnings")
            assert all(set(h["by"]) <= {"words"} for h in doc["hits"])
    finally:
        small_stack.up()
    assert not alive(embed)


@pytest.mark.long
@pytest.mark.timeout(LONG_TIMEOUT_S)
def test_thirty_two_clients_get_answers_while_a_large_import_runs(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    big = tmp_path / "big"
    generate(seed / "result.json", SEED_MESSAGES, seed=3)
    generate(big / "result.json", IMPORT_MESSAGES, seed=7)
    expected = exported_messages(big / "result.json")
    for title, ids in exported_messages(seed / "result.json").items():
        expected[title] = sorted(set(expected.get(title, [])) | set(ids))

    stack = start_stack(tmp_path / "home")
    try:
        cli(stack.env, "import", str(seed), "--json")
        settle(stack)
        started = time.monotonic()
        run = Operation.start(stack, "import", str(big), "--json")
        tally = run_load(
            stack.env["CHATSEEK_GATEWAY_ADDR"], stack.data_dir / "ingest.db", seconds=LOAD_S
        )
        import_running_at_end = run.running()
        code, out, err = run.finish(timeout_s=1800)
        import_s = time.monotonic() - started
        assert code == 0, err
        settle(stack, timeout_s=1800)
        settled_s = time.monotonic() - started
        check_store(stack, expected)
    finally:
        stack.down()

    summary = tally.summary()
    summary.update(
        {
            "clients": CLIENTS,
            "load_s": LOAD_S,
            "import_messages": IMPORT_MESSAGES,
            "import_s": round(import_s, 1),
            "import_running_when_load_ended": import_running_at_end,
            "settled_s": round(settled_s, 1),
            "import_report": {k: v for k, v in json.loads(out).items() if k != "chats"},
        }
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    (RESULTS / f"load-{stamp}.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    assert not tally.locked, tally.locked[:5]
    assert not tally.failures, tally.failures[:20]
    assert all(summary[k]["n"] > 0 for k in ("hybrid", "strict", "thread")), summary
