"""Hybrid search over units: ranked lists → fusion → cross-encoder rerank → dedup → hits.

Fusion is ``[search] fusion``: ``convex`` (the default: a weighted sum of each list's min-max
scaled scores over the union of the lists, so a unit found only by meaning competes on its
cosine) or ``rrf`` (weighted Reciprocal Rank Fusion). Under ``convex`` a unit also earns from
the conversation it sits in: the chunks of the current conversation builds are ranked by words
and by meaning too, and a candidate gains ``conversation_words_weight`` and
``conversation_meaning_weight`` times the best scaled score of a listed chunk holding one of its
messages (chats never built add nothing). A question that names an exact token (a quoted
phrase, a number, ``chart.js``, an acronym) weighs words and meaning by ``exact_words_weight``
and ``exact_meaning_weight`` instead (``fusion_weights``). ``eval/FUSION.md`` says how the rule
and its weights were chosen (cross-validated over chats).

Invariants:
* Degrade, never silence: a dense list that cannot run (no vectors, another model, embed down)
  is skipped with a warning saying why; so, in hybrid mode while the meaning list answers, is a
  word list that is down, late or still building its index (``WORDS_UNAVAILABLE``,
  ``CONTEXT_UNAVAILABLE``); a reranker that cannot run leaves the fused order and says so. Hits
  always say which lists found them (``by``).
* Scores are within-result-set numbers: min-max normalised over the candidates, plus the
  bounded reaction bonus. They order one answer and compare across nothing else.
* The lists are fetched ``max(k, rerank_top, list_depth)`` deep; ranking never invents a unit
  that no list returned, except the channel post of a discussion-group unit that holds its
  automatic copy: a post and its copy are one hit, the post with the group's messages as its
  ``comments``.
* No read blocks the event loop: units, chats and messages load in batched queries in worker
  threads.
* No hit opens on a message a better hit of its chat holds: a one-message window and the
  thread around it may both rank, and the thread then opens on its best message the window
  does not show (``_openings``). An album is one hit: units hold whole albums, a hit anchored
  on a photo shows the whole album (its snippet starts with every photo's line, ``album``
  lists every photo's caption and extracted text), and a hit whose best message is a photo a
  better hit already holds is dropped as a repeat of that album.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from chatseek_core.aio import to_thread
from chatseek_core.config import SearchConfig
from chatseek_core.dates import iso_utc
from chatseek_core.db import Connection
from chatseek_core.errors import (
    ChatseekError,
    DeadlineExceeded,
    IndexNotReady,
    InvalidArgument,
    ResourceExhausted,
    Unavailable,
)
from chatseek_core.limits import MAX_K, MAX_QUERY_BYTES, SEARCH_MODES
from chatseek_core.links import deep_link, locator
from chatseek_core.render import render_line, render_lines
from chatseek_fusion.anchors import Anchors
from chatseek_fusion.fuse import (
    Fused,
    add_context,
    context_scores,
    convex,
    dedup,
    exact_tokens,
    minmax,
    reaction_bonus,
    rrf,
)
from chatseek_fusion.store import (
    ChatInfo,
    MessageRow,
    UnitRow,
    channel_copies,
    chunks_holding,
    load_chats,
    load_messages_of,
    load_units,
    post_units,
)

__all__ = [
    "DEFAULT_KINDS",
    "ListFilter",
    "Neighbours",
    "Ranking",
    "SearchConfig",
    "SearchParams",
    "Signals",
    "check_text",
    "rank",
    "search",
]

log = logging.getLogger(__name__)

DEFAULT_KINDS = ("window", "thread", "post")
# What a list answers when it cannot answer now: hybrid search goes on without it.
TRANSIENT = (Unavailable, DeadlineExceeded, ResourceExhausted, IndexNotReady)
RERANK_TEXT_CHARS = 2000


@dataclass(frozen=True)
class ListFilter:
    """Scope and filters every list applies inside its own query."""

    accounts: tuple[str, ...]
    chat_ids: tuple[int, ...]
    since: int
    until: int
    kinds: tuple[str, ...]


@dataclass(frozen=True)
class Neighbours:
    """The dense list: ``(unit_id, cosine)`` best first, plus why it may be partial."""

    units: list[tuple[int, float]]
    warnings: list[dict[str, str]] = field(default_factory=list)
    embedded_only_elsewhere: list[int] = field(default_factory=list)


class Signals(Protocol):
    """Where the ranked lists and the reranker come from (gRPC peers in production)."""

    async def words(self, query: str, flt: ListFilter, limit: int) -> list[tuple[int, float, int]]:
        """Units by BM25: ``(unit_id, score, 0)``."""
        ...

    async def messages(
        self, query: str, flt: ListFilter, limit: int
    ) -> list[tuple[int, float, int]]:
        """Messages by BM25 mapped to units: ``(unit_id, score, best_msg_id)``."""
        ...

    async def meaning(
        self, query: str, flt: ListFilter, limit: int, *, current_chunks_only: bool = False
    ) -> Neighbours:
        """Units by cosine to the embedded query (chunks of current builds only, if asked)."""
        ...

    async def chunks(
        self, query: str, flt: ListFilter, limit: int, any_word: bool
    ) -> list[tuple[int, float, int]]:
        """Conversation chunks of current builds by BM25: ``(unit_id, score, best_msg_id)``."""
        ...

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """Cross-encoder scores, one per text."""
        ...


@dataclass(frozen=True)
class SearchParams:
    """One search request, resolved (chats are ids, dates are unix seconds)."""

    query: str
    flt: ListFilter
    mode: str = "hybrid"
    k: int = 10
    rerank: bool | None = None
    full: bool = False


def _warning(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": message}


CONTEXT_LISTS = ("conversation_words", "conversation_meaning")


@dataclass
class _Lists:
    """What the lists returned: the ranked unit lists, the dense list's cosines, and the chunk
    lists of the context."""

    ranked: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    cosines: dict[int, float] = field(default_factory=dict)
    context: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    elsewhere: list[int] = field(default_factory=list)


def _chunk_filter(flt: ListFilter) -> ListFilter:
    # A conversation may begin before the searched dates: the units carry those bounds.
    return ListFilter(
        accounts=flt.accounts, chat_ids=flt.chat_ids, since=0, until=0, kinds=("conversation",)
    )


async def _gather_lists(
    signals: Signals,
    params: SearchParams,
    depth: int,
    warnings: list[dict[str, str]],
    context: bool,
    messages: bool,
) -> _Lists:
    want_words = params.mode in ("hybrid", "lexical")
    want_meaning = params.mode in ("hybrid", "dense")

    async def nothing() -> Any:
        return None

    chunk_flt = _chunk_filter(params.flt)
    tasks = [
        signals.words(params.query, params.flt, depth) if want_words else nothing(),
        signals.messages(params.query, params.flt, depth) if want_words and messages else nothing(),
        signals.meaning(params.query, params.flt, depth) if want_meaning else nothing(),
        signals.chunks(params.query, chunk_flt, depth, True) if context else nothing(),
        (
            signals.meaning(params.query, chunk_flt, depth, current_chunks_only=True)
            if context
            else nothing()
        ),
    ]
    words, msgs, meaning, chunk_words, chunk_meaning = await asyncio.gather(
        *tasks, return_exceptions=True
    )
    out = _Lists()
    # In hybrid mode a word list that is down, late or still building its index is skipped with
    # a warning while the meaning list answers; a refused query, or words alone, fails.
    spare = params.mode == "hybrid" and isinstance(meaning, Neighbours)
    for name, result in (("words", words), ("messages", msgs)):
        if result is None:
            continue
        if spare and isinstance(result, TRANSIENT):
            if not any(w["code"] == "WORDS_UNAVAILABLE" for w in warnings):
                warnings.append(
                    _warning("WORDS_UNAVAILABLE", f"word search skipped: {result.message}")
                )
            continue
        if isinstance(result, BaseException):
            raise result
        out.ranked[name] = [(unit_id, score) for unit_id, score, _ in result]
    if isinstance(meaning, ChatseekError):
        # The hint says what to do (embed, re-embed after a model change or an upgrade).
        said = f"{meaning.message}; {meaning.hint}" if meaning.hint else meaning.message
        warnings.append(_warning("DENSE_UNAVAILABLE", f"meaning search skipped: {said}"))
    elif isinstance(meaning, BaseException):
        raise meaning
    elif isinstance(meaning, Neighbours):
        out.ranked["meaning"] = list(meaning.units)
        out.cosines = dict(meaning.units)
        warnings.extend(meaning.warnings)
        out.elsewhere = list(meaning.embedded_only_elsewhere)
        if meaning.embedded_only_elsewhere:
            warnings.append(
                _warning(
                    "EMBEDDED_ONLY_ELSEWHERE",
                    "chats embedded only under another model: "
                    + ", ".join(str(c) for c in meaning.embedded_only_elsewhere),
                )
            )
    if isinstance(chunk_words, TRANSIENT):
        warnings.append(
            _warning("CONTEXT_UNAVAILABLE", f"conversation words skipped: {chunk_words.message}")
        )
    elif isinstance(chunk_words, BaseException):
        raise chunk_words
    elif chunk_words is not None:
        out.context["conversation_words"] = [(u, score) for u, score, _ in chunk_words]
    # A dense list that cannot run has been reported above; its chunk twin adds nothing more.
    if isinstance(chunk_meaning, BaseException) and not isinstance(chunk_meaning, ChatseekError):
        raise chunk_meaning
    if isinstance(chunk_meaning, Neighbours):
        out.context["conversation_meaning"] = list(chunk_meaning.units)
    return out


def _anchor(unit: UnitRow, messages: dict[int, MessageRow], best: int | None) -> int:
    """The unit's best message for the query's words, else its first stored message."""
    if best is not None and best in messages:
        return best
    return next((i for i in unit.msg_ids if i in messages), unit.msg_ids[0])


def _runs(unit: UnitRow, messages: dict[int, MessageRow]) -> list[list[MessageRow]]:
    """The unit's stored messages in order, the adjacent photos of one album as one run."""
    runs: list[list[MessageRow]] = []
    for msg_id in unit.msg_ids:
        m = messages.get(msg_id)
        if m is None:
            continue
        last = runs[-1][-1] if runs else None
        if last is not None and m.grouped_id is not None and last.grouped_id == m.grouped_id:
            runs[-1].append(m)
        else:
            runs.append([m])
    return runs


def _render_run(run: Sequence[MessageRow]) -> str:
    return "\n".join(render_lines(run))


def _snippet(unit: UnitRow, messages: dict[int, MessageRow], anchor: int, limit: int) -> str:
    """The anchor's lines first (its whole album when it is a photo of one), then its unit
    neighbours (nearest first, shown in order)."""
    runs = _runs(unit, messages)
    pos = next((n for n, run in enumerate(runs) if any(m.msg_id == anchor for m in run)), None)
    if pos is None:
        return unit.text[:limit]
    first = _render_run(runs[pos])
    used = len(first)
    picked: list[int] = []
    step = 1
    while used < limit and (pos - step >= 0 or pos + step < len(runs)):
        for index in (pos + step, pos - step):
            if 0 <= index < len(runs):
                text = _render_run(runs[index])
                if used + len(text) + 1 <= limit:
                    picked.append(index)
                    used += len(text) + 1
        step += 1
    rest = [_render_run(runs[i]) for i in sorted(picked)]
    return "\n".join([first, *rest]) if rest else first[: max(limit, 1)]


def _album(unit: UnitRow, messages: dict[int, MessageRow], anchor: int) -> list[dict[str, Any]]:
    """Every photo of the anchor's album in the unit, with its caption and extracted text."""
    m = messages.get(anchor)
    if m is None or m.grouped_id is None:
        return []
    return [
        {
            "msg_id": p.msg_id,
            "locator": locator(unit.account, unit.chat_id, p.msg_id),
            "text": p.text,
            "media": {"kind": p.media_kind, "text": p.media_text or ""},
        }
        for p in (messages[i] for i in unit.msg_ids if i in messages)
        if p.grouped_id == m.grouped_id
    ]


@dataclass
class _Entry:
    """One hit in the making: its unit, and the discussion-group units folded into it."""

    score: float
    unit: UnitRow
    comments: list[UnitRow] = field(default_factory=list)
    copies: set[int] = field(default_factory=set)
    lists: list[str] = field(default_factory=list)


def _fold_copies(
    conn: Connection, ranked: list[tuple[float, Fused]], units: dict[int, UnitRow]
) -> list[_Entry]:
    """Entries best first, a channel post and its discussion-group copies as one.

    A group unit holding Telegram's automatic copy of a post joins that post's entry (at the
    better of their ranks): the hit is the post, the group unit's other messages its comments.
    """
    copies = channel_copies(conn, (units[f.unit_id] for _, f in ranked))
    posts = post_units(conn, {(c.account, c.channel_id, c.post_msg_id) for c in copies.values()})
    entries: list[_Entry] = []
    by_post: dict[int, _Entry] = {}
    for score, f in ranked:
        unit = units[f.unit_id]
        copy = copies.get(f.unit_id)
        post = posts.get((copy.account, copy.channel_id, copy.post_msg_id)) if copy else None
        target = post if post is not None else unit
        entry = by_post.get(target.unit_id)
        if entry is None:
            entry = _Entry(score=score, unit=target)
            by_post[target.unit_id] = entry
            entries.append(entry)
        entry.lists.extend(name for name in f.by if name not in entry.lists)
        if post is not None and copy is not None:
            entry.comments.append(unit)
            entry.copies.add(copy.copy_msg_id)
    return entries


def _comments(
    entry: _Entry, groups: dict[tuple[str, int], dict[int, MessageRow]]
) -> tuple[dict[str, Any] | None, list[str]]:
    """The folded group units' messages (not the copy, not already in the post): the hit's
    ``comments`` field and their rendered lines."""
    if not entry.comments:
        return None, []
    group = entry.comments[0]
    own = set(entry.unit.msg_ids[1:])
    ids = sorted(
        {i for u in entry.comments for i in u.msg_ids} - own - entry.copies,
    )
    messages = groups.get((group.account, group.chat_id), {})
    lines = [render_line(messages[i]) for i in ids if i in messages]
    field_ = {
        "chat_id": group.chat_id,
        "msg_ids": ids,
        "locators": [locator(group.account, group.chat_id, i) for i in ids],
        "unit_ids": [u.unit_id for u in entry.comments],
    }
    return field_, lines


def _hit(
    rank: int,
    entry: _Entry,
    chat: ChatInfo | None,
    messages: dict[int, MessageRow],
    groups: dict[tuple[str, int], dict[int, MessageRow]],
    best: int | None,
    params: SearchParams,
    config: SearchConfig,
    cosine: float | None,
) -> dict[str, Any]:
    unit = entry.unit
    anchor = _anchor(unit, messages, best)
    topic = messages[anchor].topic_id if anchor in messages else None
    chat_type = chat.type if chat else "supergroup"
    link, fallback = deep_link(
        chat_type, unit.chat_id, chat.username if chat else None, anchor, topic
    )
    comments, comment_lines = _comments(entry, groups)
    snippet = _snippet(unit, messages, anchor, config.snippet_chars)
    for line in comment_lines:
        if len(snippet) + 1 + len(line) > config.snippet_chars:
            break
        snippet = f"{snippet}\n{line}"
    by = ["words" if name in ("words", "messages") else name for name in entry.lists]
    hit: dict[str, Any] = {
        "rank": rank,
        "score": round(entry.score, 6),
        "score_meaning": "within-result-set only: orders this answer, comparable to nothing else",
        "by": sorted(set(by), key=by.index),
        "kind": unit.kind,
        "unit_id": unit.unit_id,
        "chat": chat.to_dict() if chat else {"account": unit.account, "id": unit.chat_id},
        "date_range": {
            "start": iso_utc(unit.start_date),
            "end": iso_utc(max([unit.end_date, *(c.end_date for c in entry.comments)])),
        },
        "anchor_msg_id": anchor,
        "link": link,
        "fallback_link": fallback,
        "locators": [locator(unit.account, unit.chat_id, i) for i in unit.msg_ids],
        "snippet": snippet,
        "msg_ids": list(unit.msg_ids),
        "senders": list(unit.senders),
        "reactions": unit.reactions,
    }
    if comments is not None:
        hit["comments"] = comments
    album = _album(unit, messages, anchor)
    if album:
        hit["album"] = album
    if cosine is not None:
        hit["cosine"] = round(cosine, 6)
    if params.full:
        hit["text"] = "\n".join([unit.text, *comment_lines]) if comment_lines else unit.text
    return hit


# Anchors are first picked for twice as many units as hits are asked for.
PREFIX_FACTOR = 2


def _album_anchors(
    units: dict[int, UnitRow],
    best: dict[int, int],
    messages: dict[tuple[str, int], dict[int, MessageRow]],
) -> dict[int, int]:
    """``{unit_id: best message}`` for the units whose best message is a photo of an album."""
    out: dict[int, int] = {}
    for unit_id, msg_id in best.items():
        u = units[unit_id]
        m = messages.get((u.account, u.chat_id), {}).get(msg_id)
        if m is not None and m.grouped_id is not None:
            out[unit_id] = msg_id
    return out


def _openings(
    entries: Sequence[_Entry],
    best: dict[int, int],
    messages: dict[tuple[str, int], dict[int, MessageRow]],
    anchors: Anchors,
) -> dict[int, int]:
    """Each hit's anchor, the message it opens on, best hit first: its best message for the
    query's words (else its first stored one), unless a better hit of its chat holds that
    message; then its best message no better hit holds, else the first such one. Only when a
    better hit holds all of its messages (it would have been dropped) does it keep its own."""
    shown: dict[tuple[str, int], set[int]] = {}
    out: dict[int, int] = {}
    for e in entries:
        u = e.unit
        key = (u.account, u.chat_id)
        own = messages.get(key, {})
        seen = shown.setdefault(key, set())
        anchor = _anchor(u, own, best.get(u.unit_id))
        if anchor in seen:
            fresh = anchors.best_outside(u, own, seen)
            if fresh is None:
                fresh = next((i for i in u.msg_ids if i in own and i not in seen), None)
            anchor = anchor if fresh is None else fresh
        out[u.unit_id] = anchor
        seen.update(u.msg_ids)
        for c in e.comments:
            shown.setdefault((c.account, c.chat_id), set()).update(c.msg_ids)
    return out


def _read_messages(
    conn: Connection, entries: Sequence[_Entry], into: dict[tuple[str, int], dict[int, MessageRow]]
) -> None:
    """Add the messages of ``entries``' units and their folded comments to ``into``."""
    wanted: dict[tuple[str, int], set[int]] = {}
    for e in entries:
        wanted.setdefault((e.unit.account, e.unit.chat_id), set()).update(e.unit.msg_ids)
        for c in e.comments:
            wanted.setdefault((c.account, c.chat_id), set()).update(c.msg_ids)
    for key, found in load_messages_of(conn, {k: sorted(ids) for k, ids in wanted.items()}).items():
        into.setdefault(key, {}).update(found)


def _hits(
    conn: Connection,
    ranked: list[tuple[float, Fused]],
    units: dict[int, UnitRow],
    cosines: dict[int, float],
    params: SearchParams,
    config: SearchConfig,
) -> list[dict[str, Any]]:
    """Fold copies, pick anchors, drop overlaps, and render the top ``k``: every read in
    batched queries."""
    entries = _fold_copies(conn, ranked, units)
    chat_index: dict[tuple[str, int], int] = {}
    ordered = []
    comments: dict[int, list[tuple[int, Sequence[int]]]] = {}
    for e in entries:
        key = chat_index.setdefault((e.unit.account, e.unit.chat_id), len(chat_index))
        ordered.append((e.unit.unit_id, key, e.unit.msg_ids))
        for c in e.comments:
            group = chat_index.setdefault((c.account, c.chat_id), len(chat_index))
            comments.setdefault(e.unit.unit_id, []).append((group, c.msg_ids))
    shown = {e.unit.unit_id: e.unit for e in entries}
    # A unit's place in the dedup depends only on the units before it, so anchors are picked and
    # messages read for a prefix of the pool, grown until it holds ``k`` kept hits.
    anchors = Anchors(conn, params.query)
    messages: dict[tuple[str, int], dict[int, MessageRow]] = {}
    best_msg: dict[int, int] = {}
    read, upto = 0, PREFIX_FACTOR * params.k
    while True:
        batch = entries[read:upto]
        _read_messages(conn, batch, messages)
        best_msg.update(anchors.best([e.unit for e in batch], messages))
        read = min(upto, len(entries))
        photos = _album_anchors(shown, best_msg, messages)
        kept_ids = dedup(ordered[:read], config.dedup_overlap, photos, comments)
        if len(kept_ids) >= params.k or read == len(entries):
            break
        upto *= 2
    kept = set(kept_ids[: params.k])
    chosen = [e for e in entries if e.unit.unit_id in kept][: params.k]
    opened = _openings(chosen, best_msg, messages, anchors)
    chats = load_chats(conn, {(e.unit.account, e.unit.chat_id) for e in chosen})
    hits = []
    for rank, e in enumerate(chosen, start=1):
        u = e.unit
        own = messages.get((u.account, u.chat_id), {})
        cosine = cosines.get(u.unit_id)
        if cosine is None:
            cosine = max(
                (cosines[c.unit_id] for c in e.comments if c.unit_id in cosines), default=None
            )
        best = opened[u.unit_id]
        hits.append(
            _hit(
                rank,
                e,
                chats.get((u.account, u.chat_id)),
                {i: own[i] for i in u.msg_ids if i in own},
                messages,
                best,
                params,
                config,
                cosine,
            )
        )
    return hits


def check_text(text: str, what: str, field_name: str) -> None:
    """Refuse an empty or over-long query or question."""
    if not text.strip():
        raise InvalidArgument(f"the {what} is empty", metadata={"field": field_name})
    if len(text.encode()) > MAX_QUERY_BYTES:
        raise InvalidArgument(
            f"the {what} is longer than {MAX_QUERY_BYTES} bytes",
            metadata={"field": field_name, "limit": str(MAX_QUERY_BYTES)},
        )


@dataclass
class Ranking:
    """Hybrid search's ranked pool before hits are made of it.

    Attributes:
        final: ``(score, candidate)`` best first: fused (or reranked) and min-max scaled, plus
            the reaction bonus.
        units: the pool's units that still exist, by id.
        cosines: the dense list's cosines.
        warnings: why a list or the reranker was skipped.
        lists: how many ids each list returned, by list name.
        reranked: whether the cross-encoder ordered the pool.
        elsewhere: chats of the scope embedded only under another model.
    """

    final: list[tuple[float, Fused]]
    units: dict[int, UnitRow]
    cosines: dict[int, float]
    warnings: list[dict[str, str]]
    lists: dict[str, int]
    reranked: bool
    elsewhere: list[int]


def fusion_weights(query: str, mode: str, config: SearchConfig) -> dict[str, float]:
    """Each list's weight in the fusion of ``query`` in ``mode``.

    Lexical mode weighs the BM25 message list 0: it is the unit list alone. Under ``convex``
    fusion in hybrid mode, a question that names an exact token (``exact_tokens``: a quoted
    phrase, a number, ``chart.js``, an acronym such as ВНЖ) weighs words and meaning by
    ``exact_words_weight`` and ``exact_meaning_weight`` instead: only words match such a token
    as written (``eval/FUSION.md`` has the cross-validated comparison).
    """
    words, meaning = config.words_weight, config.meaning_weight
    if mode == "hybrid" and config.fusion == "convex" and exact_tokens(query):
        words, meaning = config.exact_words_weight, config.exact_meaning_weight
    return {
        "words": words,
        "messages": config.messages_weight if mode == "hybrid" else 0.0,
        "meaning": meaning,
        "conversation_words": config.conversation_words_weight,
        "conversation_meaning": config.conversation_meaning_weight,
    }


async def rank(
    open_db: Callable[[], Connection],
    signals: Signals,
    params: SearchParams,
    config: SearchConfig,
    *,
    default_rerank: bool = True,
) -> Ranking:
    """Run the lists, fuse them (with conversation context where built), rerank when asked and
    add the reaction bonus: the pool every hybrid hit and conversation result is made from.
    ``params`` is taken as valid (``search`` checks it). The BM25 message list runs only when
    it weighs in the fusion: hits' anchors are picked from their own messages (``anchors``)."""
    warnings: list[dict[str, str]] = []
    rerank = (config.rerank and default_rerank) if params.rerank is None else params.rerank
    depth = max(params.k, config.rerank_top, config.list_depth)
    weights = fusion_weights(params.query, params.mode, config)
    context = (
        params.mode == "hybrid"
        and config.fusion == "convex"
        and any(weights[name] > 0 for name in CONTEXT_LISTS)
    )
    got = await _gather_lists(signals, params, depth, warnings, context, weights["messages"] > 0)
    lists, cosines = got.ranked, got.cosines
    if config.fusion == "rrf":
        fused = rrf(
            {n: [u for u, _ in ranked] for n, ranked in lists.items()}, weights, k=config.rrf_k
        )
    else:
        fused = convex(lists, weights, top=depth)
    chunk_ids = sorted({c for ranked in got.context.values() for c, _ in ranked[:depth]})
    if fused and chunk_ids:
        candidates = [f.unit_id for f in fused]
        held = await to_thread(lambda: chunks_holding(open_db(), candidates, chunk_ids))
        scores = {n: context_scores(r, held, top=depth) for n, r in got.context.items()}
        fused = add_context(fused, scores, weights)
    pool = fused[: config.rerank_top] if rerank else fused[:depth]
    ids = [f.unit_id for f in pool]
    units = await to_thread(lambda: load_units(open_db(), ids))
    pool = [f for f in pool if f.unit_id in units]
    base = minmax([f.score for f in pool])
    reranked = False
    if rerank and pool:
        try:
            texts = [units[f.unit_id].text[:RERANK_TEXT_CHARS] for f in pool]
            base = minmax(await signals.rerank(params.query, texts))
            reranked = True
        except ChatseekError as exc:
            # No reranker configured is a choice, not a fault: the fused order stands silently.
            if exc.metadata.get("configured") != "false":
                warnings.append(
                    _warning("RERANK_UNAVAILABLE", f"kept the fused order: {exc.message}")
                )
    final = [
        (b + reaction_bonus(units[f.unit_id].reactions, config.reaction_weight), f)
        for b, f in zip(base, pool, strict=True)
    ]
    final.sort(key=lambda pair: (-pair[0], pair[1].unit_id))
    return Ranking(
        final=final,
        units=units,
        cosines=cosines,
        warnings=warnings,
        lists={name: len(ids) for name, ids in {**lists, **got.context}.items()},
        reranked=reranked,
        elsewhere=got.elsewhere,
    )


async def search(
    open_db: Callable[[], Connection],
    signals: Signals,
    params: SearchParams,
    config: SearchConfig,
    *,
    default_rerank: bool = True,
) -> dict[str, Any]:
    """Run one hybrid search; returns ``{hits, warnings, mode, reranked, …}``.

    ``open_db`` gives the calling thread's read connection (``ThreadConnections.get``); every
    read runs off the event loop, in two batched steps: the pool's units, then the hits.

    Raises:
        InvalidArgument: an unknown mode, an empty or over-long query or k out of range.
    """
    if params.mode not in SEARCH_MODES:
        raise InvalidArgument(
            f"mode {params.mode!r} is not hybrid, lexical or dense",
            metadata={"field": "mode"},
        )
    check_text(params.query, "query", "query")
    if not 1 <= params.k <= MAX_K:
        raise InvalidArgument(f"k must be between 1 and {MAX_K}", metadata={"field": "k"})
    got = await rank(open_db, signals, params, config, default_rerank=default_rerank)
    hits = await to_thread(
        lambda: _hits(open_db(), got.final, got.units, got.cosines, params, config)
    )
    return {
        "hits": hits,
        "warnings": got.warnings,
        "mode": params.mode,
        "reranked": got.reranked,
        "lists": got.lists,
    }
