"""The learned scorer against a plain reference: every feature by its definition, per pair.

The scorer computes pair features by block (skipping name slots no message fills), shares the
first layer of a block in one product, shortlists, caches what depends only on a
conversation, and takes the softmax in Python. The reference here does none of that: it reads
each definition off the ``Analysed`` messages, one candidate at a time, and runs the network
in float64 over every option. Both must make the same decisions on a chat long enough to span
several blocks, with names, mentions, questions, replies and bursts.
"""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from chatseek_unitize import linkfeatures
from chatseek_unitize.linkfeatures import (
    ADDRESS_SLOTS,
    DYNAMIC_FEATURES,
    GAP_SCALE,
    IDF_SCALE,
    INTERACTION_WINDOW,
    LENGTH_SCALE,
    MENTION_SLOTS,
    MESSAGE_FEATURES,
    OVERLAP_SCALE,
    PACE_GAPS,
    PAIR_FEATURES,
    SIZE_SCALE,
    WINDOW,
    Analysed,
    TopicInputs,
    _overlaps,
    informative,
    message_features,
    pair_columns,
)
from chatseek_unitize.linking import (
    SCORE_BLOCK,
    SHORTLIST,
    WEIGHTS_PATH,
    Choice,
    LearnedScorer,
    LinkContext,
    _idf,
    build_links,
)
from chatseek_unitize.model import Msg

T0 = 1_767_225_600
PEOPLE = ["Ann", "Bob", "Carla", "Иван Петров", "Dmitri", "Zoë", "kate_"]
WORDS = (
    "flat rent visa bank card consulate train ticket bike doctor квартира аренда виза банк"
    " билет поезд врач велосипед школа море"
).split()
SPEAKS = [6, 5, 4, 3, 3, 1, 0.2]  # kate_ speaks about once in 100 messages
MESSAGES = 3 * SCORE_BLOCK + 37


def _chat(seed: int) -> list[Msg]:
    """A bilingual chat in bursts: addressing, @-mentions, questions, replies, long pauses."""
    rng = random.Random(seed)
    msgs: list[Msg] = []
    date = T0
    for k in range(1, MESSAGES + 1):
        date += int(rng.expovariate(1 / 40)) if rng.random() > 0.05 else rng.randint(600, 7200)
        sender = rng.choices(range(len(PEOPLE)), weights=SPEAKS)[0]
        words = rng.sample(WORDS, rng.randint(1, 6))
        roll = rng.random()
        if roll < 0.15:
            words.insert(0, PEOPLE[rng.randrange(len(PEOPLE))].split()[0] + ":")
        elif roll < 0.22:
            words.append("@" + PEOPLE[rng.randrange(len(PEOPLE))].split()[0])
        elif roll < 0.3:
            for name in rng.sample(PEOPLE, rng.randint(1, 4)):
                words.insert(rng.randrange(len(words) + 1), name)
        if rng.random() < 0.05:
            words.insert(1, "@" + PEOPLE[rng.randrange(len(PEOPLE))].split()[0] + ",")
        text = " ".join(words) + ("?" if rng.random() < 0.25 else "")
        reply = rng.randint(max(1, k - 30), k - 1) if k > 1 and rng.random() < 0.1 else None
        msgs.append(
            Msg(
                msg_id=k,
                date=date,
                sender_id=100 + sender,
                sender_name=PEOPLE[sender],
                text=text,
                reply_to=reply,
            )
        )
    return msgs


class _Plain:
    """Every feature of one topic by its definition, decisions replayed one message at a time."""

    def __init__(self, an: list[Analysed], idf: dict[str, float]) -> None:
        self.an = an
        self.kept = informative(idf)
        self.stems = [frozenset(m.stems & self.kept.keys()) for m in self.an]
        n = len(self.an)
        gaps = [0.0] + [
            math.log1p(max(self.an[k].date - self.an[k - 1].date, 0)) for k in range(1, n)
        ]
        self.pace = []
        for i in range(n):
            window = gaps[max(1, i - PACE_GAPS) : i]
            self.pace.append(sum(window) / len(window) if window else 0.0)
        self.parent: list[int | None] = []

    def _prev_same(self, k: int) -> int:
        return next((p for p in range(k - 1, -1, -1) if self.an[p].author == self.an[k].author), -1)

    def _next_same(self, k: int) -> int:
        n = len(self.an)
        return next((q for q in range(k + 1, n) if self.an[q].author == self.an[k].author), n)

    def _overlap(self, i: int, j: int) -> tuple[float, float]:
        shared = sorted(self.stems[i] & self.stems[j])
        weights = [self.kept[s] for s in shared]
        return sum(weights), max(weights, default=0.0)

    def pair(self, i: int, j: int, best: float) -> list[float]:
        """``PAIR_FEATURES`` of message ``i`` against candidate ``j`` (``best``: the largest
        overlap of ``i`` with any of its candidates)."""
        c, p = self.an[i], self.an[j]
        d = i - j
        other = c.author != p.author
        c_addr = other and p.author in c.addressed[:ADDRESS_SLOTS]
        c_ment = other and p.author in c.mentioned[:MENTION_SLOTS]
        p_addr = other and c.author in p.addressed[:ADDRESS_SLOTS]
        p_ment = other and c.author in p.mentioned[:MENTION_SLOTS]
        nxt = self._next_same(j)
        own_prev = self._prev_same(i)
        prev_j = self._prev_same(j)
        later_addr = any(
            self.an[q].author != c.author and c.author in self.an[q].addressed[:ADDRESS_SLOTS]
            for q in range(j + 1, i)
        )
        overlap, rarest = self._overlap(i, j)
        near_prev = prev_j != -1 and i - prev_j <= WINDOW
        return [
            math.log1p(d) / math.log1p(WINDOW),
            d == 1,
            d == 2,
            d == 3,
            (math.log1p(max(c.date - p.date, 0)) - self.pace[i]) / GAP_SCALE,
            not other,
            c_addr,
            c_ment,
            p_addr,
            p_ment,
            bool(c.addressed) and not c_addr and other,
            bool(p.addressed) and not p_addr and other,
            bool(c.addressed) and other and c.addressed[0] in p.addressed[:ADDRESS_SLOTS],
            nxt >= i,
            nxt < i and self._next_same(nxt) < i,
            prev_j == -1 or j - prev_j > WINDOW,
            own_prev > j and other,
            own_prev >= 0 and other and p.author in self.an[own_prev].addressed[:ADDRESS_SLOTS],
            p_addr and not later_addr,
            math.log1p(overlap) / OVERLAP_SCALE,
            overlap / best if best > 0 else 0.0,
            best > 0 and overlap == best,
            rarest / IDF_SCALE,
            math.log1p(self._overlap(i, prev_j)[0]) / OVERLAP_SCALE if near_prev else 0.0,
            p.question,
            math.log1p(p.length) / LENGTH_SCALE,
        ]

    def message(self, i: int, pairs: list[list[float]]) -> list[float]:
        """``MESSAGE_FEATURES`` of message ``i`` (``pairs``: its candidates' pair features)."""
        c = self.an[i]
        own = self._prev_same(i)
        has_own = own != -1 and i - own <= WINDOW
        prev_gap = c.date - self.an[i - 1].date if i > 0 else 0
        own_gap = math.log1p(max(c.date - self.an[own].date, 0)) if has_own else 0.0
        return [
            (math.log1p(max(prev_gap, 0)) - self.pace[i]) / GAP_SCALE,
            has_own,
            (own_gap - self.pace[i]) / GAP_SCALE if has_own else 0.0,
            bool(c.addressed),
            max(row[6] for row in pairs) if pairs else 0.0,
            max(row[7] for row in pairs) if pairs else 0.0,
            max(row[8] for row in pairs) if pairs else 0.0,
            c.question,
            math.log1p(c.length) / LENGTH_SCALE,
            max(row[19] for row in pairs) if pairs else 0.0,
            len(pairs) / WINDOW,
        ]

    def dynamic(self, i: int, j: int, roots: list[int]) -> list[float]:
        """``DYNAMIC_FEATURES`` of candidate ``j`` of message ``i``, from the decisions so far
        (``roots``: each earlier message's conversation, by its first message)."""
        an, parent = self.an, self.parent
        a_i, a_j = an[i].author, an[j].author
        own = self._prev_same(i)
        if own == -1 or i - own > WINDOW:
            own = -2
        own_par = parent[own] if own >= 0 else None
        own_conv = roots[own] if own >= 0 else None
        pj, conv = parent[j], roots[j]
        members = [k for k in range(i) if roots[k] == conv]
        children = [k for k in range(i) if parent[k] == j]
        named = [
            k
            for k in range(max(0, i - INTERACTION_WINDOW), i)
            if (an[k].author == a_i and a_j in an[k].mentioned[:MENTION_SLOTS])
            or (an[k].author == a_j and a_i in an[k].mentioned[:MENTION_SLOTS])
        ]
        conv_stems = frozenset().union(*(self.stems[k] for k in members))
        return [
            pj is not None and an[pj].author == a_i,
            pj is not None and pj == own,
            pj is None,
            members[-1] == j,
            conv == own_conv,
            math.log1p(len(children)),
            math.log1p(len(members)) / SIZE_SCALE,
            math.log1p(self._overlap(i, pj)[0]) / OVERLAP_SCALE
            if pj is not None and i - pj <= WINDOW
            else 0.0,
            own_par is not None and j == own_par,
            own_par is not None and a_j == an[own_par].author,
            own >= 0 and a_j in {an[k].author for k in range(i) if parent[k] == own},
            bool(named),
            a_i in {an[k].author for k in members},
            math.log1p(sum(self.kept[s] for s in sorted(self.stems[i] & conv_stems)))
            / OVERLAP_SCALE,
            (math.log1p(max(an[i].date - an[members[-1]].date, 0)) - self.pace[i]) / GAP_SCALE,
        ]


class _Reference:
    """The shipped network over every option in float64, shortlisting as documented."""

    def __init__(self) -> None:
        model = json.loads(WEIGHTS_PATH.read_text("utf-8"))["model"]
        self.w1, self.b1, self.w2 = (
            np.asarray(model[k], dtype=np.float64) for k in ("w1", "b1", "w2")
        )
        self.new_bias = float(model.get("new_bias", 0.0))
        self.plain: _Plain | None = None

    def prepare(self, ctx: LinkContext) -> None:
        self.plain = _Plain(ctx.analysed(), dict(ctx.idf))

    def choose(self, ctx: LinkContext, i: int) -> Choice:
        plain = self.plain
        assert plain is not None
        plain.parent = list(ctx.parent[:i])
        roots: list[int] = []
        for k, up in enumerate(plain.parent):
            roots.append(k if up is None else roots[up])
        cands = list(range(max(0, i - WINDOW), i))
        best = max((plain._overlap(i, j)[0] for j in cands), default=0.0)
        pairs = [plain.pair(i, j, best) for j in cands]
        message = plain.message(i, pairs)
        # Rows: pair, message, is_new, dynamic (INPUT_FEATURES).
        n_pair, n_static = len(PAIR_FEATURES), len(PAIR_FEATURES) + len(MESSAGE_FEATURES)
        new_row = np.zeros(len(self.w1))
        new_row[n_pair:n_static] = message
        new_row[n_static] = 1.0
        raw = [float(np.maximum(new_row @ self.w1 + self.b1, 0.0) @ self.w2) + self.new_bias]
        rows = np.zeros((len(cands), len(self.w1)))
        for r, pair in enumerate(pairs):
            rows[r, :n_static] = pair + message
        static = np.maximum(rows @ self.w1 + self.b1, 0.0) @ self.w2
        short = sorted(np.argsort(-static, kind="stable")[:SHORTLIST].tolist())
        for r in short:
            rows[r, n_static + 1 :] = plain.dynamic(i, cands[r], roots)
        raw += (np.maximum(rows[short] @ self.w1 + self.b1, 0.0) @ self.w2).tolist()
        # The candidates off the shortlist, scored without their dynamic part, count in the
        # total and are never chosen.
        off = [static[r] for r in range(len(cands)) if r not in short]
        top_score = max(raw + off)
        ex = np.exp(np.asarray(raw) - top_score)
        probs = ex / (ex.sum() + np.exp(np.asarray(off) - top_score).sum())
        top = int(np.argmax(probs))
        confidence = round(float(probs[top]), 4)
        if top == 0:
            return Choice(None, "new", confidence)
        return Choice(cands[short[top - 1]], "scored", confidence)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_learned_scorer_decides_as_the_plain_reference(seed: int) -> None:
    msgs = _chat(seed)
    fast = build_links(msgs, agent_answers={}, scorer=LearnedScorer())
    plain = build_links(msgs, agent_answers={}, scorer=_Reference())
    assert len(fast) == len(plain) == MESSAGES
    scored = [(f, p) for f, p in zip(fast, plain, strict=True) if p.reason in ("scored", "new")]
    assert len(scored) > 0.8 * MESSAGES
    assert sum(f.parent_id is not None for f, _ in scored) > 0.3 * len(scored)
    assert [(f.msg_id, f.parent_id, f.reason) for f in fast] == [
        (p.msg_id, p.parent_id, p.reason) for p in plain
    ]
    for f, p in scored:
        assert f.confidence == pytest.approx(p.confidence, abs=2e-4)


def _context(seed: int) -> LinkContext:
    ctx = LinkContext(_chat(seed), {})
    ctx.idf = _idf([ctx])
    return ctx


def _check_blocks(plain: _Plain, inputs: TopicInputs, block: int) -> int:
    """Compare every block's pair and message features with the definitions; returns how
    many (message, candidate) pairs name someone."""
    named = 0
    n = len(plain.an)
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        cols, valid = pair_columns(inputs.arrays, lo, hi)
        message = message_features(inputs.arrays, lo, hi, cols, valid)
        for i in range(lo, hi):
            cands = list(range(max(0, i - WINDOW), i))
            best = max((plain._overlap(i, j)[0] for j in cands), default=0.0)
            rows = [plain.pair(i, j, best) for j in cands]
            expected = np.asarray(rows, dtype=np.float64).reshape(len(cands), len(PAIR_FEATURES))
            got = cols[:, i - lo, WINDOW - len(cands) :].T
            np.testing.assert_allclose(got, expected, atol=1e-6, err_msg=f"message {i}")
            assert not cols[:, i - lo, : WINDOW - len(cands)].any()
            assert valid[i - lo].sum() == len(cands)
            np.testing.assert_allclose(message[i - lo], plain.message(i, rows), atol=1e-6)
            named += int(expected[:, 6:10].sum())
    return named


@pytest.mark.parametrize(("seed", "block"), [(1, SCORE_BLOCK), (2, SCORE_BLOCK), (1, 7)])
def test_pair_and_message_features_by_block_match_their_definitions(seed: int, block: int) -> None:
    ctx = _context(seed)
    plain = _Plain(ctx.analysed(), dict(ctx.idf))
    named = _check_blocks(plain, TopicInputs(plain.an, ctx.idf), block)
    assert named > MESSAGES  # the names, mentions and addressing were exercised


@pytest.mark.parametrize("stretch", [64, 100])
def test_overlaps_computed_by_stretches_are_the_whole_topics_to_the_bit(
    monkeypatch: pytest.MonkeyPatch, stretch: int
) -> None:
    rng = np.random.default_rng(5)
    vocab = [f"w{k}" for k in range(200)]
    idf = {w: 3.0 + (k % 7) / 3 for k, w in enumerate(vocab)}
    n = 5 * stretch + 11
    an = [
        Analysed(k % 4, T0 + k, (), (), frozenset(rng.choice(vocab, 6, replace=False)), False, 9)
        for k in range(n)
    ]
    total, rarest = _overlaps([m.stems for m in an], idf)
    assert (total > 0).sum() > 2 * n  # shared words at many distances
    monkeypatch.setattr(linkfeatures, "OVERLAP_ROWS", stretch)
    arrays = TopicInputs(an, idf).arrays
    for lo, hi in [(i, i + 1) for i in range(n)] + [(stretch - 3, stretch + 5)]:
        rows = arrays.overlap_rows(lo, hi)
        assert rows.lo <= lo and hi <= rows.lo + len(rows.overlap)
        got = slice(lo - rows.lo, hi - rows.lo)
        assert np.array_equal(rows.overlap[got], total[lo:hi])
        assert np.array_equal(rows.rarest[got], rarest[lo:hi])


def test_links_do_not_depend_on_the_overlap_stretch(monkeypatch: pytest.MonkeyPatch) -> None:
    msgs = _chat(2)
    whole = build_links(msgs, agent_answers={}, scorer=LearnedScorer())
    monkeypatch.setattr(linkfeatures, "OVERLAP_ROWS", 37)
    assert build_links(msgs, agent_answers={}, scorer=LearnedScorer()) == whole


def test_pair_features_read_names_in_an_authors_previous_message_however_far_back() -> None:
    """Author 0 addresses authors 1 and 2, then is silent for 120 messages in which nobody
    addresses two people; when 0 speaks again, its previous message still names 2."""
    quiet = [
        Analysed(
            1 + k % 3,
            T0 + 10 * k,
            (1 + (k + 1) % 3,) if k % 4 == 0 else (),
            (),
            frozenset(),
            False,
            5,
        )
        for k in range(1, 121)
    ]
    msgs = [Analysed(0, T0, (1, 2), (1, 2), frozenset(), True, 9), *quiet]
    msgs.append(Analysed(0, T0 + 1300, (), (), frozenset(), False, 4))
    plain = _Plain(msgs, {})
    inputs = TopicInputs(msgs, {})
    for block in (1, 5, SCORE_BLOCK):
        _check_blocks(plain, inputs, block)
    cols, _ = pair_columns(inputs.arrays, len(msgs) - 1, len(msgs))
    c_prev = PAIR_FEATURES.index("c_prev_addressed_p_author")
    assert cols[c_prev, 0].sum() > 0


@pytest.mark.parametrize("seed", [1, 2])
def test_dynamic_features_match_their_definitions_along_the_decisions(seed: int) -> None:
    ctx = _context(seed)
    links = build_links(ctx.msgs, agent_answers={}, scorer=LearnedScorer())
    decided = [None if link.parent_id is None else ctx.index[link.parent_id] for link in links]
    plain = _Plain(ctx.analysed(), dict(ctx.idf))
    inputs = TopicInputs(plain.an, ctx.idf)
    for i in range(MESSAGES):
        inputs.sync(decided, i)
        plain.parent = decided[:i]
        roots: list[int] = []
        for k, up in enumerate(plain.parent):
            roots.append(k if up is None else roots[up])
        cands = list(range(max(0, i - WINDOW), i))
        got = inputs.state.features(i, cands)
        assert got.shape == (len(cands), len(DYNAMIC_FEATURES))
        expected = [plain.dynamic(i, j, roots) for j in cands]
        np.testing.assert_allclose(got, np.asarray(expected).reshape(got.shape), atol=1e-6)
