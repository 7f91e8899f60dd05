"""Conversations as a message graph: every message gets at most one earlier parent.

Invariants:
* Messages are processed per topic in ``chrono_key`` order; a parent is always an earlier,
  linkable message of the same topic, so the graph is a forest and never crosses topics.
* Precedence: an explicit reply to a present message, then a valid stored agent answer, then
  the scorer. Every link records its reason and a confidence in [0, 1].
* Service messages and messages with neither text nor media get no link and are never
  parents: they belong to no conversation.
* Scorers are pure over a ``LinkContext``; the learned one ships its weights in
  ``link_weights.json`` next to this module and refuses weights for other features.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from chatseek_core.errors import InvalidValue
from chatseek_core.text import normalise, stems
from chatseek_unitize.cutting import chrono_key, is_unit_member
from chatseek_unitize.model import Msg

__all__ = [
    "MAX_CANDIDATES",
    "NEW_FEATURES",
    "PAIR_FEATURES",
    "WEIGHTS_PATH",
    "Choice",
    "LearnedScorer",
    "Link",
    "LinkContext",
    "LinkReason",
    "LinkScorer",
    "RuleScorer",
    "build_links",
    "conversations",
    "featurize",
]

log = logging.getLogger(__name__)

MAX_CANDIDATES = 50
RULE_MENTION_WINDOW = 50
RULE_SAME_AUTHOR_WINDOW = 10
RULE_SAME_AUTHOR_SECONDS = 300
RULE_MENTION_CONFIDENCE = 0.8
RULE_SAME_AUTHOR_CONFIDENCE = 0.6
RULE_NEW_CONFIDENCE = 0.5
INTERACTION_WINDOW = 100
REJECTED_KEPT = 3
MIN_NAME_KEY_CHARS = 2
MIN_FIRST_NAME_CHARS = 3
SHORT_MESSAGE_CHARS = 20
LONG_MESSAGE_CHARS = 120
RECENT_OWN_SECONDS = 300
RARE_WORD_IDF = 5.0
SIMILARITY_Z_CLIP = 3.0
SIMILARITY_TOP_K = 3
WEIGHTS_PATH = Path(__file__).with_name("link_weights.json")
WEIGHTS_FORMAT = 1

LinkReason = Literal["reply", "agent", "mention", "same_author", "scored", "new"]

_TOKEN_STRIP = ".,:;!?()[]{}\"'<>«»“”„…*"
_NAME_TRAILING = "_`-|^.:,!?"
_ADDRESS_ENDINGS = (":", ",")
_ANSWER_CUES = frozenset(
    "yes yeah yep yup no nope nah ok okay sure thanks thank thx ty np right correct exactly "
    "да нет ага угу ок окей спасибо конечно точно верно неа".split()
)
_CONTINUATION_CUES = frozenset(
    "and but or also so then because plus anyway btw и а но или также тоже ещё еще потом "
    "так то потому плюс кстати".split()
)
_GREETING_CUES = frozenset(
    "hi hello hey hiya greetings howdy morning evening anyone anybody someone somebody "
    "привет приветствую здравствуйте добрый всем ребят ребята народ коллеги подскажите "
    "кто-нибудь кто-то".split()
)
# Russian names inflect: a name's base plus these endings covers the common case forms.
_RU_STEM_FINALS = frozenset("аяйоеь")
_RU_CASE_ENDINGS = ("", "а", "я", "у", "ю", "е", "и", "ы", "ой", "ей", "ом", "ем", "ым", "ью")
_CYRILLIC_START = "\u0400"
_CYRILLIC_END = "\u04ff"

# Bin edges (ascending): v falls in the first bin whose upper bound is >= v; the last is open.
_DISTANCE_BINS = (1, 2, 3, 4, 6, 10, 20)
_GAP_BINS_S = (15, 45, 120, 300, 900, 3600, 21600)
_OVERLAP_BINS = (0.0, 3.0, 6.0, 10.0)
_PREV_GAP_BINS_S = (30, 120, 600, 3600)


def _bin_names(prefix: str, edges: Sequence[float]) -> list[str]:
    return [f"{prefix}<={e:g}" for e in edges] + [f"{prefix}>{edges[-1]:g}"]


PAIR_FEATURES: tuple[str, ...] = tuple(
    _bin_names("dist", _DISTANCE_BINS)
    + _bin_names("gap_s", _GAP_BINS_S)
    + _bin_names("overlap", _OVERLAP_BINS)
    + [
        "same_author",
        "same_author_latest",
        "same_author_dist<=1",
        "same_author_dist<=3",
        "same_author_dist<=10",
        "same_author_c_continues",
        "same_author_same_addressee",
        "same_author_new_addressee",
        "c_addresses_p",
        "c_addresses_p_latest",
        "c_mentions_p",
        "c_mentions_p_latest",
        "p_addresses_c",
        "p_addresses_c_latest",
        "p_mentions_c",
        "c_addresses_other",
        "p_addresses_other",
        "p_author_latest",
        "p_author_superseded_2plus",
        "pair_interacted",
        "p_question",
        "c_question",
        "p_question_c_answer_cue",
        "p_greeting",
        "p_answer_cue",
        "p_short",
        "c_short_dist<=2",
        "p_started_conversation",
        "p_conversation_tail",
        "p_in_own_conversation",
        "p_own_conversation_tail",
        "p_conversation_has_c_author",
        "p_answers_c_author",
        "p_answers_c_own_prev",
        "p_author_is_partner",
        "p_has_replies",
        "p_has_replies_2plus",
        "p_conversation_size_3plus",
        "p_same_third_party",
        "rare_shared_word",
        "similarity_z",
        "similarity_best",
        "similarity_top3",
    ]
)

NEW_FEATURES: tuple[str, ...] = tuple(
    ["bias", "no_candidates"]
    + _bin_names("prev_gap_s", _PREV_GAP_BINS_S)
    + _bin_names("max_overlap", _OVERLAP_BINS)
    + [
        "c_addresses_candidate",
        "c_mentions_candidate",
        "c_addresses_unknown",
        "c_author_in_candidates",
        "c_author_recent",
        "c_addressed_by_candidate",
        "c_question",
        "c_greeting",
        "c_answer_cue",
        "c_short",
        "c_long",
    ]
)

_P = {name: k for k, name in enumerate(PAIR_FEATURES)}
_N = {name: k for k, name in enumerate(NEW_FEATURES)}


# --- results ---


@dataclass(frozen=True, slots=True)
class Link:
    """The parent decision for one message.

    Attributes:
        msg_id: The message.
        parent_id: Its parent (an earlier message of the same topic), or None when it starts
            a conversation.
        reason: Why: 'reply', 'agent', 'mention', 'same_author', 'scored' or 'new'.
        confidence: In [0, 1]; 1.0 for replies and agent answers.
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


def _name_keys(name: str) -> set[str]:
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
    tokens: frozenset[str]
    lead: frozenset[str]
    stems: frozenset[str]
    question: bool
    answer_cue: bool
    continuation: bool
    greeting: bool
    length: int


def _analyse(m: Msg) -> _Info:
    text = " ".join(p for p in (m.text, m.media_text or "") if p)
    norm = normalise(text)
    raw = norm.split()
    tokens = {t.strip(_TOKEN_STRIP) for t in raw}
    tokens.discard("")
    lead: set[str] = set()
    if raw:
        first = raw[0]
        if first.endswith(_ADDRESS_ENDINGS):
            lead.add(first[:-1].lstrip("@"))
        elif len(raw) > 1 and raw[1].endswith(_ADDRESS_ENDINGS):
            lead.add(f"{first} {raw[1][:-1]}")
    for t in raw:
        if t.startswith("@") and len(t) > 1:
            lead.add(t[1:].strip(_TOKEN_STRIP))
    for mention in m.mentions:
        key = normalise(mention).lstrip("@")
        lead.add(key)
        tokens.add(key)
    stem_set = frozenset(stems(text))
    first_word = raw[0].strip(_TOKEN_STRIP) if raw else ""
    author: int | str = m.sender_id if m.sender_id is not None else normalise(m.sender_name)
    return _Info(
        author=author,
        date=m.date,
        tokens=frozenset(tokens),
        lead=frozenset(lead),
        stems=stem_set,
        question="?" in text,
        answer_cue=first_word in _ANSWER_CUES,
        continuation=first_word in _CONTINUATION_CUES,
        greeting=first_word in _GREETING_CUES or bool(tokens & _GREETING_CUES),
        length=len(text),
    )


class LinkContext:
    """The linkable messages of one topic, in order, with what has been decided so far.

    Scorers read it; ``commit`` records each decision so later features can use the
    conversations built so far. Indices, not message ids, address messages here.
    """

    def __init__(self, msgs: Sequence[Msg], idf: Mapping[str, float]) -> None:
        self.msgs: list[Msg] = list(msgs)
        self.index = {m.msg_id: k for k, m in enumerate(self.msgs)}
        self.idf = idf
        self.info = [_analyse(m) for m in self.msgs]
        self.parent: list[int | None] = [None] * len(self.msgs)
        self.decided = 0
        self._name_keys: dict[int | str, set[str]] = {}
        for m, inf in zip(self.msgs, self.info, strict=True):
            self._name_keys.setdefault(inf.author, set()).update(_name_keys(m.sender_name))
        self.children: list[list[int]] = [[] for _ in self.msgs]
        self._conv: list[int] = []
        self._conv_tail: dict[int, int] = {}
        self._conv_size: dict[int, int] = {}
        self._conv_authors: dict[int, set[int | str]] = {}
        self._interaction: dict[frozenset[int | str], int] = {}
        self._key_owner: dict[str, int | str] = {}
        self._similarity: np.ndarray | None = None

    def name_keys(self, author: int | str) -> set[str]:
        """Every name form seen for ``author`` in this topic."""
        return self._name_keys.get(author, set())

    def candidates(self, i: int, limit: int = MAX_CANDIDATES) -> range:
        """Indices of the earlier messages message ``i`` may link to (nearest last)."""
        return range(max(0, i - limit), i)

    def conversation(self, k: int) -> int:
        """The conversation id (index of its first message) of decided message ``k``."""
        return self._conv[k]

    def conversation_tail(self, conv: int) -> int:
        """The latest decided message of conversation ``conv``."""
        return self._conv_tail[conv]

    def conversation_size(self, conv: int) -> int:
        """How many decided messages conversation ``conv`` holds."""
        return self._conv_size[conv]

    def conversation_authors(self, conv: int) -> set[int | str]:
        """The authors who posted in conversation ``conv`` so far."""
        return self._conv_authors[conv]

    def last_interaction(self, a: int | str, b: int | str) -> int | None:
        """Index of the latest decided message where ``a`` and ``b`` named one another."""
        return self._interaction.get(frozenset((a, b)))

    def set_similarity(self, vectors: np.ndarray) -> None:
        """Attach unit-normalised message vectors (one row per message) for ``similarity``."""
        if vectors.shape[0] != len(self.msgs):
            raise InvalidValue("similarity vectors must have one row per message.")
        self._similarity = vectors

    @property
    def has_similarity(self) -> bool:
        """Whether message vectors are attached."""
        return self._similarity is not None

    def similarity(self, i: int, cands: Sequence[int]) -> np.ndarray:
        """Cosine similarity of message ``i`` to each candidate (zeros when not attached)."""
        if self._similarity is None or not len(cands):
            return np.zeros(len(cands))
        return np.asarray(self._similarity[list(cands)] @ self._similarity[i], dtype=float)

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
        if parent is not None:
            self.children[parent].append(i)
        conv = i if parent is None else self._conv[parent]
        self._conv.append(conv)
        self._conv_tail[conv] = i
        self._conv_size[conv] = self._conv_size.get(conv, 0) + 1
        author = self.info[i].author
        self._conv_authors.setdefault(conv, set()).add(author)
        inf = self.info[i]
        for key in _name_keys(self.msgs[i].sender_name):
            self._key_owner[key] = author
        for key in inf.tokens | inf.lead:
            other = self._key_owner.get(key)
            if other is not None and other != author:
                self._interaction[frozenset((author, other))] = i
        self.decided += 1


# --- features ---


def _similarity_features(pair: np.ndarray, sims: np.ndarray) -> None:
    """Rank-based similarity features: they transfer between embedding models."""
    spread = float(sims.std())
    z = (sims - sims.mean()) / spread if spread > 0 else np.zeros_like(sims)
    pair[:, _P["similarity_z"]] = np.clip(z, -SIMILARITY_Z_CLIP, SIMILARITY_Z_CLIP)
    order = np.argsort(-sims, kind="stable")
    pair[order[0], _P["similarity_best"]] = 1.0
    pair[order[:SIMILARITY_TOP_K], _P["similarity_top3"]] = 1.0


def featurize(ctx: LinkContext, i: int) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The learned scorer's inputs for message ``i``.

    Returns:
        ``(candidates, pair, new)``: candidate indices (oldest first), a
        ``len(candidates) x len(PAIR_FEATURES)`` matrix, and the ``NEW_FEATURES`` vector of
        the "new conversation" option.
    """
    c = ctx.info[i]
    cands = list(ctx.candidates(i))
    c_keys = ctx.name_keys(c.author)
    own_prev: int | None = None
    for j in reversed(cands):
        if ctx.info[j].author == c.author:
            own_prev = j
            break
    own_conv = ctx.conversation(own_prev) if own_prev is not None else None
    partners: set[int | str] = set()
    if own_prev is not None:
        own_parent = ctx.parent[own_prev]
        if own_parent is not None:
            partners.add(ctx.info[own_parent].author)
        partners.update(ctx.info[k].author for k in ctx.children[own_prev])
        partners.discard(c.author)
    seen_authors: dict[int | str, int] = {}
    addressed_c_seen = False
    latest_addr: set[int | str] = set()
    latest_ment: set[int | str] = set()
    any_addr = any_ment = addressed_by_cand = False
    max_overlap = 0.0
    idf = ctx.idf
    c_short = c.length < SHORT_MESSAGE_CHARS
    rows: list[int] = []
    cols: list[int] = []
    for row in range(len(cands) - 1, -1, -1):
        j = cands[row]
        p = ctx.info[j]
        dist = i - j
        on = [
            _P["dist<=1"] + bisect.bisect_left(_DISTANCE_BINS, dist),
            _P["gap_s<=15"] + bisect.bisect_left(_GAP_BINS_S, c.date - p.date),
        ]
        overlap = rarest = 0.0
        for s in c.stems & p.stems:
            w = idf.get(s, 0.0)
            overlap += w
            rarest = max(rarest, w)
        max_overlap = max(max_overlap, overlap)
        on.append(_P["overlap<=0"] + bisect.bisect_left(_OVERLAP_BINS, overlap))
        times_seen = seen_authors.get(p.author, 0)
        seen_authors[p.author] = times_seen + 1
        same = p.author == c.author
        if same:
            on.append(_P["same_author"])
            if times_seen == 0:
                on.append(_P["same_author_latest"])
            if dist <= 1:
                on.append(_P["same_author_dist<=1"])
            if dist <= 3:
                on.append(_P["same_author_dist<=3"])
            if dist <= 10:
                on.append(_P["same_author_dist<=10"])
            if c.continuation:
                on.append(_P["same_author_c_continues"])
            if c.lead:
                same_addressee = bool(c.lead & p.lead)
                on.append(
                    _P[
                        "same_author_same_addressee"
                        if same_addressee
                        else "same_author_new_addressee"
                    ]
                )
        else:
            p_keys = ctx.name_keys(p.author)
            if p_keys & c.lead:
                any_addr = True
                on.append(_P["c_addresses_p"])
                if p.author not in latest_addr:
                    latest_addr.add(p.author)
                    on.append(_P["c_addresses_p_latest"])
            elif c.lead:
                on.append(_P["c_addresses_other"])
            if p_keys & c.tokens:
                any_ment = True
                on.append(_P["c_mentions_p"])
                if p.author not in latest_ment:
                    latest_ment.add(p.author)
                    on.append(_P["c_mentions_p_latest"])
            if c_keys & p.lead:
                addressed_by_cand = True
                on.append(_P["p_addresses_c"])
                if not addressed_c_seen:
                    addressed_c_seen = True
                    on.append(_P["p_addresses_c_latest"])
            elif p.lead:
                on.append(_P["p_addresses_other"])
            if c_keys & p.tokens:
                on.append(_P["p_mentions_c"])
            inter = ctx.last_interaction(c.author, p.author)
            if inter is not None and i - inter <= INTERACTION_WINDOW:
                on.append(_P["pair_interacted"])
            if c.lead and c.lead & p.lead:
                on.append(_P["p_same_third_party"])
            p_parent = ctx.parent[j]
            if p_parent is not None:
                if ctx.info[p_parent].author == c.author:
                    on.append(_P["p_answers_c_author"])
                if p_parent == own_prev:
                    on.append(_P["p_answers_c_own_prev"])
        if times_seen == 0:
            on.append(_P["p_author_latest"])
        elif times_seen >= 2:
            on.append(_P["p_author_superseded_2plus"])
        if p.question:
            on.append(_P["p_question"])
            if c.answer_cue:
                on.append(_P["p_question_c_answer_cue"])
        if c.question:
            on.append(_P["c_question"])
        if p.greeting:
            on.append(_P["p_greeting"])
        if p.answer_cue:
            on.append(_P["p_answer_cue"])
        if p.length < SHORT_MESSAGE_CHARS:
            on.append(_P["p_short"])
        if c_short and dist <= 2:
            on.append(_P["c_short_dist<=2"])
        conv = ctx.conversation(j)
        if ctx.parent[j] is None:
            on.append(_P["p_started_conversation"])
        is_tail = ctx.conversation_tail(conv) == j
        if is_tail:
            on.append(_P["p_conversation_tail"])
        if own_conv is not None and conv == own_conv:
            on.append(_P["p_in_own_conversation"])
            if is_tail:
                on.append(_P["p_own_conversation_tail"])
        if c.author in ctx.conversation_authors(conv):
            on.append(_P["p_conversation_has_c_author"])
        if p.author in partners:
            on.append(_P["p_author_is_partner"])
        n_replies = len(ctx.children[j])
        if n_replies >= 1:
            on.append(_P["p_has_replies"])
            if n_replies >= 2:
                on.append(_P["p_has_replies_2plus"])
        if ctx.conversation_size(conv) >= 3:
            on.append(_P["p_conversation_size_3plus"])
        if rarest >= RARE_WORD_IDF:
            on.append(_P["rare_shared_word"])
        rows.extend([row] * len(on))
        cols.extend(on)
    pair = np.zeros((len(cands), len(PAIR_FEATURES)))
    pair[rows, cols] = 1.0
    if ctx.has_similarity and len(cands) > 1:
        _similarity_features(pair, ctx.similarity(i, cands))
    new_on = [_N["bias"], _N["max_overlap<=0"] + bisect.bisect_left(_OVERLAP_BINS, max_overlap)]
    if not cands:
        new_on.append(_N["no_candidates"])
    else:
        prev_gap = c.date - ctx.info[i - 1].date
        new_on.append(_N["prev_gap_s<=30"] + bisect.bisect_left(_PREV_GAP_BINS_S, prev_gap))
    flags = {
        "c_addresses_candidate": any_addr,
        "c_mentions_candidate": any_ment,
        "c_addresses_unknown": bool(c.lead) and not any_addr,
        "c_author_in_candidates": own_prev is not None,
        "c_author_recent": own_prev is not None
        and c.date - ctx.info[own_prev].date <= RECENT_OWN_SECONDS,
        "c_addressed_by_candidate": addressed_by_cand,
        "c_question": c.question,
        "c_greeting": c.greeting,
        "c_answer_cue": c.answer_cue,
        "c_short": c_short,
        "c_long": c.length > LONG_MESSAGE_CHARS,
    }
    new_on.extend(_N[name] for name, value in flags.items() if value)
    new = np.zeros(len(NEW_FEATURES))
    new[new_on] = 1.0
    return cands, pair, new


# --- scorers ---


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
            if mentioned is None and keys & c.tokens:
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


EmbedFn = Callable[[Sequence[str]], np.ndarray]


def _softmax(scores: np.ndarray) -> np.ndarray:
    shifted = np.exp(scores - scores.max())
    return np.asarray(shifted / shifted.sum())


class LearnedScorer:
    """A learned ranking of "new conversation" against the last ``MAX_CANDIDATES`` messages.

    Each candidate is scored linearly from ``PAIR_FEATURES``, the new-conversation option from
    ``NEW_FEATURES`` plus ``new_bias``; a softmax over the options gives the confidence and
    the best option wins. Weights come from ``link_weights.json`` (model ``base``, or
    ``similarity`` when an embedding function is injected).

    Args:
        weights: The parsed weights document (``WEIGHTS_PATH`` when None).
        embed: Optional function from texts to unit-normalised row vectors; enables the
            ``similarity`` feature and needs weights trained with it.

    Raises:
        InvalidValue: weights in another format, for other features, or without the model
            the options ask for.
    """

    def __init__(
        self, weights: Mapping[str, Any] | None = None, *, embed: EmbedFn | None = None
    ) -> None:
        doc = weights if weights is not None else json.loads(WEIGHTS_PATH.read_text("utf-8"))
        if doc.get("format") != WEIGHTS_FORMAT:
            raise InvalidValue("link weights are in an unknown format.")
        if (
            tuple(doc.get("pair_features", ())) != PAIR_FEATURES
            or tuple(doc.get("new_features", ())) != NEW_FEATURES
        ):
            raise InvalidValue("link weights were trained for other features; retrain them.")
        models = doc.get("models")
        name = "similarity" if embed is not None else "base"
        if not isinstance(models, dict) or not isinstance(models.get(name), dict):
            raise InvalidValue(f"link weights have no '{name}' model.")
        model = models[name]
        self.pair_w = np.asarray(model["pair"], dtype=float)
        self.new_w = np.asarray(model["new"], dtype=float)
        self.new_bias = float(model.get("new_bias", 0.0))
        if self.pair_w.shape != (len(PAIR_FEATURES),) or self.new_w.shape != (len(NEW_FEATURES),):
            raise InvalidValue("link weights have the wrong shape.")
        self.embed = embed

    def prepare(self, ctx: LinkContext) -> None:
        """Embed the context's messages when an embedding function was injected."""
        if self.embed is None or not ctx.msgs:
            return
        texts = [" ".join(p for p in (m.text, m.media_text or "") if p) for m in ctx.msgs]
        ctx.set_similarity(np.asarray(self.embed(texts), dtype=float))

    def scores(self, ctx: LinkContext, i: int) -> tuple[list[int], np.ndarray]:
        """Candidate indices and option probabilities (index 0 is "new conversation")."""
        cands, pair, new = featurize(ctx, i)
        raw = np.concatenate(([float(new @ self.new_w) + self.new_bias], pair @ self.pair_w))
        return cands, _softmax(raw)

    def choose(self, ctx: LinkContext, i: int) -> Choice:
        """The most probable option for message ``i``, with runners-up in ``rejected``."""
        cands, probs = self.scores(ctx, i)
        order = np.argsort(-probs, kind="stable")
        best = int(order[0])
        rejected = tuple(
            (-1 if k == 0 else ctx.msgs[cands[k - 1]].msg_id, round(float(probs[k]), 4))
            for k in (int(x) for x in order[1 : 1 + REJECTED_KEPT])
        )
        confidence = round(float(probs[best]), 4)
        if best == 0:
            return Choice(None, "new", confidence, rejected)
        return Choice(cands[best - 1], "scored", confidence, rejected)


# --- building ---


def _idf(contexts: Iterable[LinkContext]) -> dict[str, float]:
    df: dict[str, int] = {}
    total = 0
    for ctx in contexts:
        for inf in ctx.info:
            total += 1
            for s in inf.stems:
                df[s] = df.get(s, 0) + 1
    return {s: math.log((total + 1) / (n + 1)) for s, n in df.items()}


def build_links(
    msgs: Iterable[Msg],
    *,
    agent_answers: Mapping[int, int | None] | None = None,
    scorer: LinkScorer | None = None,
) -> list[Link]:
    """Give every linkable message of a chat its parent decision.

    Per topic, in ``chrono_key`` order: (1) a reply to an earlier linkable message of the
    same topic links there (reason 'reply'); (2) else a stored agent answer applies when it
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
    groups: dict[int | None, list[Msg]] = {}
    for m in msgs:
        if is_unit_member(m):
            groups.setdefault(m.topic_id, []).append(m)
    contexts = [LinkContext(sorted(g, key=chrono_key), {}) for g in groups.values()]
    idf = _idf(contexts)
    links: list[tuple[tuple[int, int], Link]] = []
    for ctx in contexts:
        ctx.idf = idf
        scorer.prepare(ctx)
        for i, m in enumerate(ctx.msgs):
            link = _decide(ctx, i, m, answers, scorer)
            ctx.commit(i, None if link.parent_id is None else ctx.index[link.parent_id])
            links.append((chrono_key(m), link))
    links.sort(key=lambda kv: kv[0])
    log.debug("built %d links over %d topics", len(links), len(contexts))
    return [link for _, link in links]


def _decide(
    ctx: LinkContext,
    i: int,
    m: Msg,
    answers: Mapping[int, int | None],
    scorer: LinkScorer,
) -> Link:
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
    for link in ordered:
        groups.setdefault(find(link.msg_id), []).append(link.msg_id)
    return list(groups.values())
