"""Links of a whole chat read as a stream: the learned scorer's links without holding a message.

``linking.build_links`` takes the chat's messages as a list and keeps each one, with its
analysis, until the last topic is linked: about 2 KB a message, gigabytes for a big group.
``link_chat`` reads the chat once instead, in ``chrono_key`` order, given beforehand the sender
names of each topic (whose name forms the analysis looks for). Every message is analysed as it
comes and kept as a few numbers in its topic's columns (``StreamTopic``): its id, reply target,
date, author, who it names, and its stems as numbers into one vocabulary of the chat.

Then the idf of the chat's stems, the informative ones kept, and each topic scored from its
columns. Each link goes to a ``LinkSink`` as it is made, with the conversation its parent is
in: a build writes them to its store as they come (``builds``), and ``link_chat`` gathers them
as columns (``LinkColumns``) in chronological order. They are the links ``build_links`` makes
with the same scorer, field for field (a test pins it): the same analysis, the same stems in
the same order, the same features.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from chatseek_core.errors import InvalidValue
from chatseek_unitize.cutting import is_unit_member
from chatseek_unitize.linkfeatures import (
    ADDRESS_SLOTS,
    MENTION_SLOTS,
    NameSlots,
    StemTable,
    TopicColumns,
    least_informative,
    raw_bytes,
)
from chatseek_unitize.linking import (
    PROBABILITY_PLACES,
    REJECTED_KEPT,
    LearnedScorer,
    LinkReason,
    addressing,
    analyse_message,
    author_of,
    collector_paused,
    name_forms,
    name_owners,
    one_blas_thread,
)
from chatseek_unitize.model import Msg
from chatseek_unitize.spill import RELEASE_EVERY, Col, Column, Spill

__all__ = ["REASONS", "LinkColumns", "LinkSink", "StreamTopic", "link_chat", "stream_links"]

REASONS: tuple[LinkReason, ...] = (
    "album",
    "reply",
    "agent",
    "mention",
    "same_author",
    "scored",
    "new",
)
_REASON = {r: k for k, r in enumerate(REASONS)}
_COUNT_SLICE = 1 << 20
_CUT_MESSAGES = 1 << 16
_FLUSH_MESSAGES = 1 << 13
NO_ID = -(2**63)
"""Stands for "none" in an id column (no parent, no reply target)."""
PROBABILITY_UNITS: int = 10**PROBABILITY_PLACES


def _units(p: float) -> int:
    """``p`` (rounded to ``PROBABILITY_PLACES``, in [0, 1]) as whole ten-thousandths.

    Raises:
        InvalidValue: ``p`` is outside [0, 1] or has more places.
    """
    units = round(p * PROBABILITY_UNITS)
    if not 0 <= units <= PROBABILITY_UNITS or units / PROBABILITY_UNITS != p:
        raise InvalidValue(
            f"a link's probability must be in [0, 1] with {PROBABILITY_PLACES} places, not {p!r}."
        )
    return units


class LinkSink(Protocol):
    """Where ``stream_links`` puts the links of a chat as it makes them: topic by topic, each
    topic's links in chronological order."""

    def expect(self, total: int) -> None:
        """Called once before any link: ``total`` links follow."""
        ...

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
        """Take one link; ``joins`` is the number this sink gave the conversation of its
        parent (0: the link starts a conversation). Returns the number of its conversation.

        Raises:
            InvalidValue: a link a build would not make (see ``LinkColumns.add``).
        """
        ...


@dataclass
class LinkColumns:
    """Links as columns, in chronological order: link ``k`` gives message ``msg_id[k]`` (sent
    at ``date[k]``) the parent ``parent_id[k]`` (``NO_ID``: none) for ``REASONS[reason[k]]``
    with ``confidence(k)``; its ``rejected[k]`` runners-up (at most ``REJECTED_KEPT``) are
    ``rejected_id[k * REJECTED_KEPT + r]`` with probabilities in ``rejected_p[...]``.

    A build rounds every probability to ``PROBABILITY_PLACES`` places, so the columns hold them
    as whole ten-thousandths, two bytes each (``add`` refuses one that is not): a link takes
    58 bytes instead of 82, and a big chat holds every link until its build is written.
    """

    msg_id: array[int] = field(default_factory=lambda: array("q"))
    date: array[int] = field(default_factory=lambda: array("q"))
    parent_id: array[int] = field(default_factory=lambda: array("q"))
    reason: bytearray = field(default_factory=bytearray)
    confidence_units: array[int] = field(default_factory=lambda: array("H"))
    rejected: bytearray = field(default_factory=bytearray)
    rejected_id: array[int] = field(default_factory=lambda: array("q"))
    rejected_p: array[int] = field(default_factory=lambda: array("H"))

    def __len__(self) -> int:
        return len(self.msg_id)

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
        """Append one link (``LinkSink.add``; the columns number conversations when they are
        whole, in ``conversations``, so ``joins`` is not needed and the link's position, from
        1, is returned).

        Raises:
            InvalidValue: more rejected options than a build keeps (``REJECTED_KEPT``), or a
                probability a build would not make (see ``_units``); nothing is appended.
        """
        if len(rejected) > REJECTED_KEPT:
            raise InvalidValue(f"a link keeps at most {REJECTED_KEPT} rejected options.")
        confidence_units = _units(confidence)
        kept = len(rejected)
        if kept < REJECTED_KEPT:
            rejected = (*rejected, *[(0, 0.0)] * (REJECTED_KEPT - kept))
        rejected_units = [_units(p) for _, p in rejected]
        self.msg_id.append(msg_id)
        self.date.append(date)
        self.parent_id.append(NO_ID if parent_id is None else parent_id)
        self.reason.append(_REASON[reason])
        self.confidence_units.append(confidence_units)
        self.rejected.append(kept)
        self.rejected_id.extend([msg for msg, _ in rejected])
        self.rejected_p.extend(rejected_units)
        return len(self.msg_id)

    def expect(self, total: int) -> None:
        """``LinkSink.expect``: nothing to do."""

    def confidence(self, k: int) -> float:
        """Link ``k``'s confidence."""
        return self.confidence_units[k] / PROBABILITY_UNITS

    def runners_up(self, k: int) -> list[tuple[int, float]]:
        """Link ``k``'s rejected options, best first."""
        base = k * REJECTED_KEPT
        return [
            (self.rejected_id[base + r], self.rejected_p[base + r] / PROBABILITY_UNITS)
            for r in range(self.rejected[k])
        ]

    def in_chrono_order(self) -> LinkColumns:
        """The same links ordered by (date, msg_id) (these links when they already are)."""
        order = np.lexsort((np.asarray(self.msg_id), np.asarray(self.date)))
        if bool((order[1:] > order[:-1]).all()):  # one topic: already in order
            return self
        wide = (order[:, None] * REJECTED_KEPT + np.arange(REJECTED_KEPT)).ravel()

        def taken(col: array[Any], at: np.ndarray) -> array[Any]:
            return array(col.typecode, np.asarray(col)[at].tobytes())

        def bytes_taken(col: bytearray) -> bytearray:
            return bytearray(np.frombuffer(col, dtype=np.uint8)[order].tobytes())

        return LinkColumns(
            msg_id=taken(self.msg_id, order),
            date=taken(self.date, order),
            parent_id=taken(self.parent_id, order),
            reason=bytes_taken(self.reason),
            confidence_units=taken(self.confidence_units, order),
            rejected=bytes_taken(self.rejected),
            rejected_id=taken(self.rejected_id, wide),
            rejected_p=taken(self.rejected_p, wide),
        )

    def conversations(self) -> tuple[np.ndarray, int]:
        """Each link's conversation number (from 1, by first message) and how many there
        are: the connected components of the parent graph, as ``linking.conversations``
        groups them. Links must be in chronological order, every parent before its child."""
        n = len(self.msg_id)
        if n == 0:
            return np.zeros(0, dtype=np.int64), 0
        ids = np.asarray(self.msg_id)
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        parents = np.asarray(self.parent_id)
        at = np.searchsorted(sorted_ids, parents)
        at = np.minimum(at, n - 1)
        found = (parents != NO_ID) & (sorted_ids[at] == parents)
        own = np.arange(n)
        # Every parent comes before its child: follow parents to the first message of each
        # conversation, doubling the stride each round.
        parent_at = order[at]
        roots = np.where(found & (parent_at < own), parent_at, own)
        del parent_at
        del ids, order, sorted_ids, parents, at, found
        while True:
            up = roots[roots]
            if np.array_equal(up, roots):
                break
            roots = up
        starts = roots == own
        number = np.cumsum(starts)
        return number[roots], int(starts.sum())


class StreamTopic:
    """One topic of a chat, read message by message: what precedence and the learned
    features need of each message, a number or two each (see the module docstring).

    Satisfies ``linking.ScoringContext`` once ``cut_stems`` has run.
    """

    def __init__(self, known: frozenset[str], spill: Spill | None = None) -> None:
        self.known = known
        self.spill = spill if spill is not None else Spill(None)
        # The name forms of each author of a linkable message (``LinkContext``'s).
        self.name_keys: dict[int | str, set[str]] = {}
        self._senders: set[tuple[int | str, str]] = set()
        # While the topic is read, each column grows in a ``Column`` (its ``tail`` is the
        # attribute); ``seal`` makes each attribute the whole column.
        self._columns: dict[str, Column] = {}
        self.ids = self._grow("ids", "q")
        self.dates = self._grow("dates", "q")
        self.reply = self._grow("reply", "q")
        self.album = self._grow("album", "B")  # 1: the same album as the message before
        self.author = self._grow("author", "i")  # by message: its author's number in the topic
        self.numbers: dict[int | str, int] = {}
        # The names and lead of the messages that name somebody in the topic (most do not).
        self.named: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
        self.question = self._grow("question", "B")
        self.length = self._grow("length", "i")
        self.stem_ids = self._grow("stem_ids", "i")
        self.stem_off = self._grow("stem_off", "q")
        self.stem_off.append(0)
        self._count = 0
        self._stem_count = 0
        self._group: int | None = None
        self.idf: Mapping[str, float] = {}
        # By message: its parent's position, -1 for none (made whole when it is linked).
        self.parent: Col = array("i")
        self.scored: Col = array("B")
        self._stems: StemTable | None = None
        self._by_id: tuple[np.ndarray | None, np.ndarray] | None = None

    def _grow(self, name: str, code: str) -> array[Any]:
        column = self._columns[name] = self.spill.column(code)
        return column.tail

    def __len__(self) -> int:
        return self._count

    def msg_id(self, k: int) -> int:
        """The id of message ``k``."""
        return int(self.ids[k])

    def add(self, m: Msg, author: int | str, vocab: dict[str, int]) -> None:
        """Analyse the next message of the topic (``chrono_key`` order); its stems are
        numbered in ``vocab``, the chat's."""
        inf = analyse_message(m, author, self.known)
        if (author, m.sender_name) not in self._senders:
            self._senders.add((author, m.sender_name))
            self.name_keys.setdefault(author, set()).update(name_forms(m.sender_name))
        k = self._count
        group = m.grouped_id
        self.album.append(k > 0 and group is not None and group == self._group)
        self._group = group
        self.ids.append(m.msg_id)
        self.dates.append(m.date)
        self.reply.append(NO_ID if m.reply_to is None else m.reply_to)
        self.author.append(self.numbers.setdefault(author, len(self.numbers)))
        if inf.names or inf.lead:
            self.named[k] = (inf.names, inf.lead)
        self.question.append(inf.question)
        self.length.append(inf.length)
        setdefault = vocab.setdefault
        self.stem_ids.extend([setdefault(s, len(vocab)) for s in inf.stems])
        self._stem_count += len(inf.stems)
        self.stem_off.append(self._stem_count)
        self._count = k + 1
        if self._count % _FLUSH_MESSAGES == 0:
            for column in self._columns.values():
                column.flush()

    def seal(self) -> None:
        """The topic is read: each column becomes whole (mapped from its file if it spilled)."""
        for name, column in self._columns.items():
            setattr(self, name, column.seal())
        self._columns = {}

    def cut_stems(self, keep: np.ndarray, renumber: np.ndarray, vocab: Sequence[str]) -> None:
        """Keep only the stems ``keep`` marks (by old number), renumbered by ``renumber``
        into ``vocab``; each message keeps its stems' order.

        The cut goes ``_CUT_MESSAGES`` messages at a time into the table's own columns: whole,
        its masks, counts and copies took more than 100 bytes a message at once.
        """
        ids = np.frombuffer(self.stem_ids, dtype=np.int32)
        old_off = np.frombuffer(self.stem_off, dtype=np.int64)
        kept_column, off_column = self.spill.column("i"), self.spill.column("q")
        kept, off = kept_column.tail, off_column.tail
        off.append(0)
        kept_count = 0
        n = len(old_off) - 1
        for a in range(0, n, _CUT_MESSAGES):
            b = min(a + _CUT_MESSAGES, n)
            lo, hi = int(old_off[a]), int(old_off[b])
            mask = keep[ids[lo:hi]]
            kept_before = np.zeros(hi - lo + 1, dtype=np.int64)
            np.cumsum(mask, out=kept_before[1:])
            off.frombytes(raw_bytes(kept_before[old_off[a + 1 : b + 1] - lo] + kept_count))
            kept.frombytes(raw_bytes(renumber[ids[lo:hi][mask]].astype(np.int32, copy=False)))
            kept_count += int(kept_before[-1])
            kept_column.flush()
            off_column.flush()
            self.spill.release()
        del ids, old_off
        self.stem_ids, self.stem_off = array("i"), array("q")
        self._stems = StemTable(vocab, kept_column.seal(), off_column.seal())

    def columns(self) -> TopicColumns:
        """The topic as the features read it (after ``cut_stems``), once: the names each
        message holds go into its slots and are let go."""
        assert self._stems is not None
        owners = name_owners(self.name_keys, self.numbers)
        # ``named`` was filled in message order, so positions ascend.
        to_of = [
            (k, addressing(names, lead, self.author[k], owners))
            for k, (names, lead) in self.named.items()
        ]
        self.named = {}
        addressed = NameSlots.of(((k, to) for k, (to, _) in to_of), ADDRESS_SLOTS)
        mentioned = NameSlots.of(((k, of) for k, (_, of) in to_of), MENTION_SLOTS)
        del to_of
        self._senders = set()
        author, question, length = self.author, self.question, self.length
        self.author, self.question, self.length = array("i"), array("B"), array("i")
        return TopicColumns(
            author=author,
            date=self.dates,
            addressed=addressed,
            mentioned=mentioned,
            question=np.frombuffer(question, dtype=np.bool_),
            length=np.frombuffer(length, dtype=np.int32),
            stems=self._stems,
            spill=self.spill,
        )

    def index_of(self, msg_id: int) -> int | None:
        """The position of message ``msg_id`` in the topic, if it is there."""
        if self._by_id is None:
            ids = np.frombuffer(self.ids, dtype=np.int64)
            if bool((ids[1:] > ids[:-1]).all()):
                # Ids that ascend with the dates (as in most chats) are their own index: a
                # sorted copy and its order took 16 bytes a message. The view pins ``ids``'
                # buffer, so nothing is added after a lookup (the topic is whole by then).
                self._by_id = (None, ids)
            else:
                by_id = self.spill.zeros(len(ids), np.int64)
                by_id[:] = np.argsort(ids, kind="stable")
                self._by_id = (by_id, np.take(ids, by_id, out=self.spill.zeros(len(ids), np.int64)))
            self.spill.release()
        order, ids = self._by_id
        at = int(np.searchsorted(ids, msg_id))
        if at < len(ids) and ids[at] == msg_id:
            return at if order is None else int(order[at])
        return None

    def fixed(
        self, i: int, answers: Mapping[int, int | None]
    ) -> tuple[int | None, LinkReason] | None:
        """The parent id an album, an explicit reply or a valid agent answer gives message
        ``i`` (``linking._by_precedence``), or None when the scorer decides."""
        ids = self.ids
        if i > 0 and self.album[i]:
            return ids[i - 1], "album"
        r = self.reply[i]
        if r != NO_ID:
            target = self.index_of(r)
            if target is not None and target < i:
                return r, "reply"
        me = ids[i]
        if me in answers:
            answer = answers[me]
            if answer is None:
                return None, "agent"
            target = self.index_of(answer)
            if target is not None and target < i:
                return answer, "agent"
        return None


def _idf(topics: Iterable[StreamTopic], vocab_size: int) -> np.ndarray:
    """The idf of each stem number, over every message of the chat (``linking._idf``)."""
    df = np.zeros(vocab_size, dtype=np.int64)
    total = 0
    for t in topics:
        total += len(t)
        ids = np.frombuffer(t.stem_ids, dtype=np.int32)
        for start in range(0, len(ids), _COUNT_SLICE):  # bincount widens what it counts
            df += np.bincount(ids[start : start + _COUNT_SLICE], minlength=vocab_size)
            t.spill.release()
        del ids
    return np.asarray([math.log((total + 1) / (n + 1)) for n in df.tolist()], dtype=np.float64)


def stream_links(
    msgs: Iterable[Msg],
    *,
    senders: Iterable[tuple[int | None, str]],
    agent_answers: Mapping[int, int | None] | None = None,
    scorer: LearnedScorer,
    out: LinkSink,
    spill: Spill | None = None,
) -> None:
    """``linking.build_links`` with the learned scorer, reading the chat once, as a stream.

    Args:
        msgs: The chat's messages in ``chrono_key`` order.
        senders: (topic id, sender name) of every message, or more: the name forms the
            analysis looks for are theirs. Forms of a sender who has no linkable message in a
            topic are let go when its names are resolved, as ``LinkContext`` never has them.
        agent_answers: ``{msg_id: parent id or None}``, already filtered for staleness.
        out: Where the links go, topic by topic (see ``LinkSink``).
        spill: Where a big topic's columns live (``spill``); the heap when None.
    """
    answers = agent_answers or {}
    spill = spill if spill is not None else Spill(None)
    with collector_paused(), one_blas_thread():
        forms: dict[int | None, set[str]] = {}
        for topic, name in set(senders):
            forms.setdefault(topic, set()).update(name_forms(name))
        topics: dict[int | None, StreamTopic] = {}
        vocab: dict[str, int] = {}
        for m in msgs:
            if is_unit_member(m):
                t = topics.get(m.topic_id)
                if t is None:
                    known = frozenset(forms.get(m.topic_id, ()))
                    t = topics[m.topic_id] = StreamTopic(known, spill)
                t.add(m, author_of(m), vocab)
        del forms
        for t in topics.values():
            t.seal()
        words = list(vocab)
        del vocab
        idf = _idf(topics.values(), len(words))
        keep = idf >= least_informative(float(idf.max()) if len(idf) else 0.0)
        renumber = (np.cumsum(keep) - 1).astype(np.int32)
        kept = np.flatnonzero(keep).tolist()
        kept_words = [words[k] for k in kept]
        del words
        # The features read only the informative stems (``informative`` of these is all
        # of them: the rarest stem of the chat, which sets its floor, is one).
        idf_kept = dict(zip(kept_words, idf[kept].tolist(), strict=True))
        for t in topics.values():
            t.cut_stems(keep, renumber, kept_words)
        out.expect(sum(map(len, topics.values())))
        try:
            for key in list(topics):
                _link_topic(topics.pop(key), idf_kept, answers, scorer, out)
        finally:
            scorer.close()


def link_chat(
    msgs: Iterable[Msg],
    *,
    senders: Iterable[tuple[int | None, str]],
    agent_answers: Mapping[int, int | None] | None = None,
    scorer: LearnedScorer,
    spill: Spill | None = None,
) -> LinkColumns:
    """``stream_links`` into columns: the links, in chronological order."""
    links = LinkColumns()
    stream_links(
        msgs, senders=senders, agent_answers=agent_answers, scorer=scorer, out=links, spill=spill
    )
    return links.in_chrono_order()


def _link_topic(
    t: StreamTopic,
    idf: Mapping[str, float],
    answers: Mapping[int, int | None],
    scorer: LearnedScorer,
    out: LinkSink,
) -> None:
    t.idf = idf
    n = len(t)
    spill = t.spill
    scored = spill.filled(n, "B")
    for a in range(0, n, RELEASE_EVERY):
        b = min(a + RELEASE_EVERY, n)
        scored[a:b] = array("B", [t.fixed(i, answers) is None for i in range(a, b)])
    t.scored = scored
    scorer.prepare(t)
    ids, dates = t.ids, t.dates
    # Each message's parent position (-1: none) and its conversation, as ``out`` numbers
    # them; a parent is always in the topic.
    parent = t.parent = spill.filled(n, "i", -1)
    conv = spill.filled(n, "i")
    for i in range(n):
        if i % RELEASE_EVERY == 0:
            spill.release()
        fixed = t.fixed(i, answers)
        if fixed is not None:
            parent_id, reason = fixed
            at = None if parent_id is None else t.index_of(parent_id)
            joins = 0 if at is None else conv[at]
            conv[i] = out.add(ids[i], dates[i], parent_id, reason, 1.0, (), joins)
            if at is not None:
                parent[i] = at
            continue
        choice = scorer.choose(t, i)
        if choice.parent is None:
            parent_id, joins = None, 0
        else:
            parent_id, joins = ids[choice.parent], conv[choice.parent]
        conv[i] = out.add(
            ids[i],
            dates[i],
            parent_id,
            choice.reason,
            choice.confidence,
            choice.rejected,
            joins,
        )
        if choice.parent is not None:
            parent[i] = choice.parent
    scorer.inputs = None
