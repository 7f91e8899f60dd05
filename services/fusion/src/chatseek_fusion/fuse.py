"""The arithmetic of hybrid search: weighted Reciprocal Rank Fusion, the convex combination of
normalised scores, normalisation, the reaction bonus and overlap dedup. Pure functions, no I/O.

* RRF: a candidate's fused score is Σ over lists of ``weight / (k + rank)``, ranks from 1.
* Convex: each list's scores are min-max scaled within its own top ``top``; a candidate's score
  is Σ ``weight × scaled score`` over the lists that hold it (0 where it is absent). The
  candidates are the union of every list's top ``top``, so a unit only one list found competes
  on its score: a strong cosine can outrank a weak keyword match.
* Conversation context (convex only): a candidate also earns ``weight × s`` for each chunk list
  of the current conversation builds, ``s`` being the best min-max scaled score among the
  chunks holding any of its messages. It re-orders the candidates and adds none.
* Scores are min-max normalised within the candidate set: they order one answer and mean
  nothing across two searches.
* Exact tokens (``exact_tokens``): what a question names exactly, which only words can match;
  hybrid search weighs words more for such a question.
* The reaction bonus is ``w · log1p(r) / (1 + log1p(r))``: bounded by ``w``, saturating.
* Dedup drops a hit when at least ``overlap`` of its message ids already belong to a better hit
  of the same chat.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

__all__ = [
    "DEFAULT_RRF_K",
    "Fused",
    "add_context",
    "context_scores",
    "convex",
    "dedup",
    "exact_tokens",
    "minmax",
    "reaction_bonus",
    "rrf",
    "script_of",
]

DEFAULT_RRF_K = 60


@dataclass
class Fused:
    """One candidate after fusion: its score, the lists that found it and its rank in each."""

    unit_id: int
    score: float
    by: list[str] = field(default_factory=list)
    ranks: dict[str, int] = field(default_factory=dict)


def rrf(
    lists: Mapping[str, Sequence[int]],
    weights: Mapping[str, float] | None = None,
    k: int = DEFAULT_RRF_K,
) -> list[Fused]:
    """Fuse ranked lists of unit ids; best first, ties broken by unit id.

    Args:
        lists: list name → unit ids, best first (duplicates after the first are ignored).
        weights: list name → weight (default 1.0 each); a weight of 0 drops the list.
        k: the RRF constant.
    """
    fused: dict[int, Fused] = {}
    for name, ids in lists.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        seen: set[int] = set()
        rank = 0
        for unit_id in ids:
            if unit_id in seen:
                continue
            seen.add(unit_id)
            rank += 1
            entry = fused.setdefault(unit_id, Fused(unit_id=unit_id, score=0.0))
            entry.ranks[name] = rank
            if weight > 0:
                entry.score += weight / (k + rank)
                entry.by.append(name)
    out = [f for f in fused.values() if f.by]
    out.sort(key=lambda f: (-f.score, f.unit_id))
    return out


def convex(
    lists: Mapping[str, Sequence[tuple[int, float]]],
    weights: Mapping[str, float],
    top: int = 100,
) -> list[Fused]:
    """Fuse scored lists by a weighted sum of min-max scaled scores; best first, ties by id.

    Args:
        lists: list name → ``(unit_id, score)`` best first (higher is better; a unit's first
            occurrence counts).
        weights: list name → weight; a list without a positive weight neither scores nor adds
            candidates.
        top: how much of each list is scaled and pooled.
    """
    fused: dict[int, Fused] = {}
    for name, ranked in lists.items():
        weight = weights.get(name, 0.0)
        head: list[tuple[int, float]] = []
        seen: set[int] = set()
        for unit_id, score in ranked:
            if unit_id not in seen:
                seen.add(unit_id)
                head.append((unit_id, score))
            if len(head) >= top:
                break
        scaled = minmax([score for _, score in head])
        for rank, ((unit_id, _), value) in enumerate(zip(head, scaled, strict=True), start=1):
            entry = fused.setdefault(unit_id, Fused(unit_id=unit_id, score=0.0))
            entry.ranks[name] = rank
            if weight > 0:
                entry.score += weight * value
                entry.by.append(name)
    out = [f for f in fused.values() if f.by]
    out.sort(key=lambda f: (-f.score, f.unit_id))
    return out


def context_scores(
    chunks: Sequence[tuple[int, float]],
    chunks_of: Mapping[int, Sequence[int]],
    top: int = 100,
) -> dict[int, float]:
    """Each unit's best scaled chunk score: ``{unit_id: s}`` for the units of ``chunks_of``.

    Args:
        chunks: a chunk list, ``(chunk_id, score)`` best first; its top ``top`` are min-max
            scaled (a chunk's first occurrence counts).
        chunks_of: unit id → the ids of the chunks holding any of its messages.
        top: how much of the list is scaled.

    Returns:
        The units some listed chunk holds; a unit no listed chunk holds is absent (it scores 0).
    """
    head: dict[int, float] = {}
    for chunk_id, score in chunks:
        if len(head) >= top:
            break
        head.setdefault(chunk_id, score)
    scaled = dict(zip(head, minmax(list(head.values())), strict=True))
    out: dict[int, float] = {}
    for unit_id, held in chunks_of.items():
        values = [scaled[c] for c in held if c in scaled]
        if values:
            out[unit_id] = max(values)
    return out


def add_context(
    fused: Sequence[Fused],
    context: Mapping[str, Mapping[int, float]],
    weights: Mapping[str, float],
) -> list[Fused]:
    """New candidates: ``fused`` with ``weights[name] × context[name][unit]`` added to each
    score (``context_scores`` per chunk list); best first, ties by unit id."""
    out = [
        replace(
            f,
            score=f.score
            + sum(
                weights.get(name, 0.0) * values.get(f.unit_id, 0.0)
                for name, values in context.items()
            ),
        )
        for f in fused
    ]
    out.sort(key=lambda f: (-f.score, f.unit_id))
    return out


CYRILLIC = range(0x0400, 0x0530)


def script_of(text: str) -> str:
    """``cyrillic`` or ``latin`` by the majority of the letters (Cyrillic wins a tie), or ``""``
    when the text has no letters."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return ""
    cyrillic = sum(1 for ch in letters if ord(ch) in CYRILLIC)
    return "cyrillic" if 2 * cyrillic >= len(letters) else "latin"


SHOUTING_WORDS = 3
_QUOTED = re.compile(r"«[^«»]+»|\"[^\"]+\"|“[^“”]+”|„[^„“”]+[“”]")
_TOKEN = re.compile(r"\w+(?:[._]\w+)*[+#]*")


def exact_tokens(text: str) -> list[str]:
    """What ``text`` names exactly, in order: each quoted span («…», "…", “…”, „…“) and each
    token that holds a digit (``2018``, ``v2``), joins words with a dot or an underscore
    (``chart.js``, ``max_length``), ends in ``+`` or ``#`` (``C++``, ``C#``), or is an acronym
    of two or more upper-case letters (``ВНЖ``, ``DNI``, ``CUIT``). In a question of three or
    more words typed all in capitals, no word counts as an acronym."""
    found = [m.group() for m in _QUOTED.finditer(text)]
    tokens = [m.group() for m in _TOKEN.finditer(text)]
    shouting = len(tokens) >= SHOUTING_WORDS and not any(ch.islower() for ch in text)
    for token in tokens:
        if (
            any(ch.isdigit() for ch in token)
            or "." in token
            or "_" in token
            or token.endswith(("+", "#"))
            or (not shouting and len(token) >= 2 and token.isalpha() and token.isupper())
        ):
            found.append(token)
    return found


def minmax(scores: Sequence[float]) -> list[float]:
    """Scale scores to [0, 1] within the set; all-equal scores become 1.0."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if math.isclose(high, low):
        return [1.0 for _ in scores]
    return [(s - low) / (high - low) for s in scores]


def reaction_bonus(reactions: int, weight: float) -> float:
    """``weight · log1p(r) / (1 + log1p(r))`` — 0 for no reactions, approaching ``weight``."""
    if reactions <= 0 or weight <= 0:
        return 0.0
    x = math.log1p(reactions)
    return weight * x / (1.0 + x)


def dedup(
    ordered: Sequence[tuple[int, int, Sequence[int]]],
    overlap: float = 0.5,
    album_anchors: Mapping[int, int] | None = None,
    shows_too: Mapping[int, Sequence[tuple[int, Sequence[int]]]] | None = None,
) -> list[int]:
    """Keep the hits that are not mostly covered by a better hit of the same chat.

    Args:
        ordered: ``(unit_id, chat_key, msg_ids)`` best first; ``chat_key`` identifies the chat.
        overlap: the covered share at which a hit is dropped.
        album_anchors: ``{unit_id: msg_id}`` for hits whose best message is a photo of an
            album; such a hit is dropped when a better hit of its chat holds that photo (and so,
            units holding whole albums, the album), whatever the overlap.
        shows_too: ``{unit_id: [(chat_key, msg_ids), …]}``: messages of other chats a hit
            shows besides its own (a channel post's comments); once the hit is kept they count
            as covered, so a group unit repeating those comments is dropped.

    Returns:
        The kept unit ids, in order.
    """
    covered: dict[int, set[int]] = {}
    anchors = album_anchors or {}
    extra = shows_too or {}
    kept = []
    for unit_id, chat_key, msg_ids in ordered:
        ids = set(msg_ids)
        seen = covered.setdefault(chat_key, set())
        if ids and len(ids & seen) / len(ids) >= overlap:
            continue
        if unit_id in anchors and anchors[unit_id] in seen:
            continue
        kept.append(unit_id)
        seen.update(ids)
        for other, shown in extra.get(unit_id, ()):
            covered.setdefault(other, set()).update(shown)
    return kept
