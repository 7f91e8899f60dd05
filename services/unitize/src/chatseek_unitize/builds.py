"""Conversation builds: link a chat's messages, group and chunk them, and publish atomically.

Owns ``conversation_builds``, ``current_builds``, ``links``, ``conversations`` and the chunk
units (kind ``conversation``). Invariants:
* A build writes under a new ``build_id`` in state ``building``; one final transaction marks it
  ``complete``, points ``current_builds`` at it and retires the previous build. Readers never see
  a build in progress; one that fails or is killed exposes nothing, and its leftovers go at the
  next start (``discard_unfinished``) or the chat's next build.
* Chunks are keyed by content hash: a chunk the previous build had keeps its ``unit_id``; only
  new and dropped chunks are announced, in the publishing transaction.
* Stale agent answers are not applied; builds of one chat never overlap in the process.
* A chat gone from the store takes its builds, chunks and answers along (``drop_chat_builds``).
* A message gone from the store leaves the current build's chunks at once (``prune_chunks``),
  so its text is no longer searchable; links and conversation rows keep it until the next build.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, astuple, dataclass, field, fields, replace
from itertools import chain
from pathlib import Path
from typing import TypeVar

import numpy as np

from chatseek_core import db, memory
from chatseek_core.db import Connection
from chatseek_core.errors import ChatNotFound
from chatseek_unitize import loader
from chatseek_unitize.batches import valid_answers
from chatseek_unitize.chunking import chunk_conversation
from chatseek_unitize.cutting import chrono_key
from chatseek_unitize.linking import (
    WEIGHTS_PATH,
    LearnedScorer,
    LinkReason,
    LinkScorer,
    RuleScorer,
    build_links,
)
from chatseek_unitize.linkstream import LinkSink, stream_links
from chatseek_unitize.model import RECIPE_VERSION, Msg
from chatseek_unitize.spill import Col, Spill
from chatseek_unitize.store import (
    StoredUnit,
    UnitWriter,
    stored_units,
    topic_key,
    units_by_ident,
)

__all__ = [
    "CHUNK_KIND",
    "WRITE_BATCH",
    "BuildReport",
    "ChunkUnit",
    "build_chat",
    "build_chats",
    "built_chats",
    "default_scorer",
    "discard_unfinished",
    "drop_chat_builds",
    "prune_chunks",
    "scorer_name",
]

log = logging.getLogger(__name__)

CHUNK_KIND = "conversation"
UNKNOWN_SENDER = "unknown"
_IN_CHUNK = 500
WRITE_BATCH = 5000
"""Links (or chunks) written per transaction while a build is in progress."""

Progress = Callable[[tuple[str, int, int]], None]

_locks: dict[tuple[str, int], threading.Lock] = {}
_locks_guard = threading.Lock()


@dataclass(frozen=True, slots=True)
class ChunkUnit:
    """A conversation chunk as stored in ``units`` (kind ``conversation``).

    Attributes mirror ``model.Unit``; ``key`` is ``h:<content hash>`` (``:<n>`` appended for
    the n-th repeat of the same text in one build).
    """

    key: str
    topic_id: int | None
    msg_ids: tuple[int, ...]
    first_date: int
    last_date: int
    senders: tuple[str, ...]
    reactions: int
    text: str
    content_hash: str
    recipe: int = RECIPE_VERSION
    kind: str = CHUNK_KIND


def text_dropped(chunk: ChunkUnit) -> ChunkUnit:
    """``chunk`` without its text, for ``UnitWriter.retarget``: a rebuild that reuses most
    chunks held every text of the chat until it published."""
    return replace(chunk, text="")


@dataclass
class BuildReport:
    """What one build did; ``to_dict`` is the JSON the RPC streams as its result."""

    account: str
    chat_id: int
    build_id: int
    previous_build_id: int | None
    scorer: str
    messages: int = 0
    conversations: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    answers_applied: int = 0
    stale_answers: int = 0
    chunks: int = 0
    chunks_reused: int = 0
    chunks_new: int = 0
    chunks_dropped: int = 0
    ms: int = 0

    def to_dict(self) -> dict[str, object]:
        """The report as a JSON-shaped mapping."""
        return asdict(self)


def default_scorer() -> LinkScorer:
    """The learned scorer when its weights ship with the package, else the rule scorer."""
    if WEIGHTS_PATH.exists():
        return LearnedScorer()
    return RuleScorer()


def scorer_name(scorer: LinkScorer) -> str:
    """The name a build records for its scorer: ``learned``, ``rules`` or the class name."""
    if isinstance(scorer, LearnedScorer):
        return "learned"
    if isinstance(scorer, RuleScorer):
        return "rules"
    return type(scorer).__name__


def _lock_for(account: str, chat_id: int) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault((account, chat_id), threading.Lock())


def _progress(on_progress: Progress | None, stage: str, done: int, total: int) -> None:
    if on_progress is not None:
        on_progress((stage, done, total))


# --- cleanup ---


def _discard(conn: Connection, build_ids: Sequence[int]) -> int:
    """Delete the rows of unpublished builds and mark them failed (inside a transaction)."""
    for build_id in build_ids:
        chunk_ids = [
            (int(r[0]),)
            for r in conn.execute(
                "SELECT unit_id FROM units WHERE build_id = ? AND kind = ?", (build_id, CHUNK_KIND)
            )
        ]
        conn.executemany("DELETE FROM unit_members WHERE unit_id = ?", chunk_ids)
        conn.executemany("DELETE FROM units WHERE unit_id = ?", chunk_ids)
        conn.execute("DELETE FROM links WHERE build_id = ?", (build_id,))
        conn.execute("DELETE FROM conversations WHERE build_id = ?", (build_id,))
        conn.execute(
            "UPDATE conversation_builds SET state = 'failed', finished_at = unixepoch()"
            " WHERE build_id = ?",
            (build_id,),
        )
    return len(build_ids)


def drop_chat_builds(conn: Connection, writer: UnitWriter, account: str, chat_id: int) -> int:
    """Forget every build of a chat gone from the store (inside a transaction).

    Its chunks are deleted through ``writer`` (so the word index and the vectors follow), its
    links, conversations and agent answers with them: no later build will replace them.

    Returns:
        How many builds were dropped.
    """
    writer.delete(stored_units(conn, account, chat_id, "kind = ?", (CHUNK_KIND,)))
    builds = [
        (int(r[0]),)
        for r in conn.execute(
            "SELECT build_id FROM conversation_builds WHERE account = ? AND chat_id = ?",
            (account, chat_id),
        )
    ]
    conn.execute("DELETE FROM current_builds WHERE account = ? AND chat_id = ?", (account, chat_id))
    conn.executemany("DELETE FROM links WHERE build_id = ?", builds)
    conn.executemany("DELETE FROM conversations WHERE build_id = ?", builds)
    conn.executemany("DELETE FROM conversation_builds WHERE build_id = ?", builds)
    conn.execute("DELETE FROM agent_answers WHERE account = ? AND chat_id = ?", (account, chat_id))
    return len(builds)


def prune_chunks(
    conn: Connection, writer: UnitWriter, account: str, chat_id: int, gone: Iterable[int]
) -> int:
    """Take messages ingest no longer has out of the chat's current conversation chunks.

    Runs inside the caller's transaction. Each chunk holding one is rendered again from its
    remaining messages under the key of its new text (``h:<hash>``, a free ``:<n>`` appended on
    a clash), so the word index and the vectors replace it; a chunk left without words is
    deleted. Nothing is pruned while a build of the chat is running: that build loaded the
    messages before it began and publishes its own chunks.

    Returns:
        How many chunks were rewritten or deleted.
    """
    ids = sorted(set(gone))
    if not ids or _building(conn, account, chat_id):
        return 0
    unit_ids: set[int] = set()
    for start in range(0, len(ids), _IN_CHUNK):
        part = ids[start : start + _IN_CHUNK]
        marks = ",".join("?" * len(part))
        unit_ids.update(
            int(r[0])
            for r in conn.execute(
                "SELECT DISTINCT m.unit_id FROM unit_members m JOIN units u"
                " ON u.unit_id = m.unit_id JOIN current_builds c ON c.build_id = u.build_id"
                f" WHERE m.account = ? AND m.chat_id = ? AND m.msg_id IN ({marks})"
                " AND u.kind = ?",
                (account, chat_id, *part, CHUNK_KIND),
            )
        )
    if not unit_ids:
        return 0
    marks = ",".join("?" * len(unit_ids))
    chunks = stored_units(conn, account, chat_id, f"unit_id IN ({marks})", sorted(unit_ids))
    for chunk in chunks:
        left = loader.load_ids(conn, account, chat_id, chunk.msg_ids)
        seq = sorted(left.values(), key=chrono_key)
        pieces = chunk_conversation(seq, target_chars=sys.maxsize)
        if not pieces:
            writer.delete([chunk])
            continue
        (piece,) = pieces
        members = [left[i] for i in piece.msg_ids]
        names: dict[str, None] = {}
        for m in members:
            names.setdefault(m.sender_name or UNKNOWN_SENDER, None)
        key = _free_key(conn, account, chat_id, chunk, piece.content_hash)
        unit = ChunkUnit(
            key=key,
            topic_id=members[0].topic_id,
            msg_ids=piece.msg_ids,
            first_date=min(m.date for m in members),
            last_date=max(m.date for m in members),
            senders=tuple(names),
            reactions=sum(m.reactions for m in members),
            text=piece.text,
            content_hash=piece.content_hash,
        )
        writer.sync(chat_id, None, [chunk], [unit], build_id=chunk.build_id)
    return len(chunks)


def _building(conn: Connection, account: str, chat_id: int) -> bool:
    row = conn.execute(
        "SELECT 1 FROM conversation_builds WHERE account = ? AND chat_id = ?"
        " AND state = 'building'",
        (account, chat_id),
    ).fetchone()
    return row is not None


def _free_key(
    conn: Connection, account: str, chat_id: int, chunk: StoredUnit, content_hash: str
) -> str:
    """``h:<content_hash>``, or its first ``:<n>`` variant no other chunk of the topic holds."""
    base = f"h:{content_hash}"
    n = 0
    while True:
        key = base if n == 0 else f"{base}:{n}"
        if key == chunk.key:
            return key
        row = conn.execute(
            "SELECT 1 FROM units WHERE account = ? AND chat_id = ? AND topic_key = ?"
            " AND kind = ? AND key = ?",
            (account, chat_id, chunk.topic_key, CHUNK_KIND, key),
        ).fetchone()
        if row is None:
            return key
        n += 1


def discard_unfinished(conn: Connection, account: str = "", chat_id: int | None = None) -> int:
    """Remove every build left ``building`` (by a crash), or only those of one chat.

    Returns:
        How many builds were discarded.
    """
    where, params = "state = 'building'", []
    if chat_id is not None:
        where += " AND account = ? AND chat_id = ?"
        params += [account, chat_id]
    with db.transaction(conn):
        ids = [
            int(r[0])
            for r in conn.execute(f"SELECT build_id FROM conversation_builds WHERE {where}", params)
        ]
        count = _discard(conn, ids)
    if count:
        log.info("discarded %d unfinished conversation builds", count)
    return count


# --- building ---


def _conversation_row(
    build_id: int, conv_id: int, links: _LinkWriter, seq: Sequence[Msg]
) -> tuple[object, ...]:
    """The ``conversations`` row of conversation ``conv_id``: its extent as ``links`` saw
    it, the senders of its messages (as loaded) ``seq``, in chronological order."""
    names: dict[str, None] = {}
    for m in seq:
        names.setdefault(m.sender_name or UNKNOWN_SENDER, None)
    k = conv_id - 1
    return (
        build_id,
        conv_id,
        links.first[k],
        links.last[k],
        links.start[k],
        links.end[k],
        links.size[k],
        json.dumps(list(names), ensure_ascii=False),
    )


class _Repeats:
    """How many chunks of a build so far hold each text, topic by topic: the ``n``-th repeat
    of a text is keyed ``h:<hash>:<n>`` (``_chunk_units``).

    Each text's content hash is held as its first 16 bytes, in a sorted column per topic into
    which the new ones are merged ``MERGE`` at a time, and a count only for the texts met more
    than once, which are few. As a dict of every hash, the 206k chunks of a 1M-message chat
    took 30 MiB until the build was written; here 16 bytes each.
    """

    MERGE = 4096

    def __init__(self) -> None:
        self._sorted: dict[int, np.ndarray] = {}
        self._fresh: dict[int, set[bytes]] = {}
        self._pending = 0
        self._counts: dict[tuple[int, str], int] = {}

    def count(self, topic: int, content_hash: str) -> int:
        """How many chunks of ``topic`` met before hold the text ``content_hash`` names;
        this one is counted for the next."""
        key = bytes.fromhex(content_hash[:32])
        fresh = self._fresh.setdefault(topic, set())
        if key not in fresh and not self._held(topic, key):
            fresh.add(key)
            self._pending += 1
            if self._pending >= self.MERGE:
                self._merge()
            return 0
        n = self._counts.get((topic, content_hash), 1)
        self._counts[(topic, content_hash)] = n + 1
        return n

    def _held(self, topic: int, key: bytes) -> bool:
        column = self._sorted.get(topic)
        if column is None:
            return False
        at = int(np.searchsorted(column, np.bytes_(key)))
        return at < len(column) and bytes(column[at]).ljust(16, b"\0") == key

    def _merge(self) -> None:
        for topic, fresh in self._fresh.items():
            if not fresh:
                continue
            new = np.sort(np.array(list(fresh), dtype="S16"))
            old = self._sorted.get(topic)
            self._sorted[topic] = (
                new if old is None else np.insert(old, np.searchsorted(old, new), new)
            )
            fresh.clear()
        self._pending = 0


def _chunk_units(seq: Sequence[Msg], repeats: _Repeats) -> list[ChunkUnit]:
    """The chunks of one conversation (its messages in order) as storable units."""
    out: list[ChunkUnit] = []
    topic = topic_key(seq[0].topic_id) if seq else 0
    for chunk in chunk_conversation(seq):
        n = repeats.count(topic, chunk.content_hash)
        key = f"h:{chunk.content_hash}" if n == 0 else f"h:{chunk.content_hash}:{n}"
        ids = set(chunk.msg_ids)
        members = [m for m in seq if m.msg_id in ids]
        names: dict[str, None] = {}
        for m in members:
            names.setdefault(m.sender_name or UNKNOWN_SENDER, None)
        out.append(
            ChunkUnit(
                key=key,
                topic_id=seq[0].topic_id,
                msg_ids=tuple(chunk.msg_ids),
                first_date=min(m.date for m in members),
                last_date=max(m.date for m in members),
                senders=tuple(names),
                reactions=sum(m.reactions for m in members),
                text=chunk.text,
                content_hash=chunk.content_hash,
            )
        )
    return out


def build_chat(
    conn: Connection,
    account: str,
    chat_id: int,
    scorer: LinkScorer | None = None,
    *,
    on_progress: Progress | None = None,
    write_batch: int = WRITE_BATCH,
) -> BuildReport:
    """Build the conversations of one chat and publish them atomically.

    Args:
        conn: ``unitize.db`` with ``ingest.db`` attached as ``ingest``.
        scorer: Decides links no reply or answer fixes (``default_scorer()`` when None).
        on_progress: Receives ``(stage, done, total)``: load, link, write, chunk, publish.
        write_batch: Rows per transaction while the build is unpublished.

    Returns:
        The report of the published build.

    Raises:
        ChatNotFound: ingest has no such chat.
    """
    with _lock_for(account, chat_id):
        return _build(conn, account, chat_id, scorer or default_scorer(), on_progress, write_batch)


def _build(
    conn: Connection,
    account: str,
    chat_id: int,
    scorer: LinkScorer,
    on_progress: Progress | None,
    write_batch: int,
) -> BuildReport:
    started = time.perf_counter()
    if loader.chat_info(conn, account, chat_id) is None:
        raise ChatNotFound(
            f"chat {chat_id} is not in the archive of account {account}",
            hint="list chats with `chatseek chats`",
            metadata={"chat_id": str(chat_id)},
        )
    _progress(on_progress, "load", 0, 0)
    answers = valid_answers(conn, account, chat_id)
    discard_unfinished(conn, account, chat_id)
    with db.transaction(conn):
        prev_row = conn.execute(
            "SELECT build_id FROM current_builds WHERE account = ? AND chat_id = ?",
            (account, chat_id),
        ).fetchone()
        # The links go into the build as they are made; it counts its messages when it is
        # published.
        build_id = int(
            conn.execute(
                "INSERT INTO conversation_builds (account, chat_id, state, scorer, message_count)"
                " VALUES (?, ?, 'building', ?, 0) RETURNING build_id",
                (account, chat_id, scorer_name(scorer)),
            ).fetchone()[0]
        )
    report = BuildReport(
        account=account,
        chat_id=chat_id,
        build_id=build_id,
        previous_build_id=None if prev_row is None else int(prev_row[0]),
        scorer=scorer_name(scorer),
        stale_answers=len(answers.stale),
    )
    try:
        _progress(on_progress, "link", 0, 0)
        spill = spill_beside(conn)
        links = _LinkWriter(conn, build_id, report, on_progress, write_batch, spill)
        _links(conn, account, chat_id, answers.valid, scorer, links, spill)
        links.finish()
        fresh, reused = _write_chunks(conn, account, chat_id, build_id, links, report)
        _progress(on_progress, "chunk", report.chunks, report.chunks)
        _publish(conn, account, chat_id, build_id, report, fresh, reused)
        _progress(on_progress, "publish", 1, 1)
    except BaseException:
        try:
            with db.transaction(conn):
                _discard(conn, [build_id])
        except Exception:
            log.exception("could not discard failed build %d; it goes at the next start", build_id)
        raise
    report.ms = int((time.perf_counter() - started) * 1000)
    log.info(
        "built chat %s/%d: build %d, %d messages, %d conversations, %d chunks (%d reused) in %d ms",
        account,
        chat_id,
        build_id,
        report.messages,
        report.conversations,
        report.chunks,
        report.chunks_reused,
        report.ms,
    )
    return report


def _links(
    conn: Connection,
    account: str,
    chat_id: int,
    answers: dict[int, int | None],
    scorer: LinkScorer,
    out: LinkSink,
    spill: Spill,
) -> None:
    """Make the chat's links into ``out``. The shipped learned scorer reads the chat as a
    stream and holds a few numbers a message, a big topic's in ``spill``; any other scorer
    reads a ``LinkContext``, which holds the chat."""
    if type(scorer) is LearnedScorer:
        stream_links(
            loader.iter_chat(conn, account, chat_id),
            senders=loader.senders(conn, account, chat_id),
            agent_answers=answers,
            scorer=scorer,
            out=out,
            spill=spill,
        )
        return
    msgs = loader.load_chat(conn, account, chat_id)
    dates = {m.msg_id: m.date for m in msgs}
    links = build_links(msgs, agent_answers=answers, scorer=scorer)
    del msgs
    out.expect(len(links))
    # In chronological order, so a parent's conversation is numbered before its child's.
    conv: dict[int, int] = {}
    for link in links:
        joins = 0 if link.parent_id is None else conv.get(link.parent_id, 0)
        conv[link.msg_id] = out.add(
            link.msg_id,
            dates[link.msg_id],
            link.parent_id,
            link.reason,
            link.confidence,
            link.rejected,
            joins,
        )


class _LinkWriter:
    """A build's links, written as they are made, ``write_batch`` to a transaction
    (``LinkSink``), and what each conversation's row needs: a few numbers a conversation.

    A link that starts a conversation numbers it; ``finish`` renumbers the conversations by
    their first message when they were made out of that order (a chat's topics are linked one
    after the other). Held whole until the build was written, the links of a 1M-message chat
    took 58 bytes a message.
    """

    def __init__(
        self,
        conn: Connection,
        build_id: int,
        report: BuildReport,
        on_progress: Progress | None,
        write_batch: int,
        spill: Spill | None = None,
    ) -> None:
        self.conn, self.build_id, self.report = conn, build_id, report
        self.on_progress, self.write_batch = on_progress, write_batch
        self.spill = spill if spill is not None else Spill(None)
        self.total = 0
        self.rows: list[tuple[object, ...]] = []
        # By conversation number - 1: first and last message, their dates, and the size;
        # room for as many conversations as links (``expect``), ``count`` of them made.
        self.count = 0
        self.first: Col = array("q")
        self.start: Col = array("q")
        self.last: Col = array("q")
        self.end: Col = array("q")
        self.size: Col = array("q")

    def expect(self, total: int) -> None:
        self.total += total
        self._room(self.total)

    def _room(self, n: int) -> None:
        """Make the five columns ``n`` long, keeping the conversations made so far."""
        for column in _EXTENT_COLUMNS:
            old = getattr(self, column)
            if len(old) == n:
                continue
            new = self.spill.filled(n, "q")
            kept = min(self.count, n)
            np.frombuffer(new, dtype=np.int64)[:kept] = np.frombuffer(old, dtype=np.int64)[:kept]
            setattr(self, column, new)

    def add(
        self,
        msg_id: int,
        date: int,
        parent_id: int | None,
        reason: LinkReason,
        confidence: float,
        rejected: Sequence[tuple[int, float]] = (),
        joins: int = 0,
    ) -> int:
        if joins == 0:
            k = self.count
            if k == len(self.size):  # more links than ``expect`` announced
                self._room(2 * k + 1)
            self.first[k] = self.last[k] = msg_id
            self.start[k] = self.end[k] = date
            self.size[k] = 1
            self.count = conv = k + 1
        else:
            conv, k = joins, joins - 1
            # A conversation's links come in chronological order.
            self.last[k] = msg_id
            self.end[k] = max(self.end[k], date)
            self.size[k] += 1
        reasons = self.report.reasons
        reasons[reason] = reasons.get(reason, 0) + 1
        self.rows.append(
            (
                self.build_id,
                msg_id,
                parent_id,
                conv,
                reason,
                confidence,
                json.dumps([list(r) for r in rejected]) if rejected else None,
            )
        )
        self.report.messages += 1
        if len(self.rows) >= self.write_batch:
            self._flush()
        return conv

    def _flush(self) -> None:
        if self.rows:
            with db.transaction(self.conn):
                db.insert_rows(
                    self.conn,
                    "INSERT INTO links (build_id, msg_id, parent_id, conversation_id, reason,"
                    " confidence, rejected)",
                    self.rows,
                )
            self.rows.clear()
        _progress(self.on_progress, "write", self.report.messages, self.total)

    def finish(self) -> None:
        """Write the last links and number the conversations by their first message."""
        self._flush()
        count = self.report.conversations = self.count
        self.report.answers_applied = self.report.reasons.get("agent", 0)
        start = np.frombuffer(self.start, dtype=np.int64)[:count]
        first = np.frombuffer(self.first, dtype=np.int64)[:count]
        order = np.lexsort((first, start))
        if bool((order[1:] > order[:-1]).all()):
            return
        # Conversation ``order[k] + 1`` becomes ``k + 1``. Each row is read and written once,
        # so the two numberings may overlap.
        del start, first
        new_number = np.empty(len(order), dtype=np.int64)
        new_number[order] = np.arange(1, len(order) + 1)
        with db.transaction(self.conn):
            self.conn.execute(
                "CREATE TEMP TABLE build_numbers (old INTEGER PRIMARY KEY, new INTEGER NOT NULL)"
            )
            try:
                db.insert_rows(
                    self.conn,
                    "INSERT INTO temp.build_numbers (old, new)",
                    list(zip(range(1, len(order) + 1), new_number.tolist(), strict=True)),
                )
                self.conn.execute(
                    "UPDATE links SET conversation_id = (SELECT new FROM temp.build_numbers"
                    " WHERE old = links.conversation_id) WHERE build_id = ?",
                    (self.build_id,),
                )
            finally:
                self.conn.execute("DROP TABLE temp.build_numbers")
        for column in _EXTENT_COLUMNS:
            old = np.frombuffer(getattr(self, column), dtype=np.int64)[:count]
            new = self.spill.filled(count, "q")
            np.frombuffer(new, dtype=np.int64)[:] = old[order]
            del old
            setattr(self, column, new)


_EXTENT_COLUMNS = ("first", "start", "last", "end", "size")


def spill_beside(conn: Connection) -> Spill:
    """Where a build of ``conn``'s store keeps its big columns: files in the store's own
    directory (the heap for a store without a file)."""
    for _seq, name, file in conn.execute("PRAGMA database_list"):
        if name == "main" and file:
            return Spill(Path(file).parent)
    return Spill(None)


def _write_chunks(
    conn: Connection,
    account: str,
    chat_id: int,
    build_id: int,
    links: _LinkWriter,
    report: BuildReport,
) -> tuple[array[int], _Reused]:
    """Write the ``conversations`` rows, insert the chunks the previous build lacks, and
    note the others for the publish step to move.

    Conversations are read back a batch at a time (about ``WRITE_BATCH`` messages), in order
    of their first message: their members from the build's links, their messages from
    ingest. Their rows and new chunks are inserted ``WRITE_BATCH`` at a time. The previous
    build's chunks are looked up a batch at a time too: nothing of either build is held
    whole, only the ids of the new and the kept chunks.
    """
    reused = _Reused(conn, account, chat_id, report.previous_build_id)
    repeats = _Repeats()
    new: list[ChunkUnit] = []
    rows: list[tuple[object, ...]] = []
    fresh = array("q")

    def insert() -> None:
        with db.transaction(conn):
            db.insert_rows(
                conn,
                "INSERT INTO conversations (build_id, conversation_id, first_msg_id,"
                " last_msg_id, start_date, end_date, message_count, participants)",
                rows,
            )
            fresh.extend(
                UnitWriter(conn, account).insert_many(chat_id, None, new, build_id=build_id)
            )
        rows.clear()
        new.clear()

    size = links.size
    conv = 1
    while conv <= report.conversations:
        last, taken = conv, size[conv - 1]
        while last < report.conversations and taken < WRITE_BATCH:
            taken += size[last]
            last += 1
        members: dict[int, list[int]] = {}
        for msg_id, c in conn.execute(
            "SELECT msg_id, conversation_id FROM links"
            " WHERE build_id = ? AND conversation_id BETWEEN ? AND ?",
            (build_id, conv, last),
        ):
            members.setdefault(c, []).append(msg_id)
        loaded = loader.load_ids(conn, account, chat_id, chain.from_iterable(members.values()))
        made: list[ChunkUnit] = []
        for c in range(conv, last + 1):
            # A message ingest dropped since the links were made leaves its conversation's
            # text; the drop queues a new build.
            seq = sorted(
                (m for m in map(loaded.get, members.get(c, ())) if m is not None), key=chrono_key
            )
            rows.append(_conversation_row(build_id, c, links, seq))
            if seq:
                made += _chunk_units(seq, repeats)
        report.chunks += len(made)
        new += reused.sort_out(made)
        if len(new) >= WRITE_BATCH or len(rows) >= WRITE_BATCH:
            insert()
        conv = last + 1
    if new or rows:
        insert()
    report.chunks_new = len(fresh)
    report.chunks_reused = len(reused)
    return fresh, reused


_RETARGETS = "temp.build_retargets"


class _Reused:
    """The previous build's chunks that this build keeps, until it publishes.

    A kept chunk has this build's text (the key holds the content hash); when its other stored
    columns match too, as they nearly always do, it is held as its id alone and publishing
    only moves it to the new build. One whose members, senders, dates or reactions changed
    waits in a temporary table of the connection with its new columns. So a rebuild of a big
    chat holds neither build's chunks in memory: they were 1.8 KB each, 235 MiB for the
    129k chunks of a 650k-message chat.
    """

    def __init__(self, conn: Connection, account: str, chat_id: int, prev: int | None) -> None:
        self.conn, self.account, self.chat_id, self.prev = conn, account, chat_id, prev
        self.same = array("q")
        self.changed = 0
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {_RETARGETS}"
            " (unit_id INTEGER PRIMARY KEY, stored TEXT NOT NULL, chunk TEXT NOT NULL)"
        )
        self.clear()

    def __len__(self) -> int:
        return len(self.same) + self.changed

    def clear(self) -> None:
        """Forget the retargets (a build that failed or published)."""
        self.conn.execute(f"DELETE FROM {_RETARGETS}")

    def sort_out(self, made: Sequence[ChunkUnit]) -> list[ChunkUnit]:
        """Note the chunks of ``made`` the previous build has; returns the others."""
        if self.prev is None or not made:
            return list(made)
        stored = {
            (u.topic_key, u.key): u
            for u in units_by_ident(
                self.conn,
                self.account,
                self.chat_id,
                ((topic_key(c.topic_id), CHUNK_KIND, c.key) for c in made),
            )
            if u.build_id == self.prev
        }
        out: list[ChunkUnit] = []
        waiting: list[tuple[int, str, str]] = []
        for chunk in made:
            old = stored.get((topic_key(chunk.topic_id), chunk.key))
            if old is None or old.content_hash != chunk.content_hash:
                out.append(chunk)
            elif (
                old.msg_ids == chunk.msg_ids
                and old.senders == chunk.senders
                and old.first_date == chunk.first_date
                and old.last_date == chunk.last_date
                and old.reactions == chunk.reactions
            ):
                self.same.append(old.unit_id)
            else:
                # Without its text: the stored text is this one.
                waiting.append(
                    (
                        old.unit_id,
                        json.dumps(astuple(old)),
                        json.dumps(astuple(text_dropped(chunk))),
                    )
                )
        if waiting:
            self.conn.executemany(f"INSERT INTO {_RETARGETS} VALUES (?, ?, ?)", waiting)
            self.changed += len(waiting)
        return out

    def move(self, writer: UnitWriter, build_id: int) -> None:
        """Move every kept chunk to ``build_id`` (inside the publishing transaction)."""
        for start in range(0, len(self.same), WRITE_BATCH):
            self.conn.executemany(
                "UPDATE units SET build_id = ? WHERE unit_id = ?",
                [(build_id, unit_id) for unit_id in self.same[start : start + WRITE_BATCH]],
            )
        after = 0
        while True:
            page = self.conn.execute(
                f"SELECT unit_id, stored, chunk FROM {_RETARGETS} WHERE unit_id > ?"
                " ORDER BY unit_id LIMIT ?",
                (after, WRITE_BATCH),
            ).fetchall()
            if not page:
                break
            for _, old, chunk in page:
                writer.retarget(
                    _revived(StoredUnit, old), self.chat_id, _revived(ChunkUnit, chunk), build_id
                )
            after = int(page[-1][0])


_Revived = TypeVar("_Revived", StoredUnit, ChunkUnit)


def _revived(cls: type[_Revived], text: str) -> _Revived:
    """A ``StoredUnit`` or ``ChunkUnit`` from the JSON of its ``astuple``."""
    values = dict(zip([f.name for f in fields(cls)], json.loads(text), strict=True))
    return cls(
        **{**values, "msg_ids": tuple(values["msg_ids"]), "senders": tuple(values["senders"])}
    )


def _publish(
    conn: Connection,
    account: str,
    chat_id: int,
    build_id: int,
    report: BuildReport,
    fresh: Sequence[int],
    reused: _Reused,
) -> None:
    """The one transaction that makes the build current and retires the previous one.

    Dropped chunks are deleted and new ones announced a page at a time, so a rebuild that
    replaces most of a big chat's chunks holds one page of them.
    """
    with db.transaction(conn):
        state = conn.execute(
            "SELECT state FROM conversation_builds WHERE build_id = ?", (build_id,)
        ).fetchone()
        if state is None or state[0] != "building":
            raise RuntimeError(f"build {build_id} was discarded while it ran")
        writer = UnitWriter(conn, account)
        reused.move(writer, build_id)
        prev = report.previous_build_id
        if prev is not None:
            # What the previous build still holds, now that the kept chunks have moved.
            while dropped := stored_units(
                conn,
                account,
                chat_id,
                "unit_id IN (SELECT unit_id FROM units WHERE build_id = ? AND kind = ? LIMIT ?)",
                (prev, CHUNK_KIND, WRITE_BATCH),
            ):
                writer.delete(dropped)
                writer.flush()
                report.chunks_dropped += len(dropped)
            conn.execute("DELETE FROM links WHERE build_id = ?", (prev,))
            conn.execute("DELETE FROM conversations WHERE build_id = ?", (prev,))
            conn.execute(
                "UPDATE conversation_builds SET state = 'superseded' WHERE build_id = ?", (prev,)
            )
        for start in range(0, len(fresh), WRITE_BATCH):
            for unit_id in fresh[start : start + WRITE_BATCH]:
                writer.announce(chat_id, unit_id, "upsert")
            writer.flush()
        conn.execute(
            "UPDATE conversation_builds SET state = 'complete', finished_at = unixepoch(),"
            " message_count = ?, conversation_count = ? WHERE build_id = ?",
            (report.messages, report.conversations, build_id),
        )
        conn.execute(
            "INSERT INTO current_builds (account, chat_id, build_id) VALUES (?, ?, ?)"
            " ON CONFLICT (account, chat_id) DO UPDATE SET build_id = excluded.build_id",
            (account, chat_id, build_id),
        )
        writer.flush()
    reused.clear()


def build_chats(
    conn: Connection,
    account: str,
    chat_ids: Sequence[int],
    *,
    all_chats: bool = False,
    scorer: LinkScorer | None = None,
    on_progress: Progress | None = None,
) -> list[BuildReport]:
    """Build several chats one after the other (every chat of ``account`` with ``all_chats``).

    Raises:
        ChatNotFound: a named chat is not in the archive (chats built before it stay built).
    """
    targets = list(chat_ids)
    if all_chats:
        targets = [
            int(r[0])
            for r in conn.execute(
                "SELECT chat_id FROM ingest.chats WHERE account = ? ORDER BY chat_id", (account,)
            )
        ]
    chosen = scorer or default_scorer()
    reports = []
    for done, chat_id in enumerate(targets, start=1):
        reports.append(build_chat(conn, account, chat_id, chosen, on_progress=on_progress))
        # A small chat's freed pages would otherwise sit under the next, bigger one's.
        memory.release()
        _progress(on_progress, "chats", done, len(targets))
    return reports


def built_chats(conn: Connection) -> int:
    """How many chats have a current conversation build (for status)."""
    return int(conn.execute("SELECT COUNT(*) FROM current_builds").fetchone()[0])
