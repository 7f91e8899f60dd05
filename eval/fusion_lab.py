"""Fusion experiments: fetch each ranked list once per LoCoMo question, then replay fusion variants.

``python -m eval.fusion_lab`` brings up the eval stack, imports LoCoMo, and for every question
asks lexical for its unit and message lists and vector for its dense list (100 deep). Fusion
variants are then computed offline from the same lists, so they are compared on identical
inputs, and scored with the shared ``retrieval_eval`` metrics (R@10, R@2k, per category). This is
how the fusion defaults in ``chatseek_core.config`` were chosen; see ``eval/FUSION.md``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval.run import EVAL_DATA, Stack, _import_all, _load_tool

DEPTH = 100
K = 10

Lists = dict[str, list[tuple[int, float]]]


def _collect(stack: Stack, chat_ids: dict[str, list[int]]) -> list[dict[str, Any]]:
    from chatseek.common.v1 import common_pb2
    from chatseek.lexical.v1 import lexical_service_pb2 as lpb
    from chatseek.lexical.v1 import lexical_service_pb2_grpc
    from chatseek.vector.v1 import vector_service_pb2 as vpb
    from chatseek.vector.v1 import vector_service_pb2_grpc
    from chatseek_core.client import sync_channel

    lexical = lexical_service_pb2_grpc.LexicalServiceStub(
        sync_channel(stack.settings.addr("lexical"))
    )
    vector = vector_service_pb2_grpc.VectorServiceStub(sync_channel(stack.settings.addr("vector")))
    queries = [
        json.loads(line)
        for line in (EVAL_DATA / "locomo" / "queries.jsonl").read_text().splitlines()
        if line.strip()
    ]
    out = []
    for q in queries:
        if not q.get("gold_message_ids"):
            continue
        chats = chat_ids[q["chat_folder"]]
        flt = lpb.ListFilter(chat_ids=chats, kinds=["window", "thread", "post"])
        words = lexical.UnitList(lpb.UnitListRequest(query=q["question"], filter=flt, limit=DEPTH))
        msgs = lexical.MessageList(
            lpb.MessageListRequest(query=q["question"], filter=flt, limit=DEPTH)
        )
        knn = vector.Knn(
            vpb.KnnRequest(
                query=q["question"],
                chat_ids=chats,
                kinds=["window", "thread", "post"],
                k=DEPTH,
                range=common_pb2.TimeRange(),
            )
        )
        out.append(
            {
                "q": q,
                "lists": {
                    "words": [(u.unit_id, u.score) for u in words.units],
                    "messages": [(u.unit_id, u.score) for u in msgs.units],
                    "meaning": [(n.unit_id, n.cosine) for n in knn.neighbours],
                },
            }
        )
    return out


def _units(stack: Stack) -> dict[int, dict[str, Any]]:
    from chatseek_core import db

    conn = db.connect(stack.settings.db_path("unitize"), readonly=True)
    rows = conn.execute("SELECT unit_id, msg_ids, text FROM units").fetchall()
    return {int(r[0]): {"ids": json.loads(r[1]), "text": r[2]} for r in rows}


def rrf_variant(weights: dict[str, float], k: int = 60) -> Callable[[Lists], list[int]]:
    def fuse(lists: Lists) -> list[int]:
        scores: dict[int, float] = defaultdict(float)
        for name, ranked in lists.items():
            for rank, (unit_id, _) in enumerate(ranked, start=1):
                scores[unit_id] += weights.get(name, 1.0) / (k + rank)
        return sorted(scores, key=lambda u: -scores[u])

    return fuse


def _evaluate(
    tool: Any,
    collected: list[dict[str, Any]],
    units: dict[int, dict[str, Any]],
    fuse: Callable[[Lists], list[int]],
) -> dict[str, Any]:
    rows = []
    texts_cache: dict[str, dict[int, str]] = {}
    for item in collected:
        q = item["q"]
        folder = q["chat_folder"]
        if folder not in texts_cache:
            texts_cache[folder] = tool.export_texts(
                str(EVAL_DATA / "locomo" / "exports" / folder / "result.json")
            )
        ranked = [u for u in fuse(item["lists"]) if u in units][:K]
        hits = [units[u] for u in ranked]
        metrics = tool.score_query(q["gold_message_ids"], hits, K, texts_cache[folder], "auto")
        rows.append(
            {
                "category": "adversarial" if q.get("adversarial") else q["category"],
                "adversarial": bool(q.get("adversarial")),
                "metrics": metrics,
                "latency_s": None,
            }
        )
    by_cat: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_cat[row["category"]].append(row)
    summary = {c: tool.aggregate(r) for c, r in sorted(by_cat.items()) if c != "adversarial"}
    summary["overall"] = tool.aggregate([r for r in rows if not r["adversarial"]])
    return summary


def variants() -> dict[str, Callable[[Lists], list[int]]]:
    """The fusion rules compared."""
    out: dict[str, Callable[[Lists], list[int]]] = {
        "words only": rrf_variant({"words": 1, "messages": 0, "meaning": 0}),
        "words+messages": rrf_variant({"words": 1, "messages": 1, "meaning": 0}),
        "rrf equal": rrf_variant({"words": 1, "messages": 1, "meaning": 1}),
    }
    for w in (0.25, 0.5, 0.75):
        out[f"rrf meaning {w}"] = rrf_variant({"words": 1, "messages": 1, "meaning": w})
    for k in (10, 20):
        out[f"rrf k={k}"] = rrf_variant({"words": 1, "messages": 1, "meaning": 1}, k=k)
    return out


def _gather(cache: Path | None) -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]]]:
    if cache is not None and cache.exists():
        data = json.loads(cache.read_text())
        return data["collected"], {int(k): v for k, v in data["units"].items()}
    with (
        tempfile.TemporaryDirectory(prefix="chatseek-lab-") as home,
        Stack(Path(home), "") as stack,
    ):
        folders = [
            (f"locomo/{p.name}", p)
            for p in sorted((EVAL_DATA / "locomo" / "exports").iterdir())
            if p.is_dir()
        ]
        ids = {k.split("/", 1)[1]: v for k, v in _import_all(stack, folders).items()}
        stack.settle()
        collected = _collect(stack, ids)
        units = _units(stack)
    if cache is not None:
        cache.write_text(json.dumps({"collected": collected, "units": units}))
    return collected, units


def main() -> int:
    """Collect once (or read ``--cache``), compare every variant, print a table."""
    tool = _load_tool("retrieval_eval")
    cache = Path(sys.argv[sys.argv.index("--cache") + 1]) if "--cache" in sys.argv else None
    collected, units = _gather(cache)
    for name, fuse in variants().items():
        summary = _evaluate(tool, collected, units, fuse)
        overall = summary["overall"]
        cats = " ".join(f"{c[:6]} {v['recall']:.3f}" for c, v in summary.items() if c != "overall")
        print(f"{name:<22} R@10 {overall['recall']:.3f} R@2k {overall['recall_2k']:.3f} | {cats}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
