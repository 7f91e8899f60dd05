"""Conversation search: which reconstructed discussions answer a question.

Two branches over the chunks of each chat's *current* conversation build: meaning (the
question's vector against chunk vectors; a conversation keeps its best chunk) and words (the
question's words over chunk text, AND then OR). Both become ranked lists of conversations,
fused by RRF. A result's score is its best chunk's cosine, or null when only words found it;
its summary is metadata, never generated prose. Chats without a build do not appear.
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

from chatseek_core.db import Connection
from chatseek_core.errors import ChatseekError, InvalidArgument
from chatseek_core.links import deep_link
from chatseek_fusion.fuse import rrf
from chatseek_fusion.hybrid import MAX_QUERY_BYTES, ListFilter, Neighbours
from chatseek_fusion.store import load_chats, load_units

__all__ = ["ConversationSignals", "search_conversations"]

MAX_K = 50
DEPTH_FACTOR = 4
SNIPPET_CHARS = 600


class ConversationSignals(Protocol):
    """The two branches' sources."""

    async def chunks(
        self, query: str, flt: ListFilter, limit: int, any_word: bool
    ) -> list[tuple[int, float, int]]: ...

    async def meaning(
        self, query: str, flt: ListFilter, limit: int, *, current_chunks_only: bool = False
    ) -> Neighbours: ...


def _iso(ts: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _conversation_of(conn: Connection, build_id: int, first_msg_id: int) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT c.conversation_id, c.first_msg_id, c.last_msg_id, c.start_date, c.end_date,"
        " c.message_count, c.participants FROM unitize.links l"
        " JOIN unitize.conversations c ON c.build_id = l.build_id"
        "  AND c.conversation_id = l.conversation_id"
        " WHERE l.build_id = ? AND l.msg_id = ?",
        (build_id, first_msg_id),
    ).fetchone()
    if row is None:
        return None
    members = [
        int(r[0])
        for r in conn.execute(
            "SELECT msg_id FROM unitize.links WHERE build_id = ? AND conversation_id = ?"
            " ORDER BY msg_id",
            (build_id, int(row[0])),
        )
    ]
    return {
        "build_id": build_id,
        "conversation_id": int(row[0]),
        "first_msg_id": int(row[1]),
        "last_msg_id": int(row[2]),
        "start": _iso(int(row[3])),
        "end": _iso(int(row[4])),
        "message_count": int(row[5]),
        "participants": json.loads(row[6]),
        "msg_ids": members,
    }


async def search_conversations(
    conn: Connection,
    signals: ConversationSignals,
    question: str,
    flt: ListFilter,
    k: int,
    since: int,
) -> dict[str, Any]:
    """Run both branches and fuse them; returns ``{results, warnings, embedded_only_elsewhere}``.

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
    if not 1 <= k <= MAX_K:
        raise InvalidArgument(f"k must be between 1 and {MAX_K}", metadata={"field": "k"})
    chunk_filter = ListFilter(
        accounts=flt.accounts, chat_ids=flt.chat_ids, since=0, until=0, kinds=("conversation",)
    )
    depth = k * DEPTH_FACTOR
    warnings: list[dict[str, str]] = []
    elsewhere: list[int] = []
    words = await signals.chunks(question, chunk_filter, depth, True)
    cosines: dict[int, float] = {}
    try:
        meaning = await signals.meaning(question, chunk_filter, depth, current_chunks_only=True)
        cosines = dict(meaning.units)
        warnings.extend(meaning.warnings)
        elsewhere = meaning.embedded_only_elsewhere
    except ChatseekError as exc:
        warnings.append({"code": "DENSE_UNAVAILABLE", "message": f"words only: {exc.message}"})
    units = load_units(conn, [u for u, _, _ in words] + list(cosines))
    by_conversation: dict[tuple[str, int, int, int], dict[str, Any]] = {}

    def key_of(unit_id: int) -> tuple[str, int, int, int] | None:
        u = units.get(unit_id)
        if u is None or u.build_id is None:
            return None
        conversation = _conversation_of(conn, u.build_id, u.first_msg_id)
        if conversation is None:
            return None
        key = (u.account, u.chat_id, u.build_id, conversation["conversation_id"])
        entry = by_conversation.setdefault(
            key, {"conversation": conversation, "best_chunk": unit_id, "cosine": None}
        )
        cosine = cosines.get(unit_id)
        if cosine is not None and (entry["cosine"] is None or cosine > entry["cosine"]):
            entry["cosine"] = cosine
            entry["best_chunk"] = unit_id
        return key

    lists: dict[str, list[tuple[str, int, int, int]]] = {"meaning": [], "words": []}
    for unit_id, _ in sorted(cosines.items(), key=lambda item: -item[1]):
        key = key_of(unit_id)
        if key is not None and key not in lists["meaning"]:
            lists["meaning"].append(key)
    for unit_id, _, _ in words:
        key = key_of(unit_id)
        if key is not None and key not in lists["words"]:
            lists["words"].append(key)
    index = {key: i for i, key in enumerate(by_conversation)}
    fused = rrf({name: [index[key] for key in keys] for name, keys in lists.items()})
    keys = list(by_conversation)
    chats = load_chats(conn, {(key[0], key[1]) for key in keys})
    results: list[dict[str, Any]] = []
    for f in fused:
        key = keys[f.unit_id]
        entry = by_conversation[key]
        conversation = entry["conversation"]
        if since and conversation["end"] < _iso(since):
            continue
        chat = chats.get((key[0], key[1]))
        chunk = units[entry["best_chunk"]]
        link, fallback = deep_link(
            chat.type if chat else "supergroup",
            key[1],
            chat.username if chat else None,
            conversation["first_msg_id"],
        )
        results.append(
            {
                "rank": len(results) + 1,
                "by": f.by,
                "score": None if entry["cosine"] is None else round(entry["cosine"], 6),
                "score_meaning": "best chunk's cosine similarity; null for a words-only result",
                "conversation": {
                    "chat": chat.to_dict() if chat else {"account": key[0], "id": key[1]},
                    **conversation,
                },
                "chunk": {
                    "unit_id": chunk.unit_id,
                    "first_msg_id": chunk.first_msg_id,
                    "last_msg_id": chunk.last_msg_id,
                    "text": chunk.text[:SNIPPET_CHARS],
                },
                "link": link,
                "fallback_link": fallback,
            }
        )
        if len(results) == k:
            break
    return {
        "results": results,
        "warnings": warnings,
        "embedded_only_elsewhere": elsewhere,
        "note": "conversation ids change between builds; re-list after rebuilding",
    }
