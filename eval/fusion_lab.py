"""Fusion experiments: fetch each ranked list once per question, replay fusion rules offline, and
choose constants by cross-validation over chats.

``python -m eval.fusion_lab`` brings up an eval stack per data set (LoCoMo, Russian, tgif) on the
default embedding model, imports it, and for every question asks lexical for its unit and message
lists (BM25) and vector for its dense list (cosine), 100 deep. The lists are cached
(``--cache DIR``), so every rule is compared on identical inputs, scored with the shared
``retrieval_eval`` metrics. Rules compared:

* weighted Reciprocal Rank Fusion (weights per list, constant k);
* a convex combination of normalised scores (Bruch, Gai & Ingber 2023): each list's scores are
  min-max scaled within its own top N, a unit absent from a list gets 0 there, and
  ``α·words + (1 − α)·meaning (+ β·messages)`` orders the union of the lists' top N;
* the same with a query-aware α: when the question's script (Cyrillic or Latin) differs from the
  script most of its chat's top units are written in, words cannot match and α drops to ``α_x``;
* the same with words weighing more (``α_exact``) for a question that names an exact token (a
  quoted phrase, a number, ``chart.js``, an acronym; ``chatseek_fusion.fuse.exact_tokens``);
* the same plus conversation context: the chunks of the current conversation builds are ranked
  by words and by meaning too, and each unit gains ``γ_w`` and ``γ_m`` times the best scaled
  score of a listed chunk holding one of its messages (what hybrid search does).

Honest tuning: questions are split into five folds by chat (across the three data sets). For each
fold the rule and constants that score best on the other folds (mean nDCG@10 over the data sets,
each data set weighing the same) are applied to it; the pooled held-out rows are the reported
figures. The in-sample best is printed too, beside it, only to show the gap.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from chatseek_core.render import without_repeated_dates
from chatseek_core.stopwords import content_words
from chatseek_core.text import stem, words
from chatseek_fusion.conversations import group_passages, main_conversation
from chatseek_fusion.fuse import exact_tokens, script_of
from eval.run import DEFAULT_MODEL, EVAL_DATA, Stack, _import_all, _load_tool

DEPTH = 100
K = 10
FOLDS = 5
DATASETS = ("locomo", "ru", "tgif")
KINDS = ["window", "thread", "post"]
CHUNK_KIND = "conversation"
CONTEXT_LISTS = ("conversation_words", "conversation_meaning")
SCRIPT_SAMPLE = 5
SINGLE_LISTS = ("words only", "meaning only")

Lists = dict[str, list[tuple[int, float]]]
Rule = Callable[[Lists, dict[str, Any]], list[int]]


# --- collecting the lists ---


def _exports(dataset: str) -> Path:
    return EVAL_DATA / dataset / ("merged" if dataset == "tgif" else "exports")


def _queries(dataset: str) -> list[dict[str, Any]]:
    lines = (EVAL_DATA / dataset / "queries.jsonl").read_text().splitlines()
    return [q for q in map(json.loads, filter(str.strip, lines)) if q.get("gold_message_ids")]


def _collect(stack: Stack, dataset: str, chat_ids: dict[str, list[int]]) -> list[dict[str, Any]]:
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
    out = []
    for q in _queries(dataset):
        chats = chat_ids[q["chat_folder"]]
        flt = lpb.ListFilter(chat_ids=chats, kinds=KINDS)
        words = lexical.UnitList(lpb.UnitListRequest(query=q["question"], filter=flt, limit=DEPTH))
        msgs = lexical.MessageList(
            lpb.MessageListRequest(query=q["question"], filter=flt, limit=DEPTH)
        )
        knn = vector.Knn(
            vpb.KnnRequest(
                query=q["question"],
                chat_ids=chats,
                kinds=KINDS,
                k=DEPTH,
                range=common_pb2.TimeRange(),
            )
        )
        chunk_words = lexical.ChunkList(
            lpb.ChunkListRequest(
                query=q["question"],
                filter=lpb.ListFilter(chat_ids=chats, kinds=[CHUNK_KIND]),
                limit=DEPTH,
            )
        )
        chunk_knn = vector.Knn(
            vpb.KnnRequest(
                query=q["question"],
                chat_ids=chats,
                kinds=[CHUNK_KIND],
                k=DEPTH,
                range=common_pb2.TimeRange(),
                current_chunks_only=True,
            )
        )
        out.append(
            {
                "q": q,
                "lists": {
                    "words": [(u.unit_id, u.score) for u in words.units],
                    "messages": [(u.unit_id, u.score) for u in msgs.units],
                    "meaning": [(n.unit_id, n.cosine) for n in knn.neighbours],
                    "conversation_words": [(u.unit_id, u.score) for u in chunk_words.units],
                    "conversation_meaning": [(n.unit_id, n.cosine) for n in chunk_knn.neighbours],
                },
            }
        )
    return out


def _units(stack: Stack) -> dict[int, dict[str, Any]]:
    """Every unit's message ids and text, and (``holding``) the current-build chunks holding
    any of its members, found by hybrid search's own ``chunks_holding``."""
    from chatseek_core import db
    from chatseek_fusion.store import chunks_holding

    conn = db.connect(":memory:")
    db.attach_readonly(conn, stack.settings.db_path("unitize"), "unitize")
    rows = conn.execute(
        "SELECT unit_id, msg_ids, text, kind, chat_id FROM unitize.units"
    ).fetchall()
    current = [
        int(r[0])
        for r in conn.execute(
            "SELECT u.unit_id FROM unitize.units u JOIN unitize.current_builds b"
            " ON b.account = u.account AND b.chat_id = u.chat_id AND b.build_id = u.build_id"
            " WHERE u.kind = ?",
            (CHUNK_KIND,),
        )
    ]
    others = [int(r[0]) for r in rows if r[3] != CHUNK_KIND]
    holding = chunks_holding(conn, others, current)
    # The conversation of each message in its chat's current build (conversation search groups
    # the ranked units by it).
    conversation_of = {
        (int(r[0]), int(r[1])): int(r[2])
        for r in conn.execute(
            "SELECT b.chat_id, l.msg_id, l.conversation_id FROM unitize.current_builds b"
            " JOIN unitize.links l ON l.build_id = b.build_id"
        )
    }
    out: dict[int, dict[str, Any]] = {}
    for r in rows:
        ids = json.loads(r[1])
        out[int(r[0])] = {
            "ids": ids,
            "text": r[2],
            "kind": r[3],
            "chat_id": int(r[4]),
            "holding": holding.get(int(r[0]), []),
            "conversations": [conversation_of.get((int(r[4]), i)) for i in ids],
        }
    return out


def gather(dataset: str, cache: Path | None) -> dict[str, Any]:
    """The lists of every question of ``dataset`` and the text of every unit (cached)."""
    path = cache / f"lab-{dataset}.json" if cache is not None else None
    if path is not None and path.exists():
        data: dict[str, Any] = json.loads(path.read_text())
        data["units"] = {int(k): v for k, v in data["units"].items()}
        return data
    with (
        tempfile.TemporaryDirectory(prefix="chatseek-lab-") as home,
        Stack(Path(home), "", DEFAULT_MODEL) as stack,
    ):
        folders = [(p.name, p) for p in sorted(_exports(dataset).iterdir()) if p.is_dir()]
        ids = _import_all(stack, folders)
        stack.settle()
        stack.cli("conversations", "build", "--all")
        stack.settle()
        data = {"collected": _collect(stack, dataset, ids), "units": _units(stack)}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, ensure_ascii=False))
    return data


# --- the rules ---


def rrf_rule(weights: dict[str, float], k: int = 60) -> Rule:
    """Weighted RRF: Σ weight / (k + rank)."""

    def fuse(lists: Lists, _: dict[str, Any]) -> list[int]:
        scores: dict[int, float] = defaultdict(float)
        for name, ranked in lists.items():
            weight = weights.get(name, 0.0)
            if weight <= 0:
                continue
            for rank, (unit_id, _score) in enumerate(ranked, start=1):
                scores[unit_id] += weight / (k + rank)
        return sorted(scores, key=lambda u: (-scores[u], u))

    return fuse


def _scaled(ranked: list[tuple[int, float]], top: int, how: str = "minmax") -> dict[int, float]:
    """A list's top scores scaled: ``minmax`` to [0, 1], ``max`` as score / best (a floor of
    0, the theoretical minimum of BM25 and near that of a cosine), ``z`` as z-scores."""
    head = ranked[:top]
    if not head:
        return {}
    values = [s for _, s in head]
    if how == "z":
        mean = statistics.fmean(values)
        spread = statistics.pstdev(values) or 1.0
        return {u: (s - mean) / spread for u, s in head}
    low = 0.0 if how == "max" else min(values)
    high = max(values)
    span = high - low
    return {u: (s - low) / span if span > 0 else 1.0 for u, s in head}


def convex_rule(
    alpha: float,
    beta: float = 0.0,
    alpha_cross: float | None = None,
    top: int = 100,
    scale: str = "minmax",
    coverage: float = 0.0,
    weak_words: tuple[float, float] | None = None,
    conversation: tuple[float, float] = (0.0, 0.0),
    alpha_exact: float | None = None,
) -> Rule:
    """α·words + (1 − α)·meaning + β·messages over scaled top-``top`` scores, plus
    ``conversation = (γ_w, γ_m)`` times each unit's best scaled chunk score by words and by
    meaning (conversation context, as hybrid search adds it).

    Query-aware variants: with ``alpha_cross``, α becomes that when the question's script
    differs from its chat's; ``coverage`` adds that weight × the share of the question's content
    stems a unit holds; ``weak_words = (share, α_weak)`` sets α to α_weak when the best of the
    top three word units holds less than ``share`` of those stems (words barely matched);
    with ``alpha_exact``, α becomes that when the question names an exact token
    (``fuse.exact_tokens``: a quoted span, a number, ``chart.js``, an acronym), as hybrid
    search does."""

    def fuse(lists: Lists, context: dict[str, Any]) -> list[int]:
        a = alpha
        if alpha_cross is not None and context.get("cross_script"):
            a = alpha_cross
        if alpha_exact is not None and context.get("exact"):
            a = alpha_exact
        share = context.get("share", lambda _u: 0.0)
        if weak_words is not None:
            top3 = [u for u, _ in lists.get("words", [])[:3]]
            if max((share(u) for u in top3), default=0.0) < weak_words[0]:
                a = weak_words[1]
        words = _scaled(lists.get("words", []), top, scale)
        meaning = _scaled(lists.get("meaning", []), top, scale)
        messages = _scaled(lists.get("messages", []), top, scale)
        pool = set(words) | set(meaning) | (set(messages) if beta > 0 else set())
        floor = {
            n: min(v.values(), default=0.0) if scale == "z" else 0.0
            for n, v in (("w", words), ("m", meaning), ("s", messages))
        }
        scores = {
            u: a * words.get(u, floor["w"])
            + (1 - a) * meaning.get(u, floor["m"])
            + beta * messages.get(u, floor["s"])
            + (coverage * share(u) if coverage else 0.0)
            for u in pool
        }
        holding = context.get("holding", lambda _u: ())
        for name, weight in zip(CONTEXT_LISTS, conversation, strict=True):
            if weight > 0:
                chunks = _scaled(lists.get(name, []), top)
                for u in pool:
                    scores[u] += weight * max((chunks.get(c, 0.0) for c in holding(u)), default=0.0)
        return sorted(scores, key=lambda u: (-scores[u], u))

    return fuse


def rules() -> dict[str, Rule]:
    """Every rule and constant compared."""
    out: dict[str, Rule] = {
        "words only": rrf_rule({"words": 1}),
        "meaning only": rrf_rule({"meaning": 1}),
        "rrf today (words 1, meaning 0.25, k 60)": rrf_rule({"words": 1, "meaning": 0.25}),
    }
    for w in (0.5, 0.75, 1.0, 1.5):
        for k in (10, 30, 60):
            out[f"rrf meaning {w} k {k}"] = rrf_rule({"words": 1, "meaning": w}, k)
    for alpha in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7):
        out[f"convex a {alpha}"] = convex_rule(alpha)
        out[f"convex a {alpha} msgs 0.1"] = convex_rule(alpha, beta=0.1)
        for cross in (0.0, 0.1, 0.2):
            if cross < alpha:
                out[f"convex a {alpha} cross {cross}"] = convex_rule(alpha, alpha_cross=cross)
        if alpha >= 0.5:
            for how in ("max", "z"):
                out[f"convex a {alpha} scale {how}"] = convex_rule(alpha, scale=how)
            for bonus in (0.2, 0.5):
                out[f"convex a {alpha} coverage {bonus}"] = convex_rule(alpha, coverage=bonus)
            out[f"convex a {alpha} weak words 0.34 -> 0.2"] = convex_rule(
                alpha, weak_words=(0.34, 0.2)
            )
            for gw in (0.0, 0.1, 0.2, 0.3):
                for gm in (0.1, 0.2, 0.3, 0.5):
                    out[f"convex a {alpha} conversation words {gw} meaning {gm}"] = convex_rule(
                        alpha, conversation=(gw, gm)
                    )
                    for exact in (0.8, 0.9):
                        if gw >= 0.2 and gm >= 0.2:
                            out[
                                f"convex a {alpha} conversation words {gw} meaning {gm}"
                                f" exact {exact}"
                            ] = convex_rule(alpha, conversation=(gw, gm), alpha_exact=exact)
    return out


def shippable(name: str) -> bool:
    """Whether hybrid search implements the rule (``[search]`` of the config file): weighted
    RRF and the plain convex combination, with or without the message list, conversation
    context and the exact-token weights. The other query-aware and the rescaled variants are
    replayed and cross-validated apart, for comparison."""
    return name.startswith("rrf") or (
        name.startswith("convex")
        and not any(tag in name for tag in ("cross", "scale", "coverage", "weak"))
    )


# --- scoring and cross-validation ---


@dataclass
class Question:
    dataset: str
    fold: int
    item: dict[str, Any]
    context: dict[str, Any]


def _context(item: dict[str, Any], units: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """What a query-aware rule may look at: the question's script against its chat's, and the
    share of the question's content stems (function words left out) each unit holds."""
    question = script_of(item["q"]["question"])
    top = [u for u, _ in item["lists"]["meaning"][:SCRIPT_SAMPLE] if u in units]
    scripts = [script_of(units[u]["text"]) for u in top]
    chat = max(set(scripts), key=scripts.count) if scripts else ""
    asked = {stem(w) for w in content_words(words(item["q"]["question"]))}
    held: dict[int, float] = {}

    def share(unit_id: int) -> float:
        if unit_id not in held:
            unit = units.get(unit_id)
            found = {stem(w) for w in words(unit["text"])} if unit else set()
            held[unit_id] = len(asked & found) / len(asked) if asked else 0.0
        return held[unit_id]

    def holding(unit_id: int) -> list[int]:
        unit = units.get(unit_id)
        return unit.get("holding", []) if unit else []

    return {
        "cross_script": bool(question and chat and question != chat),
        "exact": bool(exact_tokens(item["q"]["question"])),
        "share": share,
        "holding": holding,
    }


def _folds(datasets: dict[str, dict[str, Any]]) -> list[Question]:
    chats = sorted(
        {
            (d, item["q"]["chat_folder"])
            for d, data in datasets.items()
            for item in data["collected"]
        }
    )
    fold_of = {chat: i % FOLDS for i, chat in enumerate(chats)}
    out = []
    for dataset, data in datasets.items():
        for item in data["collected"]:
            out.append(
                Question(
                    dataset,
                    fold_of[(dataset, item["q"]["chat_folder"])],
                    item,
                    _context(item, data["units"]),
                )
            )
    return out


def conversation_hits(ranked: list[int], units: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """What conversation search returns for hybrid search's ranking, as ``make eval`` scores
    it: one hit per result, its evidence passages' message ids and text (the service's own
    grouping, main-conversation and line rules)."""
    walk = []
    for u in ranked:
        unit = units[u]
        placed = {i: c for i, c in zip(unit["ids"], unit["conversations"], strict=True) if c}
        where = main_conversation(unit["ids"], placed)
        key = (unit["chat_id"], where) if where is not None else None
        walk.append((u, key, [(unit["chat_id"], i) for i in sorted(unit["ids"])]))
    hits = []
    for _, passages in group_passages(walk, K, position=lambda m: m[1]):
        ids: list[int] = []
        lines: list[str] = []
        for u, fresh in passages:
            line_of = dict(zip(units[u]["ids"], units[u]["text"].split("\n"), strict=True))
            ids.extend(i for _, i in fresh)
            lines.extend(without_repeated_dates([line_of[i] for _, i in fresh]))
        hits.append({"ids": ids, "text": "\n".join(lines)})
    return hits


def _row(
    tool: ModuleType,
    q: Question,
    units: dict[int, dict[str, Any]],
    texts: dict[int, str],
    rule: Rule,
    conversations: bool = False,
) -> dict[str, Any]:
    ranked = [u for u in rule(q.item["lists"], q.context) if u in units]
    hits = conversation_hits(ranked, units) if conversations else [units[u] for u in ranked[:K]]
    metrics = tool.score_query(q.item["q"]["gold_message_ids"], hits, K, texts, "auto")
    question = q.item["q"]
    return {
        "category": "adversarial" if question.get("adversarial") else question["category"],
        "adversarial": bool(question.get("adversarial")),
        "metrics": metrics,
        "latency_s": None,
    }


def _summary(tool: ModuleType, rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    by_cat: dict[str, list[dict[str, Any]]] = defaultdict(list)
    listed = list(rows)
    for row in listed:
        by_cat[row["category"]].append(row)
    out = {c: tool.aggregate(r) for c, r in sorted(by_cat.items()) if c != "adversarial"}
    out["overall"] = tool.aggregate([r for r in listed if not r["adversarial"]])
    return out


def _objective(scored: dict[str, list[dict[str, Any]]]) -> float:
    """Mean nDCG@10 per data set, the data sets weighing the same (adversarial rows excluded)."""
    means = []
    for rows in scored.values():
        kept = [r["metrics"]["ndcg"] for r in rows if not r["adversarial"]]
        if kept:
            means.append(sum(kept) / len(kept))
    return sum(means) / len(means) if means else 0.0


def main(argv: list[str] | None = None) -> int:
    """Collect (or read the cache), score every rule per question, cross-validate, print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cache", type=Path, help="directory for the collected lists")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--out", type=Path, help="write the tables as JSON here")
    args = parser.parse_args(argv)
    tool = _load_tool("retrieval_eval")
    names = args.datasets.split(",")
    data = {d: gather(d, args.cache) for d in names}
    texts = {
        (d, folder): tool.export_texts(str(_exports(d) / folder / "result.json"))
        for d in names
        for folder in {item["q"]["chat_folder"] for item in data[d]["collected"]}
    }
    questions = _folds(data)
    table = rules()
    # rows[rule][i]: question i's scored row under that rule
    rows: dict[str, list[dict[str, Any]]] = {
        name: [
            _row(
                tool,
                q,
                data[q.dataset]["units"],
                texts[(q.dataset, q.item["q"]["chat_folder"])],
                rule,
            )
            for q in questions
        ]
        for name, rule in table.items()
    }

    def by_dataset(name: str, keep: Callable[[int], bool]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for i, q in enumerate(questions):
            if keep(i):
                out[q.dataset].append(rows[name][i])
        return out

    def cross_validate(candidates: list[str]) -> tuple[dict[int, str], dict[str, Any]]:
        chosen: dict[int, str] = {}
        held_out: list[dict[str, Any]] = [{} for _ in questions]
        for fold in range(FOLDS):
            train = lambda i, f=fold: questions[i].fold != f  # noqa: E731
            best = max(candidates, key=lambda n: _objective(by_dataset(n, train)))
            chosen[fold] = best
            for i, q in enumerate(questions):
                if q.fold == fold:
                    held_out[i] = rows[best][i]
        summaries = {
            dataset: _summary(
                tool, (held_out[i] for i, q in enumerate(questions) if q.dataset == dataset)
            )
            for dataset in names
        }
        return chosen, summaries

    chosen, shipped = cross_validate([n for n in table if shippable(n)])
    explored_choice, explored = cross_validate(list(table))
    # Conversation search groups hybrid search's ranking: held out, each fold's chosen rule.
    grouped = [
        _row(
            tool,
            q,
            data[q.dataset]["units"],
            texts[(q.dataset, q.item["q"]["chat_folder"])],
            table[chosen[q.fold]],
            conversations=True,
        )
        for q in questions
    ]
    conversations = {
        d: _summary(tool, (grouped[i] for i, q in enumerate(questions) if q.dataset == d))
        for d in names
    }
    report: dict[str, Any] = {
        "chosen_per_fold": chosen,
        "rules": {},
        "cross_validated": shipped,
        "conversations_cross_validated": conversations,
        "explored": {"chosen_per_fold": explored_choice, "cross_validated": explored},
    }
    everything = lambda i: True  # noqa: E731
    for name in table:
        report["rules"][name] = {
            "objective": round(_objective(by_dataset(name, everything)), 4),
            **{d: _summary(tool, by_dataset(name, everything)[d])["overall"] for d in names},
        }
    # Each category of the single lists (nothing tuned: in-sample is their held-out figure), for
    # "hybrid is at least the best single list in every category".
    report["single_lists"] = {
        name: {d: _summary(tool, by_dataset(name, everything)[d]) for d in names}
        for name in SINGLE_LISTS
    }
    print("rule (in-sample)".ljust(44) + "".join(f"{d:>24}" for d in names))
    for name, entry in sorted(report["rules"].items(), key=lambda kv: -kv[1]["objective"]):
        cells = "".join(
            f"  {entry[d]['recall']:.3f}/{entry[d]['rr']:.3f}/{entry[d]['ndcg']:.3f}" for d in names
        )
        print(f"{name:<44}{cells}   obj {entry['objective']:.4f}")
    for title, choice, summaries in (
        ("shippable rules", chosen, shipped),
        ("conversation search over the shippable rules", chosen, conversations),
        ("every rule, query-aware ones too", explored_choice, explored),
    ):
        print(f"\n{title}: chosen per fold:", json.dumps(choice, ensure_ascii=False))
        for dataset, summary in summaries.items():
            for category, agg in summary.items():
                print(
                    f"CV {dataset:<7} {category:<22} n {agg['n']:>4}  R@10 {agg['recall']:.3f}"
                    f"  MRR {agg['rr']:.3f}  nDCG {agg['ndcg']:.3f}  R@2k {agg['recall_2k']:.3f}"
                )
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
