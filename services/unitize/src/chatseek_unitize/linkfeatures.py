"""The learned link scorer's inputs: per (message, candidate) features, vectorised per topic.

Message ``i`` chooses among "new conversation" and the ``WINDOW`` messages before it; arrays
list those candidates oldest first (column ``c`` is message ``i - WINDOW + c``). Features
(``PAIR_FEATURES``, ``MESSAGE_FEATURES``, ``DYNAMIC_FEATURES``): pair ones are fixed by the
two messages (distance, time, authors, who names whom, idf-weighted shared stems); message
ones describe ``i`` alone; dynamic ones read what was committed before ``i`` (the candidate's
parent, conversation and replies, who named whom lately), which makes decoding sequential.
Nothing depends on a language or a chat's pace: names come from the senders' own names, words
are Snowball stems chosen by script, shape is ``?`` and length, common stems are dropped by
frequency (``OVERLAP_MIN_IDF``), never by a word list, and time is log gaps against the
chat's local pace (``_pace``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DYNAMIC_FEATURES",
    "MESSAGE_FEATURES",
    "PAIR_FEATURES",
    "WINDOW",
    "Analysed",
    "Block",
    "DynamicState",
    "TopicArrays",
    "TopicInputs",
    "message_features",
    "pair_features",
]

WINDOW = 50
PACE_GAPS = 50
INTERACTION_WINDOW = 100
OVERLAP_MIN_IDF = 3.0
ADDRESS_SLOTS = 2
MENTION_SLOTS = 3
GAP_SCALE = 8.0
LENGTH_SCALE = 6.0
OVERLAP_SCALE = 3.0
IDF_SCALE = 10.0
SIZE_SCALE = 4.0
_NONE = -1

PAIR_FEATURES: tuple[str, ...] = (
    "log_distance",
    "distance_1",
    "distance_2",
    "distance_3",
    "log_gap_vs_pace",
    "same_author",
    "c_addresses_p",
    "c_mentions_p",
    "p_addresses_c",
    "p_mentions_c",
    "c_addresses_other",
    "p_addresses_other",
    "same_addressee",
    "p_author_latest",
    "p_author_superseded_2plus",
    "p_author_new_in_window",
    "c_spoke_since_p",
    "c_prev_addressed_p_author",
    "p_addresses_c_latest",
    "overlap",
    "overlap_share_of_best",
    "overlap_is_best",
    "rarest_shared_idf",
    "overlap_p_author_prev",
    "p_question",
    "p_log_length",
)

MESSAGE_FEATURES: tuple[str, ...] = (
    "c_log_gap_previous_vs_pace",
    "c_has_own_previous",
    "c_log_gap_own_previous_vs_pace",
    "c_addresses_someone",
    "c_addresses_candidate",
    "c_mentions_candidate",
    "c_addressed_by_candidate",
    "c_question",
    "c_log_length",
    "c_log_max_overlap",
    "c_candidate_share",
)

DYNAMIC_FEATURES: tuple[str, ...] = (
    "p_parent_author_is_c",
    "p_parent_is_c_prev",
    "p_started_conversation",
    "p_conversation_tail",
    "p_in_c_prev_conversation",
    "p_log_replies",
    "p_log_conversation_size",
    "overlap_p_parent",
    "c_prev_parent_is_p",
    "c_prev_parent_author_is_p_author",
    "p_author_answered_c_prev",
    "authors_named_each_other",
    "p_conversation_has_c_author",
    "overlap_p_conversation",
    "log_gap_p_conversation_tail_vs_pace",
)


@dataclass(frozen=True, slots=True)
class Analysed:
    """What the features read of one message (see ``linking.LinkContext``)."""

    author: int
    date: int
    addressed: tuple[int, ...]
    mentioned: tuple[int, ...]
    stems: frozenset[str]
    question: bool
    length: int


def _slots(rows: Sequence[tuple[int, ...]], width: int) -> np.ndarray:
    out = np.full((len(rows), width), _NONE, dtype=np.int64)
    for k, row in enumerate(rows):
        for s, a in enumerate(row[:width]):
            out[k, s] = a
    return out


def _prev_next_same(author: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of each message's previous and next message by the same author (-1 / n: none)."""
    n = len(author)
    prev = np.full(n, _NONE, dtype=np.int64)
    nxt = np.full(n, n, dtype=np.int64)
    order = np.lexsort((np.arange(n), author))
    same = author[order[1:]] == author[order[:-1]]
    prev[order[1:][same]] = order[:-1][same]
    nxt[order[:-1][same]] = order[1:][same]
    return prev, nxt


def _informative(idf: Mapping[str, float]) -> dict[str, float]:
    """The stems that carry overlap, with their idf (see the module docstring)."""
    # A stem in only two messages always counts, however small the chat (then its idf is
    # the largest but one: log((total + 1) / 3) = max - log 1.5).
    floor = max(idf.values(), default=0.0) - math.log(1.5) - 1e-9
    return {s: w for s, w in idf.items() if w >= min(OVERLAP_MIN_IDF, floor)}


def _pace(date: np.ndarray) -> np.ndarray:
    """The chat's local pace before each message: the mean log gap of the ``PACE_GAPS``
    gaps between the messages before it (0 with none). Time features are log gaps minus it,
    so a pause means the same in a chat that speaks every few seconds and in one that speaks
    every few hours."""
    n = len(date)
    log_gap = np.zeros(n)
    log_gap[1:] = np.log1p(np.maximum(np.diff(date), 0.0))
    cum = np.concatenate(([0.0], np.cumsum(log_gap)))
    i = np.arange(n)
    lo = np.minimum(np.maximum(1, i - PACE_GAPS), i)
    count = i - lo
    return np.where(count > 0, (cum[i] - cum[lo]) / np.maximum(count, 1), 0.0)


def _overlaps(
    stem_sets: Sequence[frozenset[str]], idf: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray]:
    """``(sum, max)`` of the idf of the stems message ``i`` shares with ``i - d``, by ``[i, d]``.

    Occurrences are sorted by (stem, message); a message holds a stem once, so the pairs at
    lag ``L`` within one stem's run are its messages ``L`` apart, and a run is done once the
    lag spans more than ``WINDOW`` messages: each lag is one vectorised pass.
    """
    n = len(stem_sets)
    total = np.zeros(n * (WINDOW + 1))
    rarest = np.zeros(n * (WINDOW + 1))
    kept = _informative(idf)
    ids = {s: k for k, s in enumerate(kept)}
    known = frozenset(kept)
    occ_msg: list[int] = []
    occ_stem: list[int] = []
    for m, stem_set in enumerate(stem_sets):
        hits = stem_set & known
        occ_msg.extend([m] * len(hits))
        occ_stem.extend([ids[s] for s in hits])
    weights = np.fromiter(kept.values(), dtype=np.float64, count=len(kept))[
        np.asarray(occ_stem, dtype=np.int64)
    ]
    if occ_msg:
        msg = np.asarray(occ_msg, dtype=np.int64)
        stem = np.asarray(occ_stem, dtype=np.int64)
        order = np.lexsort((msg, stem))
        msg, stem, w = msg[order], stem[order], weights[order]
        active = np.arange(len(msg) - 1)
        lag = 1
        while active.size:
            later = active + lag
            keep = later < len(msg)
            active, later = active[keep], later[keep]
            dist = msg[later] - msg[active]
            ok = (stem[later] == stem[active]) & (dist <= WINDOW)
            active, later, dist = active[ok], later[ok], dist[ok]
            flat = msg[later] * (WINDOW + 1) + dist
            total += np.bincount(flat, weights=w[later], minlength=total.size)
            np.maximum.at(rarest, flat, w[later])
            lag += 1
    return total.reshape(n, WINDOW + 1), rarest.reshape(n, WINDOW + 1)


class TopicArrays:
    """Per-message arrays of one topic, computed once; the pair features index into them."""

    def __init__(self, msgs: Sequence[Analysed], idf: Mapping[str, float]) -> None:
        n = len(msgs)
        self.n = n
        self.author = np.fromiter((m.author for m in msgs), dtype=np.int64, count=n)
        self.date = np.fromiter((m.date for m in msgs), dtype=np.float64, count=n)
        self.question = np.fromiter((m.question for m in msgs), dtype=np.float64, count=n)
        self.log_length = np.log1p(np.fromiter((m.length for m in msgs), dtype=np.float64, count=n))
        self.addressed = _slots([m.addressed for m in msgs], ADDRESS_SLOTS)
        self.mentioned = _slots([m.mentioned for m in msgs], MENTION_SLOTS)
        self.has_address = self.addressed[:, 0] != _NONE
        self.prev_same, self.next_same = _prev_next_same(self.author)
        self.overlap, self.rarest = _overlaps([m.stems for m in msgs], idf)
        self.pace = _pace(self.date)
        self.informative = _informative(idf)
        known = frozenset(self.informative)
        self.stems = [m.stems & known for m in msgs]


def _names(slots: np.ndarray, who: np.ndarray) -> np.ndarray:
    """Whether any slot (last axis) names ``who`` (broadcast against the leading axes)."""
    hit = np.zeros(np.broadcast_shapes(slots.shape[:-1], who.shape), dtype=bool)
    for s in range(slots.shape[-1]):
        hit |= slots[..., s] == who
    return hit


def pair_features(t: TopicArrays, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """``PAIR_FEATURES`` of messages ``lo..hi-1`` against their candidates.

    Returns:
        ``(features, valid)``: a ``(hi-lo, WINDOW, len(PAIR_FEATURES))`` float32 array and the
        ``(hi-lo, WINDOW)`` mask of candidates that exist.
    """
    i = np.arange(lo, hi)[:, None]
    dist = WINDOW - np.arange(WINDOW)[None, :]
    j_raw = i - dist
    valid = j_raw >= 0
    j = np.maximum(j_raw, 0)
    a_i, a_j = t.author[i], t.author[j]
    same = a_i == a_j
    other = ~same
    addr_i, addr_j = t.addressed[i[:, 0]][:, None, :], t.addressed[j]
    c_addr = _names(addr_i, a_j) & other
    c_ment = _names(t.mentioned[i[:, 0]][:, None, :], a_j) & other
    p_addr = _names(addr_j, a_i) & other
    p_ment = _names(t.mentioned[j], a_i) & other
    has_i = t.has_address[i]
    has_j = t.has_address[j]
    same_addressee = ((addr_i[..., :1] == addr_j) & (addr_j != _NONE)).any(axis=-1) & has_i & other
    nxt = t.next_same[j]
    latest = nxt >= i
    nxt2 = t.next_same[np.minimum(nxt, t.n - 1)]
    superseded2 = (nxt < i) & (nxt2 < i)
    prev_j = t.prev_same[j]
    new_in_window = (prev_j == _NONE) | (j - prev_j > WINDOW)
    own_prev = t.prev_same[i]
    spoke_since = (own_prev > j) & other
    own_prev_c = np.maximum(own_prev, 0)
    c_prev_addr = _names(t.addressed[own_prev_c[:, 0]][:, None, :], a_j) & (own_prev >= 0) & other
    # The newest candidate addressing c's author: the one whose count from the right is 1.
    p_addr_latest = p_addr & (np.cumsum(p_addr[:, ::-1], axis=1)[:, ::-1] == 1)
    overlap = t.overlap[i, dist]
    best = overlap.max(axis=1, keepdims=True)
    share = np.divide(overlap, best, out=np.zeros_like(overlap), where=best > 0)
    d_prev = i - prev_j
    has_prev = (prev_j != _NONE) & (d_prev <= WINDOW)
    overlap_prev = np.where(has_prev, t.overlap[i, np.where(has_prev, d_prev, 0)], 0.0)
    gap = np.maximum(t.date[i] - t.date[j], 0.0)
    shape = valid.shape
    cols = [
        np.broadcast_to(np.log1p(dist) / np.log1p(WINDOW), shape),
        np.broadcast_to(dist == 1, shape),
        np.broadcast_to(dist == 2, shape),
        np.broadcast_to(dist == 3, shape),
        (np.log1p(gap) - t.pace[i]) / GAP_SCALE,
        same,
        c_addr,
        c_ment,
        p_addr,
        p_ment,
        has_i & ~c_addr & other,
        has_j & ~p_addr & other,
        same_addressee,
        latest,
        superseded2,
        new_in_window,
        spoke_since,
        c_prev_addr,
        p_addr_latest,
        np.log1p(overlap) / OVERLAP_SCALE,
        share,
        (overlap == best) & (best > 0),
        t.rarest[i, dist] / IDF_SCALE,
        np.log1p(overlap_prev) / OVERLAP_SCALE,
        t.question[j],
        t.log_length[j] / LENGTH_SCALE,
    ]
    out = np.stack([np.asarray(c, dtype=np.float32) for c in cols], axis=-1)
    out[~valid] = 0.0
    return out, valid


def message_features(
    t: TopicArrays, lo: int, hi: int, pair: np.ndarray, valid: np.ndarray
) -> np.ndarray:
    """``MESSAGE_FEATURES`` of messages ``lo..hi-1`` (``pair``/``valid`` from ``pair_features``)."""
    i = np.arange(lo, hi)
    prev_gap = np.where(i > 0, t.date[i] - t.date[np.maximum(i - 1, 0)], 0.0)
    own_prev = t.prev_same[i]
    has_own = (own_prev != _NONE) & (i - own_prev <= WINDOW)
    own_gap = np.where(has_own, t.date[i] - t.date[np.maximum(own_prev, 0)], 0.0)
    p = {name: k for k, name in enumerate(PAIR_FEATURES)}
    pace = t.pace[i]
    cols = [
        (np.log1p(np.maximum(prev_gap, 0.0)) - pace) / GAP_SCALE,
        has_own,
        np.where(has_own, np.log1p(np.maximum(own_gap, 0.0)) - pace, 0.0) / GAP_SCALE,
        t.has_address[i],
        pair[:, :, p["c_addresses_p"]].max(axis=1),
        pair[:, :, p["c_mentions_p"]].max(axis=1),
        pair[:, :, p["p_addresses_c"]].max(axis=1),
        t.question[i],
        t.log_length[i] / LENGTH_SCALE,
        pair[:, :, p["overlap"]].max(axis=1),
        valid.sum(axis=1) / WINDOW,
    ]
    return np.stack([np.asarray(c, dtype=np.float32) for c in cols], axis=-1)


class DynamicState:
    """The decisions so far of one topic, and the ``DYNAMIC_FEATURES`` they give.

    Plain lists, not arrays: a message reads a handful of candidates, where a Python lookup
    costs less than a numpy call. Conversations are named by their first message.
    """

    def __init__(self, t: TopicArrays) -> None:
        n = t.n
        self.t = t
        self.parent = [_NONE] * n
        self.conv = [_NONE] * n
        self.replies = [0] * n
        self.tail = [_NONE] * n
        self.size = [0] * n
        self.author: list[int] = t.author.tolist()
        self.prev_same: list[int] = t.prev_same.tolist()
        self.answered_by: list[set[int]] = [set() for _ in range(n)]
        self.named: dict[tuple[int, int], int] = {}
        self._mentioned = [[a for a in row if a != _NONE] for row in t.mentioned.tolist()]
        self.date: list[float] = t.date.tolist()
        self.pace: list[float] = t.pace.tolist()
        self.conv_authors: dict[int, set[int]] = {}
        self.conv_stems: dict[int, set[str]] = {}

    def commit(self, i: int, parent: int | None) -> None:
        """Record message ``i``'s decision (``parent`` an earlier index, or None)."""
        a_i = self.author[i]
        if parent is None:
            conv = i
        else:
            self.parent[i] = parent
            conv = self.conv[parent]
            self.replies[parent] += 1
            self.answered_by[parent].add(a_i)
        self.conv[i] = conv
        self.tail[conv] = i
        self.size[conv] += 1
        self.conv_authors.setdefault(conv, set()).add(a_i)
        self.conv_stems.setdefault(conv, set()).update(self.t.stems[i])
        for b in self._mentioned[i]:
            self.named[(a_i, b)] = self.named[(b, a_i)] = i

    def features(self, i: int, cands: Sequence[int]) -> np.ndarray:
        """``(len(cands), len(DYNAMIC_FEATURES))`` float32 features of candidates ``cands``
        (earlier indices within ``WINDOW``) of message ``i``."""
        parent, conv, author = self.parent, self.conv, self.author
        a_i = author[i]
        own = self.prev_same[i]
        if own == _NONE or i - own > WINDOW:
            own = own_par = own_conv = a_own_par = -2
            answered_own: set[int] = set()
        else:
            own_par, own_conv = parent[own], conv[own]
            a_own_par = author[own_par] if own_par != _NONE else -2
            answered_own = self.answered_by[own]
        named, tail, replies, size = self.named, self.tail, self.replies, self.size
        conv_authors, conv_stems, date = self.conv_authors, self.conv_stems, self.date
        recent = i - INTERACTION_WINDOW
        c_stems, idf, date_i, pace = self.t.stems[i], self.t.informative, date[i], self.pace[i]
        log1p = math.log1p
        overlap = self.t.overlap[i]
        rows = []
        for j in cands:
            pj, cj = parent[j], conv[j]
            if pj == _NONE:
                from_parent, answers_own, started, near = 0.0, 0.0, 1.0, 0.0
            else:
                from_parent = float(author[pj] == a_i)
                answers_own = float(pj == own)
                started = 0.0
                d = i - pj
                near = log1p(float(overlap[d])) / OVERLAP_SCALE if d <= WINDOW else 0.0
            a_j = author[j]
            rows.append(
                (
                    from_parent,
                    answers_own,
                    started,
                    float(tail[cj] == j),
                    float(cj == own_conv),
                    log1p(replies[j]),
                    log1p(size[cj]) / SIZE_SCALE,
                    near,
                    float(j == own_par),
                    float(a_j == a_own_par),
                    float(a_j in answered_own),
                    float(named.get((a_i, a_j), recent - 1) >= recent),
                    float(a_i in conv_authors[cj]),
                    log1p(sum(idf[s] for s in c_stems & conv_stems[cj])) / OVERLAP_SCALE,
                    (log1p(max(date_i - date[tail[cj]], 0.0)) - pace) / GAP_SCALE,
                )
            )
        return np.asarray(rows, dtype=np.float32).reshape(len(rows), len(DYNAMIC_FEATURES))


@dataclass(slots=True)
class Block:
    """The pair and message features of messages ``lo..lo+len(valid)-1``."""

    lo: int
    pair: np.ndarray
    message: np.ndarray
    valid: np.ndarray


class TopicInputs:
    """Every input of one topic: arrays up front, pair features by block, decisions as synced.

    ``block(i)`` computes the features of the ``BLOCK_MESSAGES`` block holding ``i`` (one
    block is kept, so memory stays bounded on a big chat); ``sync`` replays committed
    decisions into the ``DynamicState``.
    """

    BLOCK_MESSAGES = 2048

    def __init__(self, msgs: Sequence[Analysed], idf: Mapping[str, float]) -> None:
        self.arrays = TopicArrays(msgs, idf)
        self.state = DynamicState(self.arrays)
        self.synced = 0
        self._block: Block | None = None

    def block(self, i: int) -> Block:
        """The block holding message ``i``."""
        b = self._block
        if b is None or not b.lo <= i < b.lo + len(b.valid):
            lo = i - i % self.BLOCK_MESSAGES
            hi = min(lo + self.BLOCK_MESSAGES, self.arrays.n)
            pair, valid = pair_features(self.arrays, lo, hi)
            b = Block(lo, pair, message_features(self.arrays, lo, hi, pair, valid), valid)
            self._block = b
        return b

    def sync(self, parents: Sequence[int | None], upto: int) -> None:
        """Commit ``parents[synced:upto]`` (indices, None = new) to the dynamic state."""
        for k in range(self.synced, upto):
            self.state.commit(k, parents[k])
        self.synced = max(self.synced, upto)
