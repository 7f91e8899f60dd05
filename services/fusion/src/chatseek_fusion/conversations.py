"""Conversation search: which reconstructed discussions answer a question, and the evidence.

It ranks what hybrid search ranks: the units (windows, reply threads, posts) by words, by
meaning and by the conversation each sits in (``hybrid.rank``). Each unit belongs to the
conversation of its chat's *current* build that holds most of its messages. Walking the ranked
units best first, a unit joins the result before it when that result is its own conversation's,
holds fewer than ``MAX_EVIDENCE`` passages, and covers a stretch of the chat the unit overlaps
or adjoins; otherwise it opens a result (up to ``k``). So the text a reader gets follows the
ranking passage by passage, a result reads as one continuous excerpt, and a conversation whose
passages lie apart or are separated by a better passage of another conversation appears more
than once, each time with its own evidence. ``eval/FUSION.md`` compares this with grouping every
passage of a conversation under its best one (better MRR, worse recall within a token budget)
and with joining a run of one conversation's passages wherever they lie.

Invariants:
* A result names its conversation (id, size, dates, participants), never its whole text: read
  it with ``ShowConversation`` (``chatseek conversations show``), named in ``read``.
* Evidence is a unit's messages, one line each, in message order, less the messages an earlier
  passage already showed; a passage with nothing new is left out. A line carries the date only
  when it differs from the line before in its passage (the time always). A unit may hold
  messages the linker put in a neighbouring conversation: they stay, as the talk around it.
* A result's score is its best passage's cosine, or null when only words found it; the summary
  is metadata, never generated prose. Chats without a build do not appear.
* Every read runs off the event loop, in batched steps.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

from chatseek_core.aio import to_thread
from chatseek_core.config import SearchConfig
from chatseek_core.dates import iso_utc
from chatseek_core.db import Connection
from chatseek_core.errors import InvalidArgument
from chatseek_core.limits import MAX_CONVERSATIONS_FOUND
from chatseek_core.links import deep_link
from chatseek_core.render import render_lines, without_repeated_dates
from chatseek_fusion.fuse import Fused
from chatseek_fusion.hybrid import (
    DEFAULT_KINDS,
    ListFilter,
    Ranking,
    SearchParams,
    Signals,
    check_text,
    rank,
)
from chatseek_fusion.store import (
    MessageRow,
    UnitRow,
    conversation_infos,
    conversations_of_messages,
    load_chats,
    load_messages_of,
)

__all__ = [
    "MAX_EVIDENCE",
    "group_passages",
    "main_conversation",
    "search_conversations",
]

MAX_EVIDENCE = 3
K = TypeVar("K", bound=Hashable)
M = TypeVar("M", bound=Hashable)


def main_conversation(msg_ids: Sequence[int], conversation_of: Mapping[int, K]) -> K | None:
    """The conversation holding most of these messages (a tie goes to the one holding the
    earliest of them), or None when no message has one."""
    placed = [conversation_of[i] for i in sorted(msg_ids) if i in conversation_of]
    if not placed:
        return None
    counts = Counter(placed)
    most = max(counts.values())
    return next(c for c in placed if counts[c] == most)


def group_passages(
    ranked: Sequence[tuple[int, K | None, Sequence[M]]],
    k: int,
    max_evidence: int = MAX_EVIDENCE,
    *,
    position: Callable[[M], int],
) -> list[tuple[K, list[tuple[int, list[M]]]]]:
    """Results from ranked units: ``[(conversation, [(unit id, its new messages)])]``, at most
    ``k``.

    Args:
        ranked: ``(unit_id, conversation, messages)`` best first, the messages in the order they
            are shown; a unit of no conversation is skipped.
        k: the most results.
        max_evidence: the most passages one result holds.
        position: a message's place in its chat (its message id).

    A unit's passage is its messages no earlier passage holds; a unit with none is skipped. A
    passage joins the result before it when that result is its conversation's, has room, and
    the unit overlaps or adjoins the stretch of the chat the result's units cover (one
    continuous excerpt); otherwise it opens a new result.
    """
    out: list[tuple[K, list[tuple[int, list[M]]]]] = []
    shown: set[M] = set()
    lo = hi = 0  # the stretch the last result's units cover
    for unit_id, conversation, messages in ranked:
        if conversation is None:
            continue
        fresh = [m for m in messages if m not in shown]
        if not fresh:
            continue
        at = [position(m) for m in messages]
        first, last = min(at), max(at)
        if (
            out
            and out[-1][0] == conversation
            and len(out[-1][1]) < max_evidence
            and first <= hi + 1
            and last >= lo - 1
        ):
            out[-1][1].append((unit_id, fresh))
            lo, hi = min(lo, first), max(hi, last)
        elif len(out) < k:
            out.append((conversation, [(unit_id, fresh)]))
            lo, hi = first, last
        else:
            break
        shown.update(fresh)
    return out


def _msg_id(message: tuple[str, int, int]) -> int:
    return message[2]


def _results(conn: Connection, got: Ranking, k: int, since: int) -> list[dict[str, Any]]:
    """Group the ranked units into conversation results and render them."""
    ranked = [(got.units[f.unit_id], f) for _, f in got.final if f.unit_id in got.units]
    wanted: dict[tuple[str, int], set[int]] = {}
    for unit, _ in ranked:
        wanted.setdefault((unit.account, unit.chat_id), set()).update(unit.msg_ids)
    placed = conversations_of_messages(conn, wanted)
    Key = tuple[str, int, int, int]  # account, chat, build, conversation
    keys: dict[int, Key] = {}
    for unit, _ in ranked:
        where = main_conversation(unit.msg_ids, placed.get((unit.account, unit.chat_id), {}))
        if where is not None:
            keys[unit.unit_id] = (unit.account, unit.chat_id, *where)
    infos = conversation_infos(conn, {(key[2], key[3]) for key in keys.values()})
    walk: list[tuple[int, Key | None, list[tuple[str, int, int]]]] = []
    for unit, _ in ranked:
        key = keys.get(unit.unit_id)
        info = infos.get((key[2], key[3])) if key is not None else None
        if key is None or info is None or info.end_date < since:
            walk.append((unit.unit_id, None, []))
        else:
            walk.append((unit.unit_id, key, [(key[0], key[1], i) for i in sorted(unit.msg_ids)]))
    by_id = {unit.unit_id: (unit, f) for unit, f in ranked}
    groups = group_passages(walk, k, position=_msg_id)
    chats = load_chats(conn, {(key[0], key[1]) for key, _ in groups})
    need: dict[tuple[str, int], set[int]] = {}
    for key, passages in groups:
        for _, new in passages:
            need.setdefault((key[0], key[1]), set()).update(i for _, _, i in new)
    messages = load_messages_of(conn, need)
    out: list[dict[str, Any]] = []
    for key, passages in groups:
        account, chat_id = key[0], key[1]
        rows = messages.get((account, chat_id), {})
        evidence: list[tuple[UnitRow, Fused, list[MessageRow]]] = []
        for unit_id, new in passages:
            unit, f = by_id[unit_id]
            lines = [rows[i] for _, _, i in new if i in rows]
            if lines:
                evidence.append((unit, f, lines))
        if not evidence:
            continue
        info = infos[(key[2], key[3])]
        chat = chats.get((account, chat_id))
        link, fallback = deep_link(
            chat.type if chat else "supergroup",
            chat_id,
            chat.username if chat else None,
            info.first_msg_id,
        )
        best = [got.cosines[u.unit_id] for u, _, _ in evidence if u.unit_id in got.cosines]
        by: list[str] = []
        for _, f, _ in evidence:
            names = ("words" if n in ("words", "messages") else n for n in f.by)
            by.extend(n for n in names if n not in by)
        out.append(
            {
                "rank": len(out) + 1,
                "by": by,
                "score": round(max(best), 6) if best else None,
                "score_meaning": "best passage's cosine similarity; null for a words-only result",
                "conversation": {
                    "chat": chat.to_dict() if chat else {"account": account, "id": chat_id},
                    "build_id": info.build_id,
                    "conversation_id": info.conversation_id,
                    "first_msg_id": info.first_msg_id,
                    "last_msg_id": info.last_msg_id,
                    "start": iso_utc(info.start_date),
                    "end": iso_utc(info.end_date),
                    "message_count": info.message_count,
                    "participants": info.participants,
                },
                "evidence": [
                    {
                        "unit_id": unit.unit_id,
                        "first_msg_id": fresh[0].msg_id,
                        "last_msg_id": fresh[-1].msg_id,
                        "msg_ids": [m.msg_id for m in fresh],
                        "by": sorted({"words" if n in ("words", "messages") else n for n in f.by}),
                        "text": "\n".join(without_repeated_dates(render_lines(fresh))),
                    }
                    for unit, f, fresh in evidence
                ],
                "read": {
                    "chat": chat_id,
                    "conversation_id": info.conversation_id,
                    "command": (
                        f"chatseek conversations show {info.conversation_id} --chat {chat_id}"
                    ),
                },
                "link": link,
                "fallback_link": fallback,
            }
        )
    return out


async def search_conversations(
    open_db: Callable[[], Connection],
    signals: Signals,
    question: str,
    flt: ListFilter,
    k: int,
    since: int,
    config: SearchConfig,
) -> dict[str, Any]:
    """Rank units as hybrid search does and group them by conversation.

    Returns:
        ``{results, warnings, embedded_only_elsewhere, note}``.

    Raises:
        InvalidArgument: an empty or over-long question or k out of range.
    """
    check_text(question, "question", "question")
    if not 1 <= k <= MAX_CONVERSATIONS_FOUND:
        raise InvalidArgument(
            f"k must be between 1 and {MAX_CONVERSATIONS_FOUND}", metadata={"field": "k"}
        )
    units_filter = ListFilter(
        accounts=flt.accounts, chat_ids=flt.chat_ids, since=0, until=0, kinds=DEFAULT_KINDS
    )
    # Enough units for k results of up to MAX_EVIDENCE passages each.
    params = SearchParams(query=question, flt=units_filter, mode="hybrid", k=k * MAX_EVIDENCE)
    got = await rank(open_db, signals, params, config)
    results = await to_thread(lambda: _results(open_db(), got, k, since))
    return {
        "results": results,
        "warnings": got.warnings,
        "embedded_only_elsewhere": got.elsewhere,
        "note": "conversation ids change between builds; re-list after rebuilding",
    }
