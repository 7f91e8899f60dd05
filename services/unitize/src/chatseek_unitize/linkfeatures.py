"""The learned link scorer's inputs: per (message, candidate) features, vectorised per topic.

Message ``i`` chooses among "new conversation" and the ``WINDOW`` messages before it; arrays
list those candidates oldest first (column ``c`` is message ``i - WINDOW + c``); a block's
pair features are feature-major (``pair_columns``). Features (``PAIR_FEATURES``,
``MESSAGE_FEATURES``, ``DYNAMIC_FEATURES``): pair ones are fixed by the
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
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, NamedTuple

import numpy as np

from chatseek_unitize.spill import Col, Spill

__all__ = [
    "DYNAMIC_FEATURES",
    "MESSAGE_FEATURES",
    "PAIR_FEATURES",
    "WINDOW",
    "Analysed",
    "Block",
    "DynamicState",
    "NameSlots",
    "StemTable",
    "TopicArrays",
    "TopicColumns",
    "TopicInputs",
    "columns_of",
    "informative",
    "least_informative",
    "message_features",
    "pair_columns",
]

WINDOW = 50
OVERLAP_ROWS = 2048
PACE_GAPS = 50
_PACE_SLICE = 1 << 16
INTERACTION_WINDOW = 100
EVICT_EVERY = 4096
"""Decisions between two passes in which ``DynamicState`` drops what no candidate can reach."""
OVERLAP_MIN_IDF = 3.0
ADDRESS_SLOTS = 2
MENTION_SLOTS = 3
GAP_SCALE = 8.0
LENGTH_SCALE = 6.0
OVERLAP_SCALE = 3.0
IDF_SCALE = 10.0
SIZE_SCALE = 4.0
_NONE = -1
_NO_AUTHORS: frozenset[int] = frozenset()
_NOBODY: dict[int, int] = {}

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


class Analysed(NamedTuple):
    """What the features read of one message (see ``linking.LinkContext``); a tuple, as a
    topic makes one per message."""

    author: int
    date: int
    addressed: tuple[int, ...]
    mentioned: tuple[int, ...]
    # Distinct stems. A topic's stems are tuples, a set built from one only while a
    # decision reads it: one frozenset a message was a fifth of a big build's memory.
    stems: tuple[str, ...] | frozenset[str]
    question: bool
    length: int


class StemTable:
    """Each message's informative stems as numbers into ``vocab``: message ``k`` holds
    ``ids[off[k]:off[k + 1]]``, in the order its analysis listed them. A tuple of strings a
    message took about 100 bytes and more; here a stem takes four."""

    __slots__ = ("_ids_at", "_off_at", "ids", "off", "vocab")

    def __init__(self, vocab: Sequence[str], ids: np.ndarray | Col, off: np.ndarray | Col) -> None:
        """``ids`` and ``off`` given as an ``array`` (``"i"`` and ``"q"``) are held as they
        are, not copied."""
        self.vocab = vocab
        self._ids_at, self.ids = _held(ids, np.int32, "i")
        self._off_at, self.off = _held(off, np.int64, "q")

    def numbers(self, k: int) -> frozenset[int]:
        """Message ``k``'s stems as their numbers into ``vocab``."""
        off = self._off_at
        return frozenset(self._ids_at[off[k] : off[k + 1]])


class NameSlots:
    """Whom a topic's messages name in one kind of slot (whom they address, or mention):
    slot ``s`` is filled by the messages at positions ``at[s]`` (ascending), naming the
    authors ``who[s]``. A message's names fill its slots from the first.

    Few messages name anyone, so nothing is held for the others: as dense columns, the five
    slots took 20 bytes a message.
    """

    __slots__ = ("at", "who")

    def __init__(self, at: Sequence[Sequence[int]], who: Sequence[Sequence[int]]) -> None:
        self.at = [np.asarray(a, dtype=np.int32) for a in at]
        self.who = [np.asarray(w, dtype=np.int32) for w in who]

    @classmethod
    def of(cls, named: Iterable[tuple[int, Sequence[int]]], width: int) -> NameSlots:
        """The slots of the messages ``named`` lists as ``(position, names)``, by ascending
        position, each cut to ``width`` names."""
        at: list[list[int]] = [[] for _ in range(width)]
        who: list[list[int]] = [[] for _ in range(width)]
        for k, row in named:
            for s, a in enumerate(row[:width]):
                at[s].append(k)
                who[s].append(a)
        return cls(at, who)

    def used(self, lo: int, hi: int) -> list[int]:
        """The slots some message of ``lo..hi-1`` fills."""
        lo = max(lo, 0)
        out = []
        for s, at in enumerate(self.at):
            first = int(np.searchsorted(at, lo))
            if first < len(at) and at[first] < hi:
                out.append(s)
        return out

    def window(self, s: int, base: int, end: int) -> np.ndarray:
        """Slot ``s`` of messages ``base..end-1`` as a column (``-1`` where empty)."""
        out = np.full(end - base, _NONE, dtype=np.int32)
        at = self.at[s]
        a, b = np.searchsorted(at, (base, end))
        out[at[a:b] - base] = self.who[s][a:b]
        return out

    def at_positions(self, s: int, pos: np.ndarray) -> np.ndarray:
        """Slot ``s`` of the messages at ``pos`` (any shape; ``-1`` where empty)."""
        at = self.at[s]
        if not len(at):
            return np.full(pos.shape, _NONE, dtype=np.int32)
        k = np.minimum(np.searchsorted(at, pos), len(at) - 1)
        return np.where(at[k] == pos, self.who[s][k], np.int32(_NONE))

    def names(self) -> dict[int, tuple[int, ...]]:
        """Each naming message's names, in slot order, by position."""
        out: dict[int, tuple[int, ...]] = {}
        for at, who in zip(self.at, self.who, strict=True):
            for k, a in zip(at.tolist(), who.tolist(), strict=True):
                out[k] = (*out.get(k, ()), a)
        return out


@dataclass(frozen=True, slots=True)
class TopicColumns:
    """What the features read of a topic's messages (see ``Analysed``), a column each: a
    topic streamed from the store never holds a tuple per message."""

    # Numbers in the topic; an "i" array (or mapped column) is held as it is.
    author: np.ndarray | Col
    date: Col  # "q": unix seconds
    addressed: NameSlots  # ADDRESS_SLOTS wide
    mentioned: NameSlots  # MENTION_SLOTS wide
    question: np.ndarray  # bool
    length: np.ndarray  # integers
    stems: StemTable
    # Where the scorer's own per-message arrays go (``spill``); the heap when None.
    spill: Spill | None = None

    @property
    def n(self) -> int:
        return len(self.author)


def columns_of(msgs: Sequence[Analysed], known: frozenset[str]) -> TopicColumns:
    """``msgs`` as columns, each message's stems cut to ``known`` (a tuple already inside
    it keeps its order)."""
    n = len(msgs)
    number: dict[str, int] = {}
    ids: list[int] = []
    off = np.zeros(n + 1, dtype=np.int64)
    for k, m in enumerate(msgs):
        s = m.stems
        kept = s if isinstance(s, tuple) and known.issuperset(s) else tuple(known.intersection(s))
        for stem in kept:
            x = number.get(stem)
            if x is None:
                x = number[stem] = len(number)
            ids.append(x)
        off[k + 1] = len(ids)
    return TopicColumns(
        author=np.fromiter((m.author for m in msgs), dtype=np.int64, count=n),
        date=array("q", [m.date for m in msgs]),
        addressed=NameSlots.of(enumerate(m.addressed for m in msgs), ADDRESS_SLOTS),
        mentioned=NameSlots.of(enumerate(m.mentioned for m in msgs), MENTION_SLOTS),
        question=np.fromiter((m.question for m in msgs), dtype=bool, count=n),
        length=np.fromiter((m.length for m in msgs), dtype=np.int64, count=n),
        stems=StemTable(list(number), np.asarray(ids, dtype=np.int32), off),
    )


def _prev_next_same(
    author: np.ndarray, prev: np.ndarray | None = None, nxt: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Index of each message's previous and next message by the same author (-1 / n: none),
    into ``prev`` and ``nxt`` (int32, made when None).

    A slice of ``_PACE_SLICE`` messages at a time, the last message of each author carried
    from slice to slice: over the whole topic, the sort's order and its copies took about 20
    bytes a message at once.
    """
    n = len(author)
    if prev is None:
        prev = np.empty(n, dtype=np.int32)
    if nxt is None:
        nxt = np.empty(n, dtype=np.int32)
    if n and (int(author.min()) < 0 or int(author.max()) > 4 * n):
        author = np.unique(author, return_inverse=True)[1]  # the same equalities, small
    last = np.full(int(author.max()) + 1 if n else 0, _NONE, dtype=np.int32)
    for a in range(0, n, _PACE_SLICE):
        b = min(a + _PACE_SLICE, n)
        part = author[a:b]
        order = np.argsort(part, kind="stable")  # by author, then by position
        by_author = part[order]
        same = by_author[1:] == by_author[:-1]
        prev[a:b] = _NONE
        nxt[a:b] = n
        later, earlier = order[1:][same] + a, order[:-1][same] + a
        prev[later] = earlier
        nxt[earlier] = later
        starts = np.concatenate(([True], ~same))
        firsts, first_authors = order[starts] + a, by_author[starts]
        before = last[first_authors]
        prev[firsts] = before
        carried = before != _NONE
        nxt[before[carried]] = firsts[carried]
        ends = np.concatenate((~same, [True]))
        last[by_author[ends]] = order[ends] + a
    return prev, nxt


def informative(idf: Mapping[str, float]) -> dict[str, float]:
    """The stems that carry overlap, with their idf (see the module docstring)."""
    least = least_informative(max(idf.values(), default=0.0))
    return {s: w for s, w in idf.items() if w >= least}


def least_informative(top: float) -> float:
    """The smallest idf that carries overlap in a chat whose largest idf is ``top``."""
    # A stem in only two messages always counts, however small the chat (then its idf is
    # the largest but one: log((total + 1) / 3) = max - log 1.5).
    return min(OVERLAP_MIN_IDF, top - math.log(1.5) - 1e-9)


def _pace(date: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The chat's local pace before each message: the mean log gap of the ``PACE_GAPS``
    gaps between the messages before it (0 with none). Time features are log gaps minus it,
    so a pause means the same in a chat that speaks every few seconds and in one that speaks
    every few hours. Written into ``out`` (float64, made when None).

    A slice at a time: over the whole topic, the log gaps, their running sums and the index
    columns took about 80 bytes a message at once. The running sum is carried from slice to
    slice, with the ``PACE_GAPS`` sums before each, and adds the gaps in the same order as one
    sum over the topic would, so the means are the same floats.
    """
    n = len(date)
    if out is None:
        out = np.empty(n)
    # ``tail`` holds cum[first..a], cum[k] being the sum of the first k log gaps and first
    # the message PACE_GAPS before the slice (or the topic's first).
    tail = np.zeros(1)
    first = 0
    for a in range(0, n, _PACE_SLICE):
        b = min(a + _PACE_SLICE, n)
        log_gap = np.zeros(b - a)
        lo_date = max(a - 1, 0)
        if b > 1:
            gaps = np.log1p(np.maximum(np.diff(date[lo_date:b]), 0.0))
            log_gap[b - a - len(gaps) :] = gaps
        sums = np.empty(len(log_gap) + 1)
        np.cumsum(np.concatenate((tail[-1:], log_gap)), out=sums)
        cum = np.concatenate((tail[:-1], sums))  # cum[k - first] for k in first..b
        i = np.arange(a, b)
        lo = np.minimum(np.maximum(1, i - PACE_GAPS), i)
        count = i - lo
        out[a:b] = np.where(
            count > 0, (cum[i - first] - cum[lo - first]) / np.maximum(count, 1), 0.0
        )
        keep_from = max(b - PACE_GAPS, 0)
        tail = cum[keep_from - first :]
        first = keep_from
    return out


def _overlaps(
    stem_sets: Sequence[frozenset[str]], idf: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray]:
    """``(sum, max)`` of the idf of the stems message ``i`` shares with ``i - d``, by ``[i, d]``."""
    kept = informative(idf)
    known = frozenset(kept)
    return _overlaps_of([s & known for s in stem_sets], kept)


def _overlaps_of(
    stem_sets: Sequence[frozenset[str]], kept: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray]:
    """``_overlaps`` of stem sets already cut to the informative stems ``kept`` (with idf)."""
    ranks, weights = _ranked(kept)
    lens = np.fromiter(map(len, stem_sets), dtype=np.int64, count=len(stem_sets))
    flat = np.fromiter(
        map(ranks.__getitem__, chain.from_iterable(stem_sets)),
        dtype=np.int64,
        count=int(lens.sum()),
    )
    return _ranked_overlaps(flat, lens, weights)


def _ranked(kept: Mapping[str, float]) -> tuple[dict[str, int], np.ndarray]:
    """Each kept stem's rank in name order, and the idf by rank.

    Stems are numbered in sorted order, not the idf mapping's (which follows string hashes):
    the order the overlap sums are taken in, and so their rounding, is the same in every
    process.
    """
    by_name = sorted(kept)
    ranks = {s: k for k, s in enumerate(by_name)}
    return ranks, np.fromiter(map(kept.__getitem__, by_name), dtype=np.float64, count=len(by_name))


def _ranked_overlaps(
    stem: np.ndarray, lens: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``_overlaps_of`` given the stems of each message in turn (``lens[k]`` of them for
    message ``k``) as their ranks in name order, and the idf by rank.

    Occurrences are sorted by (stem, message); a message holds a stem once, so the pairs at
    lag ``L`` within one stem's run are its messages ``L`` apart, and a run is done once the
    lag spans more than ``WINDOW`` messages: each lag is one vectorised pass. A cell's sum
    reads only the messages from ``i - d`` to ``i``, and adds its stems in rank order, so
    rows computed over any stretch that starts ``WINDOW`` messages before them are the same
    floats as over the whole topic (``TopicArrays.overlap_rows``).
    """
    n = len(lens)
    size = n * (WINDOW + 1)
    count = len(stem)
    msg = np.repeat(np.arange(n, dtype=np.int64), lens)
    stem = stem.astype(np.int64, copy=False)
    w = weights[stem]
    # Occurrences come in message order, so ordering by (stem, position) orders by (stem,
    # message): one unique integer key each, which the default (vectorised) sort takes
    # five times faster than a stable sort by stem.
    order = np.argsort(stem * count + np.arange(count, dtype=np.int64))
    msg, stem, w = msg[order], stem[order], w[order]
    total = np.zeros(size)
    rarest = np.zeros(size)
    lag_sums = np.zeros(size)
    active = np.arange(max(count - 1, 0))
    lag = 1
    while active.size:
        later = active + lag
        keep = later < count
        active, later = active[keep], later[keep]
        dist = msg[later] - msg[active]
        ok = (stem[later] == stem[active]) & (dist <= WINDOW)
        active, later, dist = active[ok], later[ok], dist[ok]
        flat, wt = msg[later] * (WINDOW + 1) + dist, w[later]
        # Each lag's sums first, then added to the totals: the additions a dense per-lag
        # bincount makes, in its order (ties between equal overlaps are features), on only
        # the cells this lag touches (a repeated cell gets the same value each time).
        np.add.at(lag_sums, flat, wt)
        total[flat] += lag_sums[flat]
        lag_sums[flat] = 0.0
        np.maximum.at(rarest, flat, wt)
        lag += 1
    return total.reshape(n, WINDOW + 1), rarest.reshape(n, WINDOW + 1)


@dataclass(frozen=True, slots=True)
class OverlapRows:
    """``overlap`` and ``rarest`` (see ``_overlaps``) of messages ``lo..lo+len(overlap)-1``."""

    lo: int
    overlap: np.ndarray  # (messages, WINDOW + 1) float64
    rarest: np.ndarray


class TopicArrays:
    """Per-message arrays of one topic, computed once; the pair features index into them."""

    def __init__(self, msgs: Sequence[Analysed] | TopicColumns, idf: Mapping[str, float]) -> None:
        self.informative = informative(idf)
        cols = (
            msgs
            if isinstance(msgs, TopicColumns)
            else columns_of(msgs, frozenset(self.informative))
        )
        n = cols.n
        self.n = n
        spill = cols.spill if cols.spill is not None else Spill(None)
        self.spill = spill
        # Held once each, as an ``array`` (or mapped column) the dynamic state looks single
        # values up in and a numpy view of it the blocks read.
        # Numbers of authors and positions fit 32 bits; times and sums stay 64.
        self.author_at, self.author = _held(cols.author, np.int32, "i")
        # The topic's own column of times, not a copy: whole seconds, whose differences are
        # the same floats as before whether taken as integers or as floats.
        self.date_at = cols.date
        self.date = np.frombuffer(cols.date, dtype=np.int64)
        self.question = np.asarray(cols.question, dtype=bool)
        self.log_length = spill.zeros(n, np.float64)
        for a in range(0, n, _PACE_SLICE):
            b = min(a + _PACE_SLICE, n)
            np.log1p(cols.length[a:b].astype(np.float64), out=self.log_length[a:b])
        spill.release()
        prev_same, self.next_same = _prev_next_same(
            self.author, spill.zeros(n, np.int32), spill.zeros(n, np.int32)
        )
        spill.release()
        self.prev_same_at, self.prev_same = prev_same.data, prev_same
        self.stems = cols.stems
        ranks, self._weights = _ranked(self.informative)
        # Each stem number's rank in name order.
        self._rank_of = np.fromiter(
            map(ranks.__getitem__, cols.stems.vocab), dtype=np.int64, count=len(cols.stems.vocab)
        )
        self._rows: OverlapRows | None = None
        self.pace = _pace(self.date, spill.zeros(n, np.float64))
        self.pace_at = self.pace.data
        spill.release()
        # Whom messages address and mention, held sparse; a block skips the name
        # comparisons of a slot no message near it fills.
        self.addressed = cols.addressed
        self.mentioned = cols.mentioned
        self.has_address = spill.zeros(n, bool)
        self.has_address[cols.addressed.at[0]] = True
        spill.release()

    def overlap_rows(self, lo: int, hi: int) -> OverlapRows:
        """The overlaps of a stretch holding messages ``lo..hi-1``.

        Computed by stretches of ``OVERLAP_ROWS`` messages, one kept at a time: over the
        whole topic they took 816 bytes a message (two float64 rows of ``WINDOW + 1``).
        """
        rows = self._rows
        if rows is not None and rows.lo <= lo and hi <= rows.lo + len(rows.overlap):
            return rows
        start = lo - lo % OVERLAP_ROWS
        end = min(max(hi, start + OVERLAP_ROWS), self.n)
        first = max(start - WINDOW, 0)
        off = self.stems.off
        flat = self._rank_of[self.stems.ids[off[first] : off[end]]]
        overlap, rarest = _ranked_overlaps(flat, np.diff(off[first : end + 1]), self._weights)
        rows = OverlapRows(start, overlap[start - first :], rarest[start - first :])
        self._rows = rows
        return rows


def _held_once(values: np.ndarray, code: str) -> tuple[array[Any], np.ndarray]:
    """``values`` as an ``array`` of type ``code`` and a numpy view of the same memory (one
    copy, straight from the numpy buffer)."""
    held = array(code)
    held.frombytes(raw_bytes(values))
    return held, np.frombuffer(held, dtype=values.dtype)


def raw_bytes(values: np.ndarray) -> memoryview:
    """The bytes of ``values`` (made contiguous) as a buffer ``array.frombytes`` takes, which
    refuses a numpy array itself: no copy, where ``tobytes`` makes one."""
    return memoryview(np.ascontiguousarray(values).view(np.uint8))  # type: ignore[arg-type]


def _held(values: np.ndarray | Col, dtype: type[np.generic], code: str) -> tuple[Col, np.ndarray]:
    """``_held_once`` of ``values`` as ``dtype``; an ``array`` of type ``code``, or a
    ``memoryview`` of that format (a mapped column, ``spill``), is kept."""
    if (isinstance(values, array) and values.typecode == code) or (
        isinstance(values, memoryview) and values.format == code
    ):
        return values, np.frombuffer(values, dtype=dtype)
    return _held_once(np.asarray(values).astype(dtype, copy=False), code)


def _names_any(
    used: list[int], values: Callable[[int], np.ndarray], who: np.ndarray, shape: tuple[int, ...]
) -> np.ndarray:
    """Whether any used slot names ``who``: ``values(s)`` is slot ``s`` of the messages
    compared, broadcast with ``who`` to ``shape``."""
    hit = np.zeros(shape, dtype=bool)
    for s in used:
        hit |= values(s) == who
    return hit


_DIST = WINDOW - np.arange(WINDOW)  # column c holds the candidate this many messages back
_DISTANCE_COLUMNS = np.stack(
    [
        np.log1p(_DIST) / np.log1p(WINDOW),
        _DIST == 1,
        _DIST == 2,
        _DIST == 3,
    ],
    axis=-1,
).astype(np.float32)


def pair_columns(
    t: TopicArrays,
    lo: int,
    hi: int,
    out: np.ndarray | None = None,
    rows: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``PAIR_FEATURES`` of messages ``lo..hi-1`` against their candidates, feature-major.

    Args:
        out: A float32 array of at least ``(len(PAIR_FEATURES), n, WINDOW)`` to fill.
        rows: Only these messages (ascending, within ``lo..hi-1``), instead of all ``n``.

    Returns:
        ``(features, valid)``: the ``(len(PAIR_FEATURES), n, WINDOW)`` float32 features
        (zero for candidates that do not exist) and the ``(n, WINDOW)`` mask of those that do.
    """
    i1 = np.arange(lo, hi) if rows is None else rows
    n = len(i1)
    if out is None:
        out = np.empty((len(PAIR_FEATURES), n, WINDOW), dtype=np.float32)
    out = out[:, :n]
    i = i1[:, None]
    j = i - _DIST
    valid = j >= 0
    if lo < WINDOW:
        j = np.maximum(j, 0)
    a_i, a_j = t.author[i], t.author[j]
    same = a_i == a_j
    other = ~same
    out[0:4] = np.moveaxis(_DISTANCE_COLUMNS, -1, 0)[:, None, :]
    gap = np.maximum(t.date[i] - t.date[j], 0.0)
    out[4] = (np.log1p(gap) - t.pace[i]) / GAP_SCALE
    out[5] = same
    # Who names whom: only the slots some message of the block (or its window) fills, each
    # as a column over the block and its window (``base..hi-1``).
    base = max(lo - WINDOW, 0)
    il, jl = i - base, j - base
    addressed, mentioned = t.addressed, t.mentioned
    own_used = addressed.used(lo, hi)
    cand_used = addressed.used(base, hi)
    addr = {s: addressed.window(s, base, hi) for s in cand_used}
    ment = {s: mentioned.window(s, base, hi) for s in mentioned.used(base, hi)}
    shape = (n, WINDOW)
    c_addr = _names_any(own_used, lambda s: addr[s][il], a_j, shape) & other
    c_ment = _names_any(mentioned.used(lo, hi), lambda s: ment[s][il], a_j, shape) & other
    p_addr = _names_any(cand_used, lambda s: addr[s][jl], a_i, shape) & other
    p_ment = _names_any(list(ment), lambda s: ment[s][jl], a_i, shape) & other
    has_i = t.has_address[i]
    has_j = t.has_address[j]
    out[6] = c_addr
    out[7] = c_ment
    out[8] = p_addr
    out[9] = p_ment
    out[10] = has_i & ~c_addr & other
    out[11] = has_j & ~p_addr & other
    # The message's first addressee is one of the candidate's (a filled slot never holds -1).
    same_addressee = np.zeros((n, WINDOW), dtype=bool)
    if own_used and cand_used:
        first = addr[0][il]
        for s in cand_used:
            same_addressee |= addr[s][jl] == first
        same_addressee &= has_i & other
    out[12] = same_addressee
    nxt = t.next_same[j]
    out[13] = nxt >= i
    nxt2 = t.next_same[np.minimum(nxt, t.n - 1)]
    out[14] = (nxt < i) & (nxt2 < i)
    prev_j = t.prev_same[j]
    out[15] = (prev_j == _NONE) | (j - prev_j > WINDOW)
    own_prev = t.prev_same[i]
    out[16] = (own_prev > j) & other
    own_prev_c = np.maximum(own_prev, 0)
    # The author's previous message may lie any distance back.
    known_prev = own_prev[own_prev != _NONE]
    c_prev_used = addressed.used(int(known_prev.min()) if known_prev.size else hi, hi)
    c_prev_addr = _names_any(
        c_prev_used, lambda s: addressed.at_positions(s, own_prev_c), a_j, shape
    )
    out[17] = c_prev_addr & (own_prev >= 0) & other
    # The newest candidate addressing c's author: the one whose count from the right is 1.
    out[18] = p_addr & (np.cumsum(p_addr[:, ::-1], axis=1)[:, ::-1] == 1)
    stretch = t.overlap_rows(lo, hi)
    at = slice(lo - stretch.lo, hi - stretch.lo) if rows is None else rows - stretch.lo
    overlap = stretch.overlap[at, WINDOW:0:-1]
    best = overlap.max(axis=1, keepdims=True)
    out[19] = np.log1p(overlap) / OVERLAP_SCALE
    out[20] = np.divide(overlap, best, out=np.zeros_like(overlap), where=best > 0)
    out[21] = (overlap == best) & (best > 0)
    out[22] = stretch.rarest[at, WINDOW:0:-1] / IDF_SCALE
    d_prev = i - prev_j
    has_prev = (prev_j != _NONE) & (d_prev <= WINDOW)
    flat = (i - stretch.lo) * (WINDOW + 1) + np.where(has_prev, d_prev, 0)
    out[23] = np.where(has_prev, np.log1p(stretch.overlap.reshape(-1)[flat]) / OVERLAP_SCALE, 0.0)
    out[24] = t.question[j]
    out[25] = t.log_length[j] / LENGTH_SCALE
    if lo < WINDOW:
        out[:, ~valid] = 0.0
    return out, valid


_P = {name: k for k, name in enumerate(PAIR_FEATURES)}


def message_features(
    t: TopicArrays,
    lo: int,
    hi: int,
    cols: np.ndarray,
    valid: np.ndarray,
    rows: np.ndarray | None = None,
) -> np.ndarray:
    """``MESSAGE_FEATURES`` of messages ``lo..hi-1`` or ``rows`` (``cols``/``valid`` from
    ``pair_columns`` with the same arguments)."""
    i = np.arange(lo, hi) if rows is None else rows
    prev_gap = np.where(i > 0, t.date[i] - t.date[np.maximum(i - 1, 0)], 0.0)
    own_prev = t.prev_same[i]
    has_own = (own_prev != _NONE) & (i - own_prev <= WINDOW)
    own_gap = np.where(has_own, t.date[i] - t.date[np.maximum(own_prev, 0)], 0.0)
    pace = t.pace[i]
    out = np.empty((len(i), len(MESSAGE_FEATURES)), dtype=np.float32)
    out[:, 0] = (np.log1p(np.maximum(prev_gap, 0.0)) - pace) / GAP_SCALE
    out[:, 1] = has_own
    out[:, 2] = np.where(has_own, np.log1p(np.maximum(own_gap, 0.0)) - pace, 0.0) / GAP_SCALE
    out[:, 3] = t.has_address[i]
    out[:, 4] = cols[_P["c_addresses_p"]].max(axis=1)
    out[:, 5] = cols[_P["c_mentions_p"]].max(axis=1)
    out[:, 6] = cols[_P["p_addresses_c"]].max(axis=1)
    out[:, 7] = t.question[i]
    out[:, 8] = t.log_length[i] / LENGTH_SCALE
    out[:, 9] = cols[_P["overlap"]].max(axis=1)
    out[:, 10] = valid.sum(axis=1) / WINDOW
    return out


class DynamicState:
    """The decisions so far of one topic, and the ``DYNAMIC_FEATURES`` they give.

    Plain lists, not arrays: a message reads a handful of candidates, where a Python lookup
    costs less than a numpy call. Conversations are named by their first message.

    Every ``EVICT_EVERY`` decisions, a conversation whose last message is more than
    ``WINDOW`` back loses its author and stem sets (no candidate can be in it any more), and
    so does the record of who answered a message that far back. An explicit reply or agent
    answer that joins such a conversation rebuilds its sets by replaying its members' updates
    in order (``next_member`` chains them): the same insertions make the same set, which
    iterates in the same order, so its overlap sums are the same floats.
    """

    def __init__(self, t: TopicArrays) -> None:
        n = t.n
        self.t = t
        # ``array`` columns, not lists: a lookup costs about the same, and a message takes 4
        # or 8 bytes a column instead of a pointer and, mostly, an int or float object.
        filled = t.spill.filled
        self.parent = filled(n, "i", _NONE)
        self.conv = filled(n, "i", _NONE)
        self.replies = filled(n, "i")
        # float32: the features are float32, and a float32 rounds to itself.
        self.log_replies = filled(n, "f")
        self.tail = filled(n, "i", _NONE)
        self.size = filled(n, "i")
        self.author = t.author_at
        self.prev_same = t.prev_same_at
        # Who answered each message, for the messages somebody answered (most are not): one
        # author as a frozenset of one, shared by every message that author alone answered.
        self.answered_by: dict[int, frozenset[int] | set[int]] = {}
        self._alone: dict[int, frozenset[int]] = {}
        # named[a][b]: the latest message in which a and b named each other.
        self.named: dict[int, dict[int, int]] = {}
        # Whom each message mentions, for the messages that mention someone.
        self._mentioned: dict[int, tuple[int, ...]] = t.mentioned.names()
        self.date = t.date_at
        self.pace = t.pace_at
        self.conv_authors: dict[int, set[int]] = {}
        # Stems as their numbers in the topic's vocabulary, weighed by ``weight``: a number
        # hashes and compares cheaper than a string, and a set of small numbers iterates in
        # an order its numbers fix, not the process's string hash seed.
        self.conv_stems: dict[int, set[int]] = {}
        self.weight = [t.informative[s] for s in t.stems.vocab]
        self.next_member = filled(n, "i", _NONE)
        self._last_stems: tuple[int, frozenset[int]] = (_NONE, frozenset())
        self._evict_at = EVICT_EVERY

    def commit(self, i: int, parent: int | None) -> None:
        """Record message ``i``'s decision (``parent`` an earlier index, or None)."""
        a_i = self.author[i]
        if parent is None:
            conv = i
        else:
            self.parent[i] = parent
            conv = self.conv[parent]
            replies = self.replies[parent] + 1
            self.replies[parent] = replies
            self.log_replies[parent] = math.log1p(replies)
            answered = self.answered_by.get(parent)
            if answered is None:
                alone = self._alone.get(a_i)
                if alone is None:
                    alone = self._alone[a_i] = frozenset((a_i,))
                self.answered_by[parent] = alone
            elif a_i not in answered:
                if isinstance(answered, frozenset):
                    self.answered_by[parent] = {*answered, a_i}
                else:
                    answered.add(a_i)
        self.conv[i] = conv
        last = self.tail[conv]
        if last != _NONE:
            if conv not in self.conv_stems:
                self._replay(conv)
            self.next_member[last] = i
        self.tail[conv] = i
        self.size[conv] += 1
        self.conv_authors.setdefault(conv, set()).add(a_i)
        # The set ``features_flat`` read, made once.
        self.conv_stems.setdefault(conv, set()).update(self._stem_set(i))
        for b in self._mentioned.get(i, ()):
            self.named.setdefault(a_i, {})[b] = i
            self.named.setdefault(b, {})[a_i] = i
        if i >= self._evict_at:
            self._evict(i)

    def _stem_set(self, i: int) -> frozenset[int]:
        """Message ``i``'s stems as a set of numbers, made once for its features and its
        commit."""
        last = self._last_stems
        if last[0] == i:
            return last[1]
        stems = self.t.stems.numbers(i)
        self._last_stems = (i, stems)
        return stems

    def _replay(self, conv: int) -> None:
        """Rebuild the author and stem sets of evicted conversation ``conv``."""
        authors: set[int] = set()
        stems: set[int] = set()
        k = conv
        while k != _NONE:
            authors.add(self.author[k])
            stems.update(self.t.stems.numbers(k))
            k = self.next_member[k]
        self.conv_authors[conv] = authors
        self.conv_stems[conv] = stems

    def _evict(self, i: int) -> None:
        """Drop what no candidate of a message after ``i`` can read (see the class)."""
        horizon = i - WINDOW
        tail = self.tail
        for conv in [c for c in self.conv_stems if tail[c] < horizon]:
            del self.conv_stems[conv]
            del self.conv_authors[conv]
        for k in [k for k in self.answered_by if k < horizon]:
            del self.answered_by[k]
        self._evict_at = i + EVICT_EVERY

    def features(self, i: int, cands: Sequence[int]) -> np.ndarray:
        """``(len(cands), len(DYNAMIC_FEATURES))`` float32 features of candidates ``cands``
        (earlier indices within ``WINDOW``) of message ``i``."""
        flat = self.features_flat(i, cands)
        return np.asarray(flat, dtype=np.float32).reshape(len(cands), len(DYNAMIC_FEATURES))

    def features_flat(self, i: int, cands: Sequence[int]) -> list[float]:
        """``features(i, cands)`` as one flat row-major list of Python floats.

        What depends only on the candidate's conversation (its size, authors, words, last
        time) is computed once per conversation among ``cands``.
        """
        parent, conv, author = self.parent, self.conv, self.author
        a_i = author[i]
        own = self.prev_same[i]
        answered_own: set[int] | frozenset[int]
        if own == _NONE or i - own > WINDOW:
            own = own_par = own_conv = a_own_par = -2
            answered_own = _NO_AUTHORS
        else:
            own_par, own_conv = parent[own], conv[own]
            a_own_par = author[own_par] if own_par != _NONE else -2
            answered_own = self.answered_by.get(own, _NO_AUTHORS)
        tail, log_replies, size = self.tail, self.log_replies, self.size
        conv_authors, conv_stems, date = self.conv_authors, self.conv_stems, self.date
        recent = i - INTERACTION_WINDOW
        named = self.named.get(a_i, _NOBODY)
        c_stems, idf, date_i, pace = (
            self._stem_set(i),
            self.weight,
            date[i],
            self.pace[i],
        )
        log1p = math.log1p
        overlap: list[float] | None = None
        by_conv: dict[int, tuple[float, float, float, float, float]] = {}
        out: list[float] = []
        for j in cands:
            pj, cj = parent[j], conv[j]
            if pj == _NONE:
                from_parent, answers_own, started, near = 0.0, 0.0, 1.0, 0.0
            else:
                from_parent = 1.0 if author[pj] == a_i else 0.0
                answers_own = 1.0 if pj == own else 0.0
                started = 0.0
                d = i - pj
                if d <= WINDOW:
                    if overlap is None:
                        stretch = self.t.overlap_rows(i, i + 1)
                        overlap = stretch.overlap[i - stretch.lo].tolist()
                    near = log1p(overlap[d]) / OVERLAP_SCALE
                else:
                    near = 0.0
            of_conv = by_conv.get(cj)
            if of_conv is None:
                of_conv = (
                    1.0 if cj == own_conv else 0.0,
                    log1p(size[cj]) / SIZE_SCALE,
                    1.0 if a_i in conv_authors[cj] else 0.0,
                    log1p(sum(map(idf.__getitem__, c_stems & conv_stems[cj]))) / OVERLAP_SCALE,
                    (log1p(max(date_i - date[tail[cj]], 0.0)) - pace) / GAP_SCALE,
                )
                by_conv[cj] = of_conv
            a_j = author[j]
            out += (
                from_parent,
                answers_own,
                started,
                1.0 if tail[cj] == j else 0.0,
                of_conv[0],
                log_replies[j],
                of_conv[1],
                near,
                1.0 if j == own_par else 0.0,
                1.0 if a_j == a_own_par else 0.0,
                1.0 if a_j in answered_own else 0.0,
                1.0 if named.get(a_j, recent - 1) >= recent else 0.0,
                of_conv[2],
                of_conv[3],
                of_conv[4],
            )
        return out


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

    def __init__(self, msgs: Sequence[Analysed] | TopicColumns, idf: Mapping[str, float]) -> None:
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
            cols, valid = pair_columns(self.arrays, lo, hi)
            message = message_features(self.arrays, lo, hi, cols, valid)
            b = Block(lo, np.moveaxis(cols, 0, -1), message, valid)
            self._block = b
        return b

    def sync(self, parents: Sequence[int | None], upto: int) -> None:
        """Commit ``parents[synced:upto]`` (indices; None or a negative one = new) to the
        dynamic state."""
        for k in range(self.synced, upto):
            p = parents[k]
            self.state.commit(k, None if p is None or p < 0 else p)
        self.synced = max(self.synced, upto)
