"""``make bench``: speed, memory and scale, each figure beside a reference measured in the same run.

Sections (``--only`` picks some):
* ``pipeline`` — a generated archive (``bench.generate``) through a private local stack with the
  fake embedder: import, unitize, lexical and vector stage throughput, peak RSS per service,
  database sizes; then query latency p50/p95/p99 through gRPC and through the CLI process, with
  the lexical list called in-process as the reference for gRPC overhead.
* ``embed`` — the packaged all-MiniLM-L6-v2 through the embed service over gRPC against direct
  sentence-transformers calls on the same texts; fp32 against bf16.
* ``knn`` — sqlite-vec exact and binary-quantised KNN over random unit vectors against a numpy
  matrix-vector scan (the memory-bandwidth floor), with the quantised path's recall@10.
Results go to ``bench/results/<timestamp>.json`` and ``.md`` with PNG charts. Timings are
reported as ratios to their reference; nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
SCALES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
SETTLE_TIMEOUT_S = 3600.0
QUERY_RUNS = 60
CLI_RUNS = 15
EMBED_TEXTS = 256
KNN_QUERIES = 40
KNN_SIZES = {"10k": [10_000], "100k": [100_000], "1m": [100_000, 1_000_000]}
DIM = 384
QUERIES = [
    "аренда квартиры залог",
    "bank account fee",
    "виза документы консульство",
    "cheap flight ticket",
    "сантехник ремонт",
    "internet router plan",
    "врач страховка",
    "moving district market",
]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _latency(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {
        "p50_ms": round(_pct(ms, 0.5), 2),
        "p95_ms": round(_pct(ms, 0.95), 2),
        "p99_ms": round(_pct(ms, 0.99), 2),
        "n": len(ms),
    }


def _time(fn: Callable[[], Any], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


# --- pipeline ---


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def pipeline(scale: str, progress: Callable[[str], None]) -> dict[str, Any]:
    """The archive through the stack, stage by stage, then query latencies."""
    from bench.generate import generate
    from chatseek_core.settings import SERVICES, load_settings
    from chatseek_gateway import stack
    from eval.run import _free_ports  # noqa: PLC2701 - one helper, not worth a module

    n = SCALES[scale]
    out: dict[str, Any] = {"messages": n}
    with tempfile.TemporaryDirectory(prefix="chatseek-bench-") as tmp:
        home = Path(tmp) / "home"
        export = Path(tmp) / "export"
        generate(export / "result.json", n)
        env = dict(os.environ)
        env.update(
            {
                "CHATSEEK_HOME": str(home),
                "CHATSEEK_FAKE_MODELS": "1",
                "CHATSEEK_POLL_INTERVAL_S": "0.5",
            }
        )
        for name, port in zip(SERVICES, _free_ports(len(SERVICES)), strict=True):
            env[f"CHATSEEK_{name.upper()}_ADDR"] = f"127.0.0.1:{port}"
        settings = load_settings(env=env)
        states = stack.up(settings, env=env)
        pids = {s.name: s.pid for s in states}
        try:
            started = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "chatseek_gateway.cli", "import", str(export), "--json"],
                env=env,
                capture_output=True,
                text=True,
                timeout=SETTLE_TIMEOUT_S,
                check=True,
            )
            import_s = time.perf_counter() - started
            report = json.loads(proc.stdout)
            stored = report["messages_imported"] + report.get("service_messages", 0)
            out["import"] = {"seconds": round(import_s, 2), "msgs_per_s": round(stored / import_s)}
            progress(f"pipeline {scale}: import {out['import']}")
            done_at = _settle(env, settings, started)
            for stage, at in done_at.items():
                out[stage] = {
                    "seconds_after_import_start": round(at, 2),
                    "msgs_per_s": round(stored / at),
                }
            progress(f"pipeline {scale}: stages settled {done_at}")
            out["peak_rss_mib"] = {
                name: round(_rss_kib(pid) / 1024, 1) for name, pid in pids.items() if pid
            }
            out["db_mib"] = {
                p.name: round(p.stat().st_size / 2**20, 2)
                for p in sorted((home / "data").glob("*.db"))
            }
            out["queries"] = _queries(settings, env)
            progress(f"pipeline {scale}: queries {json.dumps(out['queries'])[:300]}")
        finally:
            stack.down(settings)
    return out


def _status(settings: Any) -> dict[str, Any]:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek.gateway.v1 import gateway_service_pb2_grpc
    from chatseek_core.client import sync_channel
    from chatseek_core.proto_json import from_document

    stub = gateway_service_pb2_grpc.GatewayServiceStub(sync_channel(settings.addr("gateway")))
    doc = from_document(stub.Status(pb.StatusRequest(), timeout=30).result)
    return {s["name"]: s for s in doc["services"]}


def _settle(env: dict[str, str], settings: Any, started: float) -> dict[str, float]:
    """Seconds (since the import started) at which each stage had consumed everything."""
    done: dict[str, float] = {}
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while len(done) < 3 and time.monotonic() < deadline:
        st = _status(settings)
        now = time.perf_counter() - started
        if "unitize" not in done and not any(st["unitize"]["feed_lag"].values()):
            done["unitize"] = now
        if "lexical" not in done and st["lexical"]["details"].get("words_ready"):
            done["lexical"] = now
        vector_idle = not any(st["vector"]["feed_lag"].values())
        if "unitize" in done and "vector" not in done and vector_idle:
            if not st["vector"]["details"].get("pending"):
                done["vector"] = now
        time.sleep(0.25)
    return done


def _queries(settings: Any, env: dict[str, str]) -> dict[str, Any]:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek.gateway.v1 import gateway_service_pb2_grpc
    from chatseek_core import db
    from chatseek_core.client import sync_channel
    from chatseek_lexical import ranked

    stub = gateway_service_pb2_grpc.GatewayServiceStub(sync_channel(settings.addr("gateway")))
    out: dict[str, Any] = {}
    for mode in ("lexical", "dense", "hybrid"):
        calls = iter(range(10**9))

        def one(mode: str = mode, calls: Any = calls) -> None:
            q = QUERIES[next(calls) % len(QUERIES)]
            stub.Search(pb.SearchRequest(query=q, mode=mode, k=10, rerank=False), timeout=60)

        one()
        out[f"search_{mode}_grpc"] = _latency(_time(one, QUERY_RUNS))
    conn = db.connect(settings.db_path("lexical"), readonly=True)
    db.attach_readonly(conn, settings.db_path("unitize"), "unitize")
    db.attach_readonly(conn, settings.db_path("ingest"), "ingest")
    counter = iter(range(10**9))
    out["unit_list_in_process"] = _latency(
        _time(
            lambda: ranked.unit_list(conn, QUERIES[next(counter) % len(QUERIES)], limit=40),
            QUERY_RUNS,
        )
    )
    from chatseek.lexical.v1 import lexical_service_pb2 as lpb
    from chatseek.lexical.v1 import lexical_service_pb2_grpc

    lex = lexical_service_pb2_grpc.LexicalServiceStub(sync_channel(settings.addr("lexical")))
    counter2 = iter(range(10**9))
    out["unit_list_grpc"] = _latency(
        _time(
            lambda: lex.UnitList(
                lpb.UnitListRequest(query=QUERIES[next(counter2) % len(QUERIES)], limit=40),
                timeout=30,
            ),
            QUERY_RUNS,
        )
    )
    out["grpc_overhead_ratio"] = round(
        out["unit_list_grpc"]["p50_ms"] / max(out["unit_list_in_process"]["p50_ms"], 1e-6), 3
    )

    def cli_search() -> None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "chatseek_gateway.cli",
                "search",
                "--no-rerank",
                "--json",
                "--",
                QUERIES[0],
            ],
            env=env,
            capture_output=True,
            check=True,
            timeout=120,
        )

    out["search_hybrid_cli_wall"] = _latency(_time(cli_search, CLI_RUNS))
    return out


# --- embedding ---


def embedding(progress: Callable[[str], None]) -> dict[str, Any]:
    """Service over gRPC against direct sentence-transformers; fp32 against bf16."""
    import random

    from sentence_transformers import SentenceTransformer

    from bench.generate import _Text
    from chatseek_embed.registry import packaged_minilm_path

    texts = [_Text(random.Random(i)).message() * 3 for i in range(EMBED_TEXTS)]
    path = str(packaged_minilm_path())
    model = SentenceTransformer(path, device="cpu")
    model.encode(texts[:8])
    direct = _time(lambda: model.encode(texts, batch_size=32, normalize_embeddings=True), 2)
    out: dict[str, Any] = {
        "texts": len(texts),
        "direct_fp32_per_s": round(len(texts) / min(direct), 1),
    }
    try:
        import torch

        model_bf16 = SentenceTransformer(
            path, device="cpu", model_kwargs={"torch_dtype": torch.bfloat16}
        )
        model_bf16.encode(texts[:8])
        bf16 = _time(lambda: model_bf16.encode(texts, batch_size=32, normalize_embeddings=True), 2)
        out["direct_bf16_per_s"] = round(len(texts) / min(bf16), 1)
        a = model.encode(texts, normalize_embeddings=True)
        b = model_bf16.encode(texts, normalize_embeddings=True)
        out["bf16_min_cosine"] = round(float(np.min(np.sum(a * b, axis=1))), 6)
    except Exception as exc:  # bf16 unsupported on this CPU: say so
        out["bf16_error"] = str(exc)[:200]
    out.update(_embed_service(texts, path))
    out["service_overhead_ratio"] = round(
        out["direct_fp32_per_s"] / max(out["service_per_s"], 1e-6), 3
    )
    progress(f"embed: {out}")
    return out


def _embed_service(texts: list[str], model_path: str) -> dict[str, Any]:
    import asyncio

    from chatseek.embed.v1 import embed_service_pb2 as pb
    from chatseek.embed.v1 import embed_service_pb2_grpc
    from chatseek_core.testing import serving, temp_settings
    from chatseek_embed import server

    async def run() -> float:
        with tempfile.TemporaryDirectory() as tmp:
            settings = temp_settings(
                Path(tmp),
                "embed",
                {
                    "CHATSEEK_FAKE_MODELS": "0",
                    "CHATSEEK_EMBED_BACKEND": "local",
                    "CHATSEEK_EMBED_MODEL": model_path,
                    "CHATSEEK_RERANK_MODEL": "",
                },
            )
            async with serving(
                server.create_server(settings, server.load_models(settings))
            ) as addr:
                import grpc

                async with grpc.aio.insecure_channel(addr) as channel:
                    stub = embed_service_pb2_grpc.EmbedServiceStub(channel)
                    await stub.Embed(pb.EmbedRequest(texts=texts[:8], role=pb.ROLE_PASSAGE))
                    best = float("inf")
                    for _ in range(2):
                        started = time.perf_counter()
                        for i in range(0, len(texts), 32):
                            await stub.Embed(
                                pb.EmbedRequest(texts=texts[i : i + 32], role=pb.ROLE_PASSAGE),
                                timeout=300,
                            )
                        best = min(best, time.perf_counter() - started)
                    return best

    took = asyncio.run(run())
    return {"service_per_s": round(len(texts) / took, 1)}


# --- knn ---


def knn_bench(scale: str, progress: Callable[[str], None]) -> dict[str, Any]:
    """Exact vec0, quantised vec0 and a numpy scan over random unit vectors."""
    from chatseek_core import db
    from chatseek_vector import knn as knn_mod
    from chatseek_vector.spaces import Identity, create_space

    rng = np.random.default_rng(11)
    out: dict[str, Any] = {}
    for size in KNN_SIZES[scale]:
        with tempfile.TemporaryDirectory() as tmp:
            conn = db.connect(Path(tmp) / "v.db", vec=True)
            from chatseek_vector.schema import MIGRATIONS

            db.migrate(conn, "vector", MIGRATIONS)
            with db.transaction(conn):
                space = create_space(conn, Identity("bench", "r", DIM, True))
            matrix = rng.standard_normal((size, DIM), dtype=np.float32)
            matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
            chunk = 20_000
            for start in range(0, size, chunk):
                rows = [
                    (i, i % 10, matrix[i].tobytes(), i, "window", "a")
                    for i in range(start, min(size, start + chunk))
                ]
                with db.transaction(conn):
                    columns = "(unit_id, chat_id, embedding, start_date, kind, account)"
                    conn.executemany(
                        f"INSERT INTO vec_{space.space_id} {columns} VALUES (?, ?, ?, ?, ?, ?)",
                        rows,
                    )
                    conn.executemany(
                        f"INSERT INTO vbit_{space.space_id} {columns}"
                        " VALUES (?, ?, vec_quantize_binary(?), ?, ?, ?)",
                        rows,
                    )
                    conn.executemany(
                        "INSERT INTO embedded_units"
                        " (space_id, unit_id, account, chat_id, kind, content_hash)"
                        " VALUES (?, ?, 'a', ?, 'window', '')",
                        [(space.space_id, r[0], r[1]) for r in rows],
                    )
            queries = rng.standard_normal((KNN_QUERIES, DIM), dtype=np.float32)
            queries /= np.linalg.norm(queries, axis=1, keepdims=True)
            flt = knn_mod.KnnFilter()
            exact_t, quant_t, numpy_t, recalls = [], [], [], []
            for q in queries:
                started = time.perf_counter()
                exact = knn_mod.knn(conn, space, q, flt, 10, quantise_above=10**12)
                exact_t.append(time.perf_counter() - started)
                started = time.perf_counter()
                quant = knn_mod.knn(conn, space, q, flt, 10, quantise_above=0)
                quant_t.append(time.perf_counter() - started)
                started = time.perf_counter()
                scores = matrix @ q
                np.argpartition(-scores, 10)[:10]
                numpy_t.append(time.perf_counter() - started)
                truth = {u for u, _, _ in exact}
                recalls.append(len(truth & {u for u, _, _ in quant}) / 10)
            entry: dict[str, Any] = {
                "exact": _latency(exact_t),
                "quantised": _latency(quant_t),
                "numpy_scan": _latency(numpy_t),
                "quantised_recall_at_10": round(statistics.mean(recalls), 4),
            }
            entry["quantised_over_numpy"] = round(
                entry["quantised"]["p50_ms"] / max(entry["numpy_scan"]["p50_ms"], 1e-6), 2
            )
            entry["exact_over_numpy"] = round(
                entry["exact"]["p50_ms"] / max(entry["numpy_scan"]["p50_ms"], 1e-6), 2
            )
            out[str(size)] = entry
            progress(f"knn {size}: {entry}")
            conn.close()
    return out


# --- report ---


def _charts(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    knn = results.get("knn", {})
    if knn:
        sizes = sorted(knn, key=int)
        for key in ("exact", "quantised", "numpy_scan"):
            axes[0].plot(
                [int(s) for s in sizes],
                [knn[s][key]["p50_ms"] for s in sizes],
                marker="o",
                label=key,
            )
        axes[0].set(xscale="log", xlabel="vectors", ylabel="p50 ms", title="KNN latency vs size")
        axes[0].legend()
    pipe = results.get("pipeline", {})
    stages = [s for s in ("import", "unitize", "lexical", "vector") if s in pipe]
    if stages:
        axes[1].bar(stages, [pipe[s]["msgs_per_s"] for s in stages])
        axes[1].set(title=f"stage throughput ({pipe.get('messages')} msgs)", ylabel="messages/s")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; returns the exit code."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", choices=list(SCALES), default="100k")
    parser.add_argument("--only", default="pipeline,embed,knn")
    args = parser.parse_args(argv)
    sections = args.only.split(",")
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    results: dict[str, Any] = {"stamp": stamp, "scale": args.scale}

    def progress(line: str) -> None:
        print(line, flush=True)

    if "knn" in sections:
        results["knn"] = knn_bench(args.scale, progress)
    if "embed" in sections:
        results["embed"] = embedding(progress)
    if "pipeline" in sections:
        results["pipeline"] = pipeline(args.scale, progress)
    (RESULTS / f"{stamp}.json").write_text(json.dumps(results, indent=1))
    _charts(results, RESULTS / f"{stamp}.png")
    md = [
        f"# chatseek bench — {stamp} ({args.scale})",
        "",
        "```json",
        json.dumps(results, indent=1),
        "```",
        "",
        f"![charts]({stamp}.png)",
    ]
    (RESULTS / f"{stamp}.md").write_text("\n".join(md))
    (RESULTS / "latest.md").write_text("\n".join(md))
    print(f"report: {RESULTS / (stamp + '.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
