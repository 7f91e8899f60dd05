"""Conversations as a message graph: every message gets at most one earlier parent.

Invariants:
* Messages are processed per topic in ``chrono_key`` order; a parent is always an earlier,
  linkable message of the same topic, so the graph is a forest and never crosses topics.
* Precedence: an album's later photo links to the photo before it (an album is never split
  between conversations), then an explicit reply to a present message, then a valid stored
  agent answer, then the scorer. Every link records its reason and a confidence in [0, 1].
* Service messages and messages with neither text nor media get no link and are never
  parents: they belong to no conversation.
* Scorers read only a ``LinkContext`` and the decisions committed so far; the learned one
  ships its weights in ``link_weights.json`` next to this module (``make train-linker``)
  and refuses weights for other features.
"""

from __future__ import annotations

import functools
import gc
import json
import logging
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from threadpoolctl import ThreadpoolController

from chatseek_core.errors import InvalidValue
from chatseek_core.text import folded_for_words, normalise, normalised_words, stem
from chatseek_unitize import linkahead
from chatseek_unitize.cutting import chrono_key, is_unit_member, same_album
from chatseek_unitize.linkahead import StaticArrays
from chatseek_unitize.linkfeatures import (
    DYNAMIC_FEATURES,
    MESSAGE_FEATURES,
    PAIR_FEATURES,
    WINDOW,
    Analysed,
    TopicColumns,
    TopicInputs,
    informative,
    message_features,
    pair_columns,
)
from chatseek_unitize.model import Msg

__all__ = [
    "INPUT_FEATURES",
    "MAX_CANDIDATES",
    "PROBABILITY_PLACES",
    "REJECTED_KEPT",
    "WEIGHTS_FORMAT",
    "WEIGHTS_PATH",
    "Choice",
    "LearnedScorer",
    "Link",
    "LinkContext",
    "LinkReason",
    "LinkScorer",
    "RuleScorer",
    "ScoringContext",
    "addressing",
    "analyse_message",
    "author_of",
    "build_links",
    "collector_paused",
    "conversations",
    "name_forms",
    "name_owners",
    "one_blas_thread",
]

log = logging.getLogger(__name__)

MAX_CANDIDATES = WINDOW
RULE_MENTION_WINDOW = 50
RULE_SAME_AUTHOR_WINDOW = 10
RULE_SAME_AUTHOR_SECONDS = 300
RULE_MENTION_CONFIDENCE = 0.8
RULE_SAME_AUTHOR_CONFIDENCE = 0.6
RULE_NEW_CONFIDENCE = 0.5
REJECTED_KEPT = 3
PROBABILITY_PLACES = 4
"""A link's confidence and its runners-up's probabilities are rounded to this many places."""
SHORTLIST = 5
SCORE_BLOCK = 128
MIN_NAME_KEY_CHARS = 2
MIN_FIRST_NAME_CHARS = 3
WEIGHTS_PATH = Path(__file__).with_name("link_weights.json")
WEIGHTS_FORMAT = 2

LinkReason = Literal["album", "reply", "agent", "mention", "same_author", "scored", "new"]

_TOKEN_STRIP = ".,:;!?()[]{}\"'<>«»“”„…*"
_NAME_TRAILING = "_`-|^.:,!?"
_ADDRESS_ENDINGS = (":", ",")
# Russian names inflect: a name's base plus these endings covers the common case forms.
_RU_STEM_FINALS = frozenset("аяйоеь")
_RU_CASE_ENDINGS = ("", "а", "я", "у", "ю", "е", "и", "ы", "ой", "ей", "ом", "ем", "ым", "ью")
_CYRILLIC_START = "\u0400"
_CYRILLIC_END = "\u04ff"
_NO_NAMES: frozenset[str] = frozenset()
_ZERO = np.zeros((), dtype=np.float32)


# --- results ---


@dataclass(frozen=True, slots=True)
class Link:
    """The parent decision for one message.

    Attributes:
        msg_id: The message.
        parent_id: Its parent (an earlier message of the same topic), or None when it starts
            a conversation.
        reason: Why: 'album', 'reply', 'agent', 'mention', 'same_author', 'scored' or 'new'.
        confidence: In [0, 1]; 1.0 for album photos, replies and agent answers.
        rejected: Runner-up candidates the scorer considered, as (candidate id, score);
            candidate id -1 stands for "new conversation".
    """

    msg_id: int
    parent_id: int | None
    reason: LinkReason
    confidence: float
    rejected: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Choice:
    """A scorer's decision for message ``i`` of a context: a parent index or None."""

    parent: int | None
    reason: LinkReason
    confidence: float
    rejected: tuple[tuple[int, float], ...] = ()


# --- context ---


def _is_cyrillic(token: str) -> bool:
    return any(_CYRILLIC_START <= ch <= _CYRILLIC_END for ch in token)


def _inflections(name: str) -> set[str]:
    """Case forms of a Russian first name ("Иван" → "ивана", "ивану", "иваном", ...)."""
    base = name[:-1] if name[-1] in _RU_STEM_FINALS else name
    if len(base) < MIN_FIRST_NAME_CHARS:
        return set()
    return {base + ending for ending in _RU_CASE_ENDINGS}


def name_forms(name: str) -> set[str]:
    """The forms under which a sender may be named in text: full name, nick, first name."""
    full = normalise(name).strip(_TOKEN_STRIP)
    keys: set[str] = set()
    if len(full) >= MIN_NAME_KEY_CHARS:
        keys.add(full)
        keys.add(full.lstrip("@"))
        bare = full.rstrip(_NAME_TRAILING)
        if len(bare) >= MIN_NAME_KEY_CHARS:
            keys.add(bare)
    parts = full.split()
    if len(parts) > 1 and len(parts[0]) >= MIN_FIRST_NAME_CHARS:
        keys.add(parts[0])
    if parts and _is_cyrillic(parts[0]):
        keys.update(_inflections(parts[0]))
    return keys


@dataclass(slots=True)
class _Info:
    author: int | str
    date: int
    # The tokens that are name forms of someone in the topic, the only ones read later: the
    # whole token set of every message of a big topic was a third of a build's memory.
    names: frozenset[str]
    lead: frozenset[str]
    # Distinct, in no order: a tuple takes far less than a set's hash table, and only the
    # idf pass and ``analysed`` read them.
    stems: tuple[str, ...]
    question: bool
    length: int


_TOKENS: dict[str, tuple[str, tuple[str, ...]]] = {}
"""Each whitespace-separated token of normalised text met lately: the token stripped, and
the stems of its words. A chat repeats its tokens, so most are looked up, not analysed."""
_TOKENS_KEPT = 1 << 13
"""The most ``_TOKENS`` holds (about 3 MiB with its stems, measured on the Russian and tgif
chats); when full it starts again."""


def _token(raw: str) -> tuple[str, tuple[str, ...]]:
    """``raw`` stripped, and the distinct stems of its words (remembered in ``_TOKENS``).

    Words never span whitespace, so a text's words are its tokens' words; the stripped
    characters are not word characters, and a token that is all word characters
    (``isalnum``, exactly the regex's ``[^\\W_]``) is one word.
    """
    token = raw.strip(_TOKEN_STRIP)
    words = [token] if token.isalnum() else normalised_words(token)
    got = token, tuple({stem(w) for w in words})
    if len(_TOKENS) >= _TOKENS_KEPT:
        _TOKENS.clear()
    _TOKENS[raw] = got
    return got


def author_of(m: Msg) -> int | str:
    return m.sender_id if m.sender_id is not None else normalise(m.sender_name)


def analyse_message(m: Msg, author: int | str, known: frozenset[str]) -> _Info:
    """What linking reads of one message; ``known`` holds every name form of the topic."""
    text = m.text
    if m.media_text:
        text = f"{text} {m.media_text}" if text else m.media_text
    # Split on whitespace, which is all normalise would fold further.
    norm = folded_for_words(text)
    raw = norm.split()
    tokens: set[str] = set()
    stem_set: set[str] = set()
    cache = _TOKENS
    for r in raw:
        got = cache.get(r)
        if got is None:
            got = _token(r)
        tokens.add(got[0])
        stem_set.update(got[1])
    tokens.discard("")
    stems = tuple(stem_set)
    lead: set[str] = set()
    if raw:
        first = raw[0]
        if first.endswith(_ADDRESS_ENDINGS):
            lead.add(first[:-1].lstrip("@"))
        elif len(raw) > 1 and raw[1].endswith(_ADDRESS_ENDINGS):
            lead.add(f"{first} {raw[1][:-1]}")
    if "@" in norm:
        for t in raw:
            if t.startswith("@") and len(t) > 1:
                lead.add(t[1:].strip(_TOKEN_STRIP))
    for mention in m.mentions:
        key = normalise(mention).lstrip("@")
        lead.add(key)
        tokens.add(key)
    names = tokens & known
    lead &= known
    return _Info(
        author=author,
        date=m.date,
        names=frozenset(names) if names else _NO_NAMES,
        lead=frozenset(lead) if lead else _NO_NAMES,
        stems=stems,
        question="?" in text,
        length=len(text),
    )


class LinkContext:
    """The linkable messages of one topic, in order, with what has been decided so far.

    Scorers read it; ``commit`` records each decision in ``parent``. Indices, not message
    ids, address messages here.
    """

    def __init__(self, msgs: Sequence[Msg], idf: Mapping[str, float]) -> None:
        self.msgs: list[Msg] = list(msgs)
        self.index = {m.msg_id: k for k, m in enumerate(self.msgs)}
        self.idf = idf
        self._name_keys: dict[int | str, set[str]] = {}
        seen: set[tuple[int | str, str]] = set()
        authors = [author_of(m) for m in self.msgs]
        for m, author in zip(self.msgs, authors, strict=True):
            if (author, m.sender_name) not in seen:
                seen.add((author, m.sender_name))
                self._name_keys.setdefault(author, set()).update(name_forms(m.sender_name))
        known = frozenset(chain.from_iterable(self._name_keys.values()))
        self.info = [analyse_message(m, a, known) for m, a in zip(self.msgs, authors, strict=True)]
        self.parent: list[int | None] = [None] * len(self.msgs)
        # Which messages the scorer will be asked about (``build_links`` clears the ones a
        # reply or an agent answer decides); a hint, so scorers may skip the others' work.
        self.scored: list[bool] = [True] * len(self.msgs)
        self.decided = 0

    def keep_stems(self, kept: frozenset[str]) -> None:
        """Cut every message's stems to ``kept``, once the idf pass has read them whole: the
        features read only the informative stems, and a big topic holds one stem list per
        message until its build ends."""
        for inf in self.info:
            inf.stems = tuple([s for s in inf.stems if s in kept])

    def name_keys(self, author: int | str) -> set[str]:
        """Every name form seen for ``author`` in this topic."""
        return self._name_keys.get(author, set())

    def candidates(self, i: int, limit: int = MAX_CANDIDATES) -> range:
        """Indices of the earlier messages message ``i`` may link to (nearest last)."""
        return range(max(0, i - limit), i)

    def analysed(self) -> list[Analysed]:
        """The messages as the learned features read them: authors numbered, names resolved.

        A message addresses the authors whose name forms its lead (``nick:``, ``@nick``, a
        mention entity) holds, and mentions those named anywhere in it; never its own author.
        """
        numbers: dict[int | str, int] = {}
        for inf in self.info:
            numbers.setdefault(inf.author, len(numbers))
        owners = name_owners(self._name_keys, numbers)
        out: list[Analysed] = []
        append = out.append
        for inf in self.info:
            me = numbers[inf.author]
            addressed, mentioned = addressing(inf.names, inf.lead, me, owners)
            append(
                Analysed(
                    me,
                    inf.date,
                    addressed,
                    mentioned,
                    inf.stems,
                    inf.question,
                    inf.length,
                )
            )
        return out

    def columns(self) -> list[Analysed]:
        """What a scorer's features read (``ScoringContext``): here ``analysed()``."""
        return self.analysed()

    def __len__(self) -> int:
        return len(self.msgs)

    def msg_id(self, k: int) -> int:
        """The id of message ``k``."""
        return self.msgs[k].msg_id

    def commit(self, i: int, parent: int | None) -> None:
        """Record the decision for message ``i`` (messages must be committed in order).

        Raises:
            InvalidValue: out of order, or a parent that is not an earlier message.
        """
        if i != self.decided:
            raise InvalidValue("decisions must be committed in chronological order.")
        if parent is not None and not 0 <= parent < i:
            raise InvalidValue("a parent must be an earlier message of the same topic.")
        self.parent[i] = parent
        self.decided += 1


def name_owners(
    name_keys: Mapping[int | str, set[str]], numbers: Mapping[int | str, int]
) -> dict[str, list[int]]:
    """For each name form of a topic, the numbers of the authors it names."""
    owners: dict[str, list[int]] = {}
    for author, keys in name_keys.items():
        for key in keys:
            owners.setdefault(key, []).append(numbers[author])
    return owners


def addressing(
    names: frozenset[str], lead: frozenset[str], me: int, owners: Mapping[str, list[int]]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The authors (by number) a message addresses and those it mentions: the owners of the
    name forms of its lead, and of every name form in it, never its own author ``me``."""
    named = names & owners.keys()
    lead = lead & owners.keys() if lead else _NO_NAMES
    if lead:
        named |= lead
        addressed = tuple(sorted({a for k in lead for a in owners[k] if a != me}))
    else:
        addressed = ()
    if named:
        mentioned = tuple(sorted({a for k in named for a in owners[k] if a != me}))
    else:
        mentioned = ()
    return addressed, mentioned


# --- scorers ---


class ScoringContext(Protocol):
    """What the learned scorer reads of a topic: a ``LinkContext``, or a topic streamed from
    the store (``linkstream``), which holds no message."""

    @property
    def idf(self) -> Mapping[str, float]:
        """The chat's idf by stem."""
        ...

    @property
    def parent(self) -> Sequence[int | None]:
        """The decisions so far, by message: a parent index, or None for a new one."""
        ...

    @property
    def scored(self) -> Sequence[int]:
        """Which messages the scorer will be asked about (a hint: see ``LinkContext``)."""
        ...

    def __len__(self) -> int: ...

    def msg_id(self, k: int) -> int:
        """The id of message ``k``."""
        ...

    def columns(self) -> Sequence[Analysed] | TopicColumns:
        """The messages as the features read them."""
        ...


class LinkScorer(Protocol):
    """Chooses a parent (or none) for messages that have no reply and no agent answer."""

    def prepare(self, ctx: LinkContext) -> None:
        """Called once per topic context before any ``choose``."""

    def choose(self, ctx: LinkContext, i: int) -> Choice:
        """The decision for message ``i``; messages before ``i`` are already committed."""
        ...


class RuleScorer:
    """DESIGN's baseline rules.

    A mention of an earlier sender within the last ``RULE_MENTION_WINDOW`` messages links to
    that sender's latest message there (addressing wins over a mention elsewhere in the
    text); otherwise the same author within ``RULE_SAME_AUTHOR_WINDOW`` messages and
    ``RULE_SAME_AUTHOR_SECONDS`` continues; otherwise a new conversation.
    """

    def prepare(self, ctx: LinkContext) -> None:
        """Nothing to prepare: the rules read only the context."""

    def choose(self, ctx: LinkContext, i: int) -> Choice:
        """Apply the rules to message ``i`` (see the class docstring)."""
        c = ctx.info[i]
        mentioned: int | None = None
        for j in reversed(ctx.candidates(i, RULE_MENTION_WINDOW)):
            p = ctx.info[j]
            if p.author == c.author:
                continue
            keys = ctx.name_keys(p.author)
            if keys & c.lead:
                return Choice(j, "mention", RULE_MENTION_CONFIDENCE)
            if mentioned is None and keys & c.names:
                mentioned = j
        if mentioned is not None:
            return Choice(mentioned, "mention", RULE_MENTION_CONFIDENCE)
        for j in reversed(ctx.candidates(i, RULE_SAME_AUTHOR_WINDOW)):
            p = ctx.info[j]
            if p.author == c.author:
                if c.date - p.date <= RULE_SAME_AUTHOR_SECONDS:
                    return Choice(j, "same_author", RULE_SAME_AUTHOR_CONFIDENCE)
                break
        return Choice(None, "new", RULE_NEW_CONFIDENCE)


INPUT_FEATURES: tuple[str, ...] = (
    *PAIR_FEATURES,
    *MESSAGE_FEATURES,
    "is_new",
    *DYNAMIC_FEATURES,
)
_P_END = len(PAIR_FEATURES)
_M_END = _P_END + len(MESSAGE_FEATURES)
_NEW_ROW = _M_END
_D_START = _M_END + 1


class LearnedScorer:
    """A two-layer network ranking "new conversation" against the last ``WINDOW`` messages.

    Each option is a row of ``INPUT_FEATURES`` (see ``linkfeatures``): a candidate's pair,
    message and dynamic features, or, for "new", the message features and ``is_new``. Its
    score is ``w2 · relu(W1ᵀ x + b1)``, plus ``new_bias`` for "new" (a decoding constant
    chosen on dev); a softmax over the options gives the confidence, the best one wins.

    Speed: the first layer is split by feature group. The pair and message part is one
    matrix product per block of messages; it also ranks the candidates with the dynamic part
    left out, and only the best ``SHORTLIST`` of them get their dynamic features (which read
    the decisions so far, so they are computed per message) and a full score. The others
    are never chosen, but their scores without the dynamic part count in the softmax's
    total, so a confidence keeps the doubt they stand for (with them left out, the
    confidences of a five-candidate shortlist ran high: on the IRC files twice the
    calibration error of ten; with them, about that of ten).

    Weights come from ``link_weights.json`` (written by ``make train-linker``).

    Args:
        weights: The parsed weights document (``WEIGHTS_PATH`` when None).

    Raises:
        InvalidValue: weights in another format, for other features, or of the wrong shape.
    """

    def __init__(self, weights: Mapping[str, Any] | None = None, *, ahead: bool = True) -> None:
        doc = weights if weights is not None else json.loads(WEIGHTS_PATH.read_text("utf-8"))
        if doc.get("format") != WEIGHTS_FORMAT:
            raise InvalidValue("link weights are in an unknown format.")
        if tuple(doc.get("features", ())) != INPUT_FEATURES:
            raise InvalidValue("link weights were trained for other features; retrain them.")
        model = doc.get("model")
        if not isinstance(model, dict):
            raise InvalidValue("link weights have no model.")
        w1 = np.asarray(model.get("w1", ()), dtype=np.float32)
        b1 = np.asarray(model.get("b1", ()), dtype=np.float32)
        w2 = np.asarray(model.get("w2", ()), dtype=np.float32)
        if w1.ndim != 2 or w1.shape[0] != len(INPUT_FEATURES) or b1.shape != (w1.shape[1],):
            raise InvalidValue("link weights have the wrong shape.")
        if w2.shape != b1.shape:
            raise InvalidValue("link weights have the wrong shape.")
        self.w_pair = w1[:_P_END]
        self.w_message = w1[_P_END:_M_END]
        self.w_new = w1[_NEW_ROW]
        self.w_dynamic = w1[_D_START:]
        self.b1, self.w2 = b1, w2
        self.new_bias = float(model.get("new_bias", 0.0))
        self.inputs: TopicInputs | None = None
        self._static: _Static | None = None
        self._buffers: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._hidden = np.empty((SHORTLIST, len(b1)), dtype=np.float32)
        self.ahead = ahead and linkahead.available()
        self._ahead: linkahead.Ahead | None = None

    def prepare(self, ctx: ScoringContext) -> None:
        """Compute the topic's arrays; decisions are read back from ``ctx`` as they come.

        A topic of at least ``AHEAD_MIN_SCORED`` scored messages has its static blocks
        computed ahead by a child process (``linkahead``); ``close`` ends it.
        """
        self.close()
        self.inputs = TopicInputs(ctx.columns(), ctx.idf)
        self._static = None
        scored = ctx.scored
        if self.ahead and sum(scored) >= linkahead.AHEAD_MIN_SCORED:
            n = self.inputs.arrays.n

            def rows(lo: int) -> list[int]:  # the messages ``_block`` will ask about
                return [r for r in range(lo, min(lo + SCORE_BLOCK, n)) if scored[r]]

            blocks = [lo for lo in range(0, n, SCORE_BLOCK) if rows(lo)]
            try:
                self._ahead = linkahead.Ahead(
                    blocks,
                    lambda lo: self._compute(lo, rows(lo)),
                    min(SHORTLIST, WINDOW),
                    len(self.b1),
                )
            except OSError as exc:  # no process to spare: the blocks are computed here
                log.warning("conversation build runs in one process: %s", exc)

    def close(self) -> None:
        """End the child computing this topic's blocks ahead, if there is one."""
        if self._ahead is not None:
            self._ahead.close()
            self._ahead = None

    def _block(self, ctx: ScoringContext, i: int) -> _Static:
        """The static part of the block of ``SCORE_BLOCK`` messages holding ``i``, for the
        messages of it ``ctx.scored`` lists (and ``i``)."""
        assert self.inputs is not None
        st = self._static
        if st is not None and st.lo <= i < st.lo + len(st.at) and st.at[i - st.lo] >= 0:
            return st
        lo = i - i % SCORE_BLOCK
        hi = min(lo + SCORE_BLOCK, self.inputs.arrays.n)
        scored = ctx.scored
        picked = [r for r in range(lo, hi) if scored[r] or r == i]
        a = self._ahead.take(lo, picked) if self._ahead is not None else None
        if a is None:
            a = self._compute(lo, picked)
        at = [-1] * (hi - lo)
        for k, r in enumerate(picked):
            at[r - lo] = k
        short = a.top.tolist()
        # Only the first ``keep`` messages of a topic have fewer candidates than that.
        for row, r in enumerate(picked):
            if r >= a.top.shape[1]:
                break
            del short[row][int(a.lens[row]) :]
        rest = a.rest.tolist()
        st = _Static(lo, at, a.new.tolist(), short, a.short_pre, rest)
        self._static = st
        return st

    def _compute(self, lo: int, picked: Sequence[int]) -> StaticArrays:
        """Block ``lo``'s static arrays for its messages ``picked`` (also run ahead in a
        child process: see ``linkahead``)."""
        assert self.inputs is not None
        t = self.inputs.arrays
        hi = min(lo + SCORE_BLOCK, t.n)
        rows = None if len(picked) == hi - lo else np.asarray(picked, dtype=np.int64)
        n, hidden = len(picked), len(self.b1)
        if self._buffers is None:
            self._buffers = (
                np.empty((len(PAIR_FEATURES), SCORE_BLOCK, WINDOW), dtype=np.float32),
                np.empty((SCORE_BLOCK * WINDOW, hidden), dtype=np.float32),
                np.empty((SCORE_BLOCK * WINDOW, hidden), dtype=np.float32),
            )
        cols_buf, pre_buf, act_buf = self._buffers
        cols, valid = pair_columns(t, lo, hi, cols_buf, rows)
        message = message_features(t, lo, hi, cols, valid, rows)
        shared = message @ self.w_message + self.b1
        # One product over every candidate of the block (the feature-major columns are a
        # transposed view, which BLAS reads as is); buffers are reused, as fresh arrays this
        # size would be paged in again for every block.
        flat = pre_buf[: n * WINDOW]
        np.matmul(cols.reshape(len(PAIR_FEATURES), n * WINDOW).T, self.w_pair, out=flat)
        pre = flat.reshape(n, WINDOW, hidden)
        pre += shared[:, None, :]
        act = np.maximum(flat, 0.0, out=act_buf[: n * WINDOW])
        static = (act @ self.w2).reshape(n, WINDOW)
        static[~valid] = -np.inf
        keep = min(SHORTLIST, WINDOW)
        top = np.argpartition(-static, keep - 1, axis=1)[:, :keep]
        rest = _rest(static, top)
        lens = np.full(n, keep, dtype=np.int64)
        # Only the first ``keep`` messages of a topic have fewer candidates than that: their
        # real ones go first (in partition order), and only those are listed.
        for row in [k for k, r in enumerate(picked) if r < keep]:
            cols_row = top[row]
            real = valid[row, cols_row]
            top[row] = np.concatenate((cols_row[real], cols_row[~real]))
            lens[row] = int(valid[row].sum())
        short_pre = pre[np.arange(n)[:, None], top]
        new = np.maximum(shared + self.w_new, 0.0) @ self.w2
        return StaticArrays(lo, np.asarray(picked, dtype=np.int64), new, top, lens, short_pre, rest)

    def _raw(self, ctx: ScoringContext, i: int) -> tuple[list[int], list[float], float | None]:
        """Message ``i``'s shortlisted candidates (indices), the raw scores of "new" (first)
        and of each of them, and the candidates off the shortlist as one log-sum-exp of their
        static scores (None: there are none)."""
        if self.inputs is None or self.inputs.arrays.n != len(ctx):
            self.prepare(ctx)
        inputs = self.inputs
        assert inputs is not None
        inputs.sync(ctx.parent, i)
        st = self._block(ctx, i)
        row = st.at[i - st.lo]
        cols = st.short[row]
        base = i - WINDOW
        cands = [base + c for c in cols]
        raw = [st.new[row] + self.new_bias]
        rest = st.rest[row]
        if cols:
            # A handful of small products a message: array methods and a zero-dimensional
            # zero skip the dispatch and scalar conversion that cost more than the products.
            k = len(cols)
            flat = inputs.state.features_flat(i, cands)
            dynamic = np.array(flat, dtype=np.float32).reshape(k, len(DYNAMIC_FEATURES))
            if k == SHORTLIST:
                hidden, pre = self._hidden, st.short_pre[row]
            else:
                hidden, pre = self._hidden[:k], st.short_pre[row, :k]
            dynamic.dot(self.w_dynamic, out=hidden)
            hidden += pre
            np.maximum(hidden, _ZERO, out=hidden)
            raw += hidden.dot(self.w2).tolist()
        return cands, raw, None if math.isnan(rest) else rest

    def scores(self, ctx: ScoringContext, i: int) -> tuple[list[int], np.ndarray]:
        """The shortlisted candidates of message ``i`` (indices) and the probabilities of
        "new" (first) and of each of them; they fall short of 1 by the share of the
        candidates off the list."""
        cands, raw, rest = self._raw(ctx, i)
        return cands, np.asarray(_softmax(raw, rest))

    def choose(self, ctx: ScoringContext, i: int) -> Choice:
        """The most probable option for message ``i``, with runners-up in ``rejected``."""
        cands, raw, rest = self._raw(ctx, i)
        probs = _softmax(raw, rest)
        # Stable: equal probabilities keep option order ("new" first, then the shortlist's).
        order = sorted(range(len(probs)), key=probs.__getitem__, reverse=True)
        best = order[0]
        msg_id = ctx.msg_id
        rejected = tuple(
            [
                (-1 if k == 0 else msg_id(cands[k - 1]), round(probs[k], PROBABILITY_PLACES))
                for k in order[1 : 1 + REJECTED_KEPT]
            ]
        )
        confidence = round(probs[best], PROBABILITY_PLACES)
        if best == 0:
            return Choice(None, "new", confidence, rejected)
        return Choice(cands[best - 1], "scored", confidence, rejected)


@dataclass(frozen=True, slots=True)
class _Static:
    """What a block of messages gets before any decision: for message ``lo + r`` at row
    ``at[r]`` (-1: not computed), its "new" score, its shortlist (candidate columns) and
    their pre-activations."""

    lo: int
    at: list[int]
    new: list[float]
    short: list[list[int]]
    short_pre: np.ndarray  # (messages, SHORTLIST, hidden) float32
    rest: list[float]  # per message: log-sum-exp of the static scores off the shortlist, or NaN


def _rest(static: np.ndarray, top: np.ndarray) -> np.ndarray:
    """Per row of ``static`` (-inf: no candidate), the log of the summed exponentials of the
    scores whose columns ``top`` does not list; NaN for a row with no such score."""
    off = static.astype(np.float64)
    off[np.arange(len(off))[:, None], top] = -np.inf
    peak = off.max(axis=1, initial=-np.inf)
    some = np.isfinite(peak)
    base = np.where(some, peak, 0.0)
    summed = np.exp(off - base[:, None]).sum(axis=1)
    with np.errstate(divide="ignore"):
        return np.where(some, base + np.log(summed), np.nan)


def _softmax(raw: Sequence[float], rest: float | None = None) -> list[float]:
    """The probabilities of the ``raw`` options; ``rest`` (a log-sum-exp of options no one
    may choose) counts in the total only."""
    top = max(raw) if rest is None else max(max(raw), rest)
    ex = [math.exp(r - top) for r in raw]
    total = sum(ex) + (0.0 if rest is None else math.exp(rest - top))
    return [e / total for e in ex]


# --- building ---


def _idf(contexts: Iterable[LinkContext]) -> dict[str, float]:
    df: Counter[str] = Counter()
    total = 0
    for ctx in contexts:
        total += len(ctx.info)
        df.update(chain.from_iterable(inf.stems for inf in ctx.info))
    return {s: math.log((total + 1) / (n + 1)) for s, n in df.items()}


def build_links(
    msgs: Iterable[Msg],
    *,
    agent_answers: Mapping[int, int | None] | None = None,
    scorer: LinkScorer | None = None,
) -> list[Link]:
    """Give every linkable message of a chat its parent decision.

    Per topic, in ``chrono_key`` order: (0) a photo right after another of its album links
    to it (reason 'album'); (1) a reply to an earlier linkable message of the same topic
    links there (reason 'reply'); (2) else a stored agent answer applies when it
    says "new conversation" (None) or names an earlier linkable message of the same topic
    (reason 'agent'; other answers are ignored); (3) else the scorer decides.

    Args:
        msgs: The chat's messages in any order; service and empty messages get no link.
        agent_answers: ``{msg_id: parent id or None}``, already filtered for staleness.
        scorer: Defaults to ``LearnedScorer()`` with the shipped weights.

    Returns:
        One ``Link`` per linkable message, chronological.
    """
    scorer = scorer if scorer is not None else LearnedScorer()
    answers = agent_answers or {}
    with collector_paused(), one_blas_thread():
        groups: dict[int | None, list[Msg]] = {}
        for m in msgs:
            if is_unit_member(m):
                groups.setdefault(m.topic_id, []).append(m)
        contexts = [LinkContext(sorted(g, key=chrono_key), {}) for g in groups.values()]
        idf = _idf(contexts)
        kept = frozenset(informative(idf))
        for ctx in contexts:
            ctx.keep_stems(kept)
        links: list[tuple[tuple[int, int], Link]] = []
        try:
            for ctx in contexts:
                ctx.idf = idf
                fixed = [_by_precedence(ctx, i, m, answers) for i, m in enumerate(ctx.msgs)]
                ctx.scored = [link is None for link in fixed]
                scorer.prepare(ctx)
                for i, m in enumerate(ctx.msgs):
                    link = fixed[i] or _scored(ctx, i, m, scorer)
                    ctx.commit(i, None if link.parent_id is None else ctx.index[link.parent_id])
                    links.append((chrono_key(m), link))
        finally:
            if isinstance(scorer, LearnedScorer):
                scorer.close()
        links.sort(key=lambda kv: kv[0])
    log.debug("built %d links over %d topics", len(links), len(contexts))
    return [link for _, link in links]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector, if it runs, until the block ends.

    Linking allocates several long-lived containers per message (sets, tuples, lists) and no
    reference cycles; every collection the allocations trigger walks all of them again, which
    cost about 40% of a 100k-message build. The collector is process-wide: a build running
    beside another may see it re-enabled early, which costs only speed.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        # What the block allocated and kept sits in the youngest generation, which the first
        # allocation after ``enable`` would walk whole (9% of a 100k-message build): hand it
        # to the oldest generation instead, as ``freeze``/``unfreeze`` do without a walk. It
        # is collected there as ever, at the next full collection.
        gc.freeze()
        gc.unfreeze()
        gc.enable()


@functools.cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run BLAS on one thread until the block ends.

    The scorer's products are small (a 128-message block is 6,400 rows by 26 features) and
    come between stretches of Python. OpenBLAS's helper threads spin-wait between calls, so
    they took a second core for little: on the shared 2-core machine, with other load, the
    100k bench chat built at ~4,700 msgs/s with them and ~11,500 without. The limit is
    process-wide while a build runs.
    """
    with _blas().limit(limits=1, user_api="blas"):
        yield


def _by_precedence(
    ctx: LinkContext, i: int, m: Msg, answers: Mapping[int, int | None]
) -> Link | None:
    """The link an explicit reply or a valid agent answer gives message ``i``, if any."""
    if i > 0 and same_album(ctx.msgs[i - 1], m):
        return Link(m.msg_id, ctx.msgs[i - 1].msg_id, "album", 1.0)
    if m.reply_to is not None:
        target = ctx.index.get(m.reply_to)
        if target is not None and target < i:
            return Link(m.msg_id, m.reply_to, "reply", 1.0)
    if m.msg_id in answers:
        answer = answers[m.msg_id]
        if answer is None:
            return Link(m.msg_id, None, "agent", 1.0)
        target = ctx.index.get(answer)
        if target is not None and target < i:
            return Link(m.msg_id, answer, "agent", 1.0)
    return None


def _scored(ctx: LinkContext, i: int, m: Msg, scorer: LinkScorer) -> Link:
    choice = scorer.choose(ctx, i)
    parent_id = None if choice.parent is None else ctx.msgs[choice.parent].msg_id
    return Link(m.msg_id, parent_id, choice.reason, choice.confidence, choice.rejected)


def conversations(links: Iterable[Link]) -> list[list[int]]:
    """Group links into conversations: the connected components of the parent graph.

    A link whose parent is not among ``links`` starts a conversation of its own.

    Returns:
        Conversations as message-id lists in link order, ordered by their first message.
    """
    ordered = list(links)
    up: dict[int, int] = {link.msg_id: link.msg_id for link in ordered}

    def find(x: int) -> int:
        while up[x] != x:
            up[x] = up[up[x]]
            x = up[x]
        return x

    for link in ordered:
        if link.parent_id is not None and link.parent_id in up:
            a, b = find(link.msg_id), find(link.parent_id)
            if a != b:
                up[a] = b
    groups: dict[int, list[int]] = {}
    with collector_paused():  # one list per conversation, as build_links
        for link in ordered:
            groups.setdefault(find(link.msg_id), []).append(link.msg_id)
    return list(groups.values())
