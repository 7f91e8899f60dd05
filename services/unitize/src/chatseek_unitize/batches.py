"""Agent-assisted linking: batch status, batches of uncertain messages, and stored answers.

Owns ``agent_answers``. Invariants:
* chatseek never calls a language model: an agent reads a batch, decides, and sends answers.
* An answer names a message and either an earlier message of the same chat and topic as its
  parent or ``"new"`` (starts a conversation). It is stored with ingest's content hash of the
  message and of the parent; when either changed or is gone, the answer is stale: counted, and
  ignored by builds (``valid_answers``), never deleted behind the user's back.
* A batch holds the least confident decisions of the current build that no reply fixed and no
  valid answer covers; answers apply at the next build.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chatseek_core import db
from chatseek_core.dates import iso_utc
from chatseek_core.db import Connection
from chatseek_core.errors import IndexNotReady, InvalidValue
from chatseek_unitize import loader
from chatseek_unitize.cutting import chrono_key, is_unit_member
from chatseek_unitize.model import Msg

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "MAX_BATCH_SIZE",
    "UNCERTAIN_BELOW",
    "AnswerCheck",
    "answer_batch",
    "batch_status",
    "current_build_id",
    "get_batch",
    "valid_answers",
]

DEFAULT_BATCH_SIZE = 20
MAX_BATCH_SIZE = 200
MAX_ANSWERS = 5000
UNCERTAIN_BELOW = 0.9
"""A decision the scorer made with less confidence than this is worth an agent's look."""
CANDIDATES_PER_MESSAGE = 5
CANDIDATE_TEXT_CHARS = 300
MESSAGE_TEXT_CHARS = 1000
NEW_CONVERSATION = "new"
FIXED_REASONS = ("reply", "agent")


def current_build_id(conn: Connection, account: str, chat_id: int) -> int:
    """The chat's current complete build.

    Raises:
        IndexNotReady: the chat has no complete conversation build yet.
    """
    row = conn.execute(
        "SELECT b.build_id FROM current_builds c JOIN conversation_builds b"
        " ON b.build_id = c.build_id WHERE c.account = ? AND c.chat_id = ?"
        " AND b.state = 'complete'",
        (account, chat_id),
    ).fetchone()
    if row is None:
        raise IndexNotReady(
            f"chat {chat_id} has no conversation build yet",
            hint="run `chatseek conversations build --chat CHAT` first",
            metadata={"chat_id": str(chat_id)},
        )
    return int(row[0])


# --- stored answers ---


@dataclass(frozen=True, slots=True)
class AnswerCheck:
    """Stored answers of one chat split by staleness.

    Attributes:
        valid: ``{msg_id: parent id or None for "new"}`` of answers still current.
        stale: Message ids whose answer refers to an edited or deleted message or parent.
    """

    valid: dict[int, int | None]
    stale: list[int]


def valid_answers(conn: Connection, account: str, chat_id: int) -> AnswerCheck:
    """Split the chat's stored answers into current and stale ones (see the module docstring)."""
    rows = conn.execute(
        "SELECT msg_id, parent_id, msg_hash, parent_hash FROM agent_answers"
        " WHERE account = ? AND chat_id = ? ORDER BY msg_id",
        (account, chat_id),
    ).fetchall()
    ids = {int(r[0]) for r in rows} | {int(r[1]) for r in rows if r[1] is not None}
    hashes = loader.content_hashes(conn, account, chat_id, ids)
    valid: dict[int, int | None] = {}
    stale: list[int] = []
    for msg_id, parent_id, msg_hash, parent_hash in rows:
        fresh = hashes.get(int(msg_id)) == msg_hash and (
            parent_id is None or hashes.get(int(parent_id)) == parent_hash
        )
        if fresh:
            valid[int(msg_id)] = None if parent_id is None else int(parent_id)
        else:
            stale.append(int(msg_id))
    return AnswerCheck(valid=valid, stale=stale)


# --- status and batches ---


def _uncertain(
    conn: Connection,
    build_id: int,
    answered: Mapping[int, int | None],
    below: float = UNCERTAIN_BELOW,
) -> list[tuple[int, int | None, str, float, str | None]]:
    marks = ",".join("?" * len(FIXED_REASONS))
    rows = conn.execute(
        "SELECT msg_id, parent_id, reason, confidence, rejected FROM links"
        f" WHERE build_id = ? AND reason NOT IN ({marks}) AND confidence < ?"
        " ORDER BY confidence, msg_id",
        (build_id, *FIXED_REASONS, below),
    ).fetchall()
    return [
        (int(r[0]), None if r[1] is None else int(r[1]), str(r[2]), float(r[3]), r[4])
        for r in rows
        if int(r[0]) not in answered
    ]


def batch_status(conn: Connection, account: str, chat_id: int) -> dict[str, Any]:
    """``{chat_id, build_id, messages, answered, stale_answers, unanswered_uncertain,
    batch_size}`` for the chat's current build.

    Raises:
        IndexNotReady: the chat has no build yet.
    """
    build_id = current_build_id(conn, account, chat_id)
    answers = valid_answers(conn, account, chat_id)
    messages = int(
        conn.execute("SELECT COUNT(*) FROM links WHERE build_id = ?", (build_id,)).fetchone()[0]
    )
    return {
        "chat_id": chat_id,
        "build_id": build_id,
        "messages": messages,
        "answered": len(answers.valid),
        "stale_answers": len(answers.stale),
        "unanswered_uncertain": len(_uncertain(conn, build_id, answers.valid)),
        "batch_size": DEFAULT_BATCH_SIZE,
    }


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


def _message_text(m: Msg) -> str:
    parts = []
    if m.media_kind:
        parts.append(f"[{m.media_kind}]")
    if m.media_text:
        parts.append(m.media_text)
    if m.text:
        parts.append(m.text)
    return " ".join(parts)


def _earlier_in_topic(conn: Connection, account: str, chat_id: int, m: Msg, want: int) -> list[Msg]:
    out = loader.earlier_in_topic(conn, account, chat_id, m, want * 2)
    return [c for c in out if is_unit_member(c)][:want]


def get_batch(
    conn: Connection, account: str, chat_id: int, size: int = DEFAULT_BATCH_SIZE
) -> dict[str, Any]:
    """A batch of the least confident unanswered decisions with their candidate parents.

    The document is ``{chat_id, build_id, batch_id, answer_format, messages: [{msg_id, date,
    sender, text, current: {parent_id, reason, confidence}, candidates: [{msg_id, date, sender,
    text, score}]}]}``; ``score`` is the scorer's probability, or null for a nearby message the
    scorer did not rank. Candidates are earlier messages of the same topic, best first.

    Raises:
        InvalidValue: ``size`` outside 1..``MAX_BATCH_SIZE``.
        IndexNotReady: the chat has no build yet.
    """
    if not 1 <= size <= MAX_BATCH_SIZE:
        raise InvalidValue(
            f"batch size must be between 1 and {MAX_BATCH_SIZE}", metadata={"field": "size"}
        )
    build_id = current_build_id(conn, account, chat_id)
    answers = valid_answers(conn, account, chat_id)
    # The least confident first; when every decision is confident the agent still gets the
    # weakest ones it asked for (status counts only those below the threshold).
    picked = _uncertain(conn, build_id, answers.valid, below=float("inf"))[:size]
    wanted: set[int] = set()
    scored: dict[int, list[tuple[int, float]]] = {}
    for msg_id, parent_id, _reason, confidence, rejected in picked:
        options: list[tuple[int, float]] = []
        if parent_id is not None:
            options.append((parent_id, confidence))
        for cand, score in json.loads(rejected) if rejected else []:
            if int(cand) >= 0:
                options.append((int(cand), float(score)))
        scored[msg_id] = options
        wanted.add(msg_id)
        wanted.update(c for c, _ in options)
    msgs = loader.load_ids(conn, account, chat_id, wanted)
    out: list[dict[str, Any]] = []
    for msg_id, parent_id, reason, confidence, _rejected in picked:
        m = msgs.get(msg_id)
        if m is None:
            continue
        candidates: list[dict[str, Any]] = []
        seen: set[int] = set()
        extra = _earlier_in_topic(conn, account, chat_id, m, CANDIDATES_PER_MESSAGE)
        ranked = [(msgs.get(c), s) for c, s in scored[msg_id]]
        for cand, score in [*ranked, *((c, None) for c in extra)]:
            if cand is None or cand.msg_id in seen or len(candidates) >= CANDIDATES_PER_MESSAGE:
                continue
            seen.add(cand.msg_id)
            candidates.append(
                {
                    "msg_id": cand.msg_id,
                    "date": iso_utc(cand.date),
                    "sender": cand.sender_name,
                    "text": _clip(_message_text(cand), CANDIDATE_TEXT_CHARS),
                    "score": score,
                }
            )
        out.append(
            {
                "msg_id": msg_id,
                "date": iso_utc(m.date),
                "sender": m.sender_name,
                "text": _clip(_message_text(m), MESSAGE_TEXT_CHARS),
                "current": {"parent_id": parent_id, "reason": reason, "confidence": confidence},
                "candidates": candidates,
            }
        )
    return {
        "chat_id": chat_id,
        "build_id": build_id,
        "batch_id": f"{build_id}-{out[0]['msg_id']}" if out else f"{build_id}-empty",
        "answer_format": {"answers": [{"msg_id": "int", "parent": "int | 'new'"}]},
        "messages": out,
    }


# --- answers ---


def _parse(answer_json: str) -> list[Any]:
    try:
        doc = json.loads(answer_json)
    except (ValueError, RecursionError) as exc:
        raise InvalidValue(
            "the answer is not valid JSON",
            hint='send {"answers": [{"msg_id": 1002, "parent": 1001}, ...]}',
            metadata={"field": "answer_json"},
        ) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("answers"), list):
        raise InvalidValue(
            'the answer must be an object with an "answers" list',
            hint='send {"answers": [{"msg_id": 1002, "parent": 1001 | "new"}]}',
            metadata={"field": "answer_json"},
        )
    answers: list[Any] = doc["answers"]
    if len(answers) > MAX_ANSWERS:
        raise InvalidValue(
            f"at most {MAX_ANSWERS} answers per call", metadata={"field": "answer_json"}
        )
    return answers


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def answer_batch(conn: Connection, account: str, chat_id: int, answer_json: str) -> dict[str, Any]:
    """Validate and store answers; returns ``{chat_id, stored, rejected: [{index, msg_id,
    reason}]}``; a rejected entry's ``msg_id`` is the one sent when it is an integer or a
    string, else null.

    Each entry is ``{"msg_id": int, "parent": int | "new"}``. An entry is rejected (and the
    others still stored) when it is malformed (``INVALID_ENTRY``), repeats a message
    (``DUPLICATE``), names a message the chat does not have (``MESSAGE_NOT_FOUND``) or one that
    belongs to no conversation (``NOT_LINKABLE``), or a parent that is missing
    (``PARENT_NOT_FOUND``), not linkable (``PARENT_NOT_LINKABLE``), not earlier
    (``PARENT_NOT_EARLIER``) or in another topic (``PARENT_IN_OTHER_TOPIC``). A stored answer
    replaces the message's previous one.

    Raises:
        InvalidValue: the document itself is not JSON of the documented shape.
    """
    entries = _parse(answer_json)
    rejected: list[dict[str, Any]] = []
    wanted: set[int] = set()
    for entry in entries:
        if isinstance(entry, dict):
            for field in ("msg_id", "parent"):
                if _is_int(entry.get(field)):
                    wanted.add(int(entry[field]))
    with db.transaction(conn):
        msgs = loader.load_ids(conn, account, chat_id, wanted)
        hashes = loader.content_hashes(conn, account, chat_id, wanted)
        rows: list[tuple[str, int, int, int | None, str, str | None]] = []
        seen: set[int] = set()
        for index, entry in enumerate(entries):
            verdict = _check(entry, msgs, seen)
            msg_id = entry.get("msg_id") if isinstance(entry, dict) else None
            if verdict is not None:
                echoed = msg_id if _is_int(msg_id) or isinstance(msg_id, str) else None
                rejected.append({"index": index, "msg_id": echoed, "reason": verdict})
                continue
            parent = entry["parent"]
            parent_id = None if parent == NEW_CONVERSATION else int(parent)
            rows.append(
                (
                    account,
                    chat_id,
                    int(entry["msg_id"]),
                    parent_id,
                    hashes[int(entry["msg_id"])],
                    None if parent_id is None else hashes[parent_id],
                )
            )
        conn.executemany(
            "INSERT INTO agent_answers (account, chat_id, msg_id, parent_id, msg_hash,"
            " parent_hash) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (account, chat_id, msg_id)"
            " DO UPDATE SET parent_id = excluded.parent_id, msg_hash = excluded.msg_hash,"
            " parent_hash = excluded.parent_hash, answered_at = unixepoch()",
            rows,
        )
    return {"chat_id": chat_id, "stored": len(rows), "rejected": rejected}


def _check(entry: Any, msgs: Mapping[int, Msg], seen: set[int]) -> str | None:
    """Why ``entry`` cannot be stored, or None when it can (adds its id to ``seen``)."""
    if not isinstance(entry, dict) or not _is_int(entry.get("msg_id")):
        return "INVALID_ENTRY"
    parent = entry.get("parent")
    if parent != NEW_CONVERSATION and not _is_int(parent):
        return "INVALID_ENTRY"
    msg_id = int(entry["msg_id"])
    if msg_id in seen:
        return "DUPLICATE"
    m = msgs.get(msg_id)
    if m is None:
        return "MESSAGE_NOT_FOUND"
    if not is_unit_member(m):
        return "NOT_LINKABLE"
    if parent != NEW_CONVERSATION:
        p = msgs.get(int(entry["parent"]))
        if p is None:
            return "PARENT_NOT_FOUND"
        if not is_unit_member(p):
            return "PARENT_NOT_LINKABLE"
        if chrono_key(p) >= chrono_key(m):
            return "PARENT_NOT_EARLIER"
        if p.topic_id != m.topic_id:
            return "PARENT_IN_OTHER_TOPIC"
    seen.add(msg_id)
    return None
