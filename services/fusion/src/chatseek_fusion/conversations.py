"""Conversation search: which reconstructed discussions answer a question, and the evidence.

Two lists over the chunks of each chat's *current* conversation build: meaning (the question's
vector against chunk vectors) and words (BM25 over chunk text, AND then OR). They are fused per
chunk exactly as hybrid search fuses units (``[search] fusion`` and its weights). Walking the
fused chunks best first, each chunk's conversation becomes a result (up to ``k``); a result's
evidence is its best chunk plus its other chunks that rank within the top ``k`` chunks overall
(at most ``MAX_EVIDENCE``), so a reader gets the passages that answer, not the conversation.

Invariants:
* A result carries its conversation's identity, size and dates, never its whole text: read it
  with ``ShowConversation`` (``chatseek conversations show``), named in ``read``.
* Evidence chunks are whole chunks: the text returned holds exactly the messages listed.
* A result's score is its best chunk's cosine, or null when only words found it; the summary
  is metadata, never generated prose. Chats without a build do not appear.
* Every read runs off the event loop, in one batched step.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from chatseek_core.aio import to_thread
from chatseek_core.config import SearchConfig
from chatseek_core.dates import iso_utc
from chatseek_core.db import Connection
from chatseek_core.errors import ChatseekError, InvalidArgument
from chatseek_core.limits import MAX_CONVERSATIONS_FOUND, MAX_QUERY_BYTES
from chatseek_core.links import deep_link
from chatseek_fusion.fuse import Fused, convex, rrf
from chatseek_fusion.hybrid import ListFilter, Neighbours
from chatseek_fusion.store import UnitRow, load_chats, load_units

__all__ = ["MAX_EVIDENCE", "ConversationSignals", "search_conversations"]

DEPTH_FACTOR = 4
MAX_EVIDENCE = 3


class ConversationSignals(Protocol):
    """The two lists' sources."""

    async def chunks(
        self, query: str, flt: ListFilter, limit: int, any_word: bool
    ) -> list[tuple[int, float, int]]: ...

    async def meaning(
        self, query: str, flt: ListFilter, limit: int, *, current_chunks_only: bool = False
    ) -> Neighbours: ...


@dataclass
class _Result:
    key: tuple[str, int, int, int]
    conversation: dict[str, Any]
    chunks: list[tuple[UnitRow, Fused]] = field(default_factory=list)


def _conversations_of(conn: Connection, chunks: Sequence[UnitRow]) -> dict[int, dict[str, Any]]:
    """Each chunk's conversation (found by the chunk's first message), by chunk unit id; one
    query per build."""
    by_build: dict[int, dict[int, list[int]]] = {}
    for u in chunks:
        if u.build_id is not None:
            by_build.setdefault(u.build_id, {}).setdefault(u.first_msg_id, []).append(u.unit_id)
    out: dict[int, dict[str, Any]] = {}
    for build_id, firsts in by_build.items():
        marks = ",".join("?" for _ in firsts)
        for row in conn.execute(
            "SELECT l.msg_id, c.conversation_id, c.first_msg_id, c.last_msg_id, c.start_date,"
            " c.end_date, c.message_count, c.participants FROM unitize.links l"
            " JOIN unitize.conversations c ON c.build_id = l.build_id"
            "  AND c.conversation_id = l.conversation_id"
            f" WHERE l.build_id = ? AND l.msg_id IN ({marks})",
            (build_id, *firsts),
        ):
            conversation = {
                "build_id": build_id,
                "conversation_id": int(row[1]),
                "first_msg_id": int(row[2]),
                "last_msg_id": int(row[3]),
                "start": iso_utc(int(row[4])),
                "end": iso_utc(int(row[5])),
                "message_count": int(row[6]),
                "participants": json.loads(row[7]),
            }
            for unit_id in firsts[int(row[0])]:
                out[unit_id] = conversation
    return out


def _results(
    conn: Connection,
    fused: list[Fused],
    cosines: dict[int, float],
    k: int,
    since: int,
) -> list[dict[str, Any]]:
    """Group the fused chunks into conversations and render the top ``k``."""
    units = load_units(conn, [f.unit_id for f in fused])
    ranked = [(units[f.unit_id], f) for f in fused if f.unit_id in units]
    conversations = _conversations_of(conn, [u for u, _ in ranked])
    bound = iso_utc(since) if since else ""
    results: dict[tuple[str, int, int, int], _Result] = {}
    for position, (unit, f) in enumerate(ranked):
        conversation = conversations.get(unit.unit_id)
        if conversation is None or (bound and conversation["end"] < bound):
            continue
        key = (unit.account, unit.chat_id, unit.build_id or 0, conversation["conversation_id"])
        result = results.get(key)
        if result is None:
            if len(results) < k:
                results[key] = _Result(key, conversation, [(unit, f)])
        elif position < k and len(result.chunks) < MAX_EVIDENCE:
            result.chunks.append((unit, f))
    chats = load_chats(conn, {(key[0], key[1]) for key in results})
    out: list[dict[str, Any]] = []
    for rank, result in enumerate(results.values(), start=1):
        account, chat_id = result.key[0], result.key[1]
        chat = chats.get((account, chat_id))
        conversation = result.conversation
        link, fallback = deep_link(
            chat.type if chat else "supergroup",
            chat_id,
            chat.username if chat else None,
            conversation["first_msg_id"],
        )
        best = [cosines[u.unit_id] for u, _ in result.chunks if u.unit_id in cosines]
        by: list[str] = []
        for _, f in result.chunks:
            by.extend(name for name in f.by if name not in by)
        out.append(
            {
                "rank": rank,
                "by": by,
                "score": round(max(best), 6) if best else None,
                "score_meaning": "best chunk's cosine similarity; null for a words-only result",
                "conversation": {
                    "chat": chat.to_dict() if chat else {"account": account, "id": chat_id},
                    **conversation,
                },
                "evidence": [
                    {
                        "unit_id": u.unit_id,
                        "first_msg_id": u.first_msg_id,
                        "last_msg_id": u.last_msg_id,
                        "msg_ids": list(u.msg_ids),
                        "by": list(f.by),
                        "text": u.text,
                    }
                    for u, f in result.chunks
                ],
                "read": {
                    "chat": chat_id,
                    "conversation_id": conversation["conversation_id"],
                    "command": (
                        f"chatseek conversations show {conversation['conversation_id']}"
                        f" --chat {chat_id}"
                    ),
                },
                "link": link,
                "fallback_link": fallback,
            }
        )
    return out


async def search_conversations(
    open_db: Callable[[], Connection],
    signals: ConversationSignals,
    question: str,
    flt: ListFilter,
    k: int,
    since: int,
    config: SearchConfig,
) -> dict[str, Any]:
    """Run both lists, fuse their chunks and group them by conversation.

    Returns:
        ``{results, warnings, embedded_only_elsewhere, note}``.

    Raises:
        InvalidArgument: an empty or over-long question or k out of range.
    """
    if not question.strip():
        raise InvalidArgument("the question is empty", metadata={"field": "question"})
    if len(question.encode()) > MAX_QUERY_BYTES:
        raise InvalidArgument(
            f"the question is longer than {MAX_QUERY_BYTES} bytes",
            metadata={"field": "question", "limit": str(MAX_QUERY_BYTES)},
        )
    if not 1 <= k <= MAX_CONVERSATIONS_FOUND:
        raise InvalidArgument(
            f"k must be between 1 and {MAX_CONVERSATIONS_FOUND}", metadata={"field": "k"}
        )
    chunk_filter = ListFilter(
        accounts=flt.accounts, chat_ids=flt.chat_ids, since=0, until=0, kinds=("conversation",)
    )
    depth = max(k * DEPTH_FACTOR, config.list_depth)
    warnings: list[dict[str, str]] = []
    elsewhere: list[int] = []
    lists: dict[str, list[tuple[int, float]]] = {
        "words": [(u, s) for u, s, _ in await signals.chunks(question, chunk_filter, depth, True)]
    }
    cosines: dict[int, float] = {}
    try:
        meaning = await signals.meaning(question, chunk_filter, depth, current_chunks_only=True)
        lists["meaning"] = list(meaning.units)
        cosines = dict(meaning.units)
        warnings.extend(meaning.warnings)
        elsewhere = meaning.embedded_only_elsewhere
    except ChatseekError as exc:
        warnings.append({"code": "DENSE_UNAVAILABLE", "message": f"words only: {exc.message}"})
    weights = {"words": config.words_weight, "meaning": config.meaning_weight}
    if config.fusion == "rrf":
        fused = rrf({n: [u for u, _ in r] for n, r in lists.items()}, weights, k=config.rrf_k)
    else:
        fused = convex(lists, weights, top=depth)
    results = await to_thread(lambda: _results(open_db(), fused, cosines, k, since))
    return {
        "results": results,
        "warnings": warnings,
        "embedded_only_elsewhere": elsewhere,
        "note": "conversation ids change between builds; re-list after rebuilding",
    }
