"""Writes to ``units`` and ``unit_members``, each real change announced on ``_feed``.

Owns the diff between a unit set as stored and as freshly cut. Invariants:
* A unit keeps its ``unit_id`` while its identity ``(account, chat_id, topic_key, kind, key)``
  stays; ``topic_key`` is the forum topic id, or 0 outside topics.
* An unchanged unit (same ``content_hash`` and the same members, dates, senders, reactions) is
  never written; a unit whose text is unchanged but whose reactions or members moved is updated
  quietly (derived stores key on the text's hash, so they have nothing to redo); any other change
  is written and announced (kind ``unit``, entity ``unit_id``, op ``upsert`` or ``delete``).
* ``unit_members`` holds exactly the unit's message ids; a post unit's comments are members under
  the discussion group's chat id, so an edit there finds the post.
* Every function runs inside the caller's ``db.transaction``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Protocol

from chatseek_core import db, feed
from chatseek_core.db import Connection

__all__ = [
    "UNIT_EVENT",
    "StoredUnit",
    "UnitLike",
    "UnitWriter",
    "held_units",
    "stored_units",
    "thread_units",
    "topic_key",
    "unit_counts",
    "units_by_ident",
]

UNIT_EVENT = "unit"
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode
_IN_CHUNK = 500
# What an update rewrites of a unit, in ``UnitWriter._values`` order; the text and what
# follows it stay as stored when a chunk only moves to another build.
_UPDATE_COLUMNS = (
    "first_msg_id",
    "last_msg_id",
    "start_date",
    "end_date",
    "msg_ids",
    "senders",
    "reactions",
    "text",
    "content_hash",
    "recipe",
)
_TEXT_COLUMN = _UPDATE_COLUMNS.index("text")
_COLUMNS = (
    "unit_id, chat_id, topic_key, kind, key, content_hash, reactions, msg_ids, senders,"
    " start_date, end_date, build_id"
)


class UnitLike(Protocol):
    """What the writer stores of a unit: a cut ``Unit`` or a conversation chunk."""

    @property
    def kind(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def topic_id(self) -> int | None: ...
    @property
    def msg_ids(self) -> tuple[int, ...]: ...
    @property
    def first_date(self) -> int: ...
    @property
    def last_date(self) -> int: ...
    @property
    def senders(self) -> tuple[str, ...]: ...
    @property
    def reactions(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def content_hash(self) -> str: ...
    @property
    def recipe(self) -> int: ...


def _ids_json(ids: Sequence[int]) -> str:
    """``json.dumps(list(ids))``, without the encoder's overhead."""
    return "[" + ", ".join(map(str, ids)) + "]"


# Member rows ``(unit_id, account, chat_id, msg_id)`` in the primary key's order.
_MEMBER_ORDER = itemgetter(2, 3, 0)


def topic_key(topic_id: int | None) -> int:
    """The stored ``topic_key`` of a topic id (0 outside topics)."""
    return 0 if topic_id is None else topic_id


@dataclass(frozen=True, slots=True)
class StoredUnit:
    """A unit row as stored, without its text.

    Attributes:
        unit_id: The stable row id.
        chat_id: The chat the unit belongs to (a post's channel, not its discussion group).
        topic_key: Forum topic id, or 0.
        kind: window, thread, post or conversation.
        key: Identity within (chat, topic, kind).
        content_hash: Hash of the recipe and the text.
        reactions: Reaction total.
        msg_ids: Member ids in text order.
        senders: Distinct sender names.
        first_date: Earliest member date, unix seconds UTC.
        last_date: Latest member date, unix seconds UTC.
        build_id: The conversation build of a chunk; None for other kinds.
    """

    unit_id: int
    chat_id: int
    topic_key: int
    kind: str
    key: str
    content_hash: str
    reactions: int
    msg_ids: tuple[int, ...]
    senders: tuple[str, ...]
    first_date: int
    last_date: int
    build_id: int | None = None

    @property
    def ident(self) -> tuple[int, str, str]:
        """``(topic_key, kind, key)``: the identity within the chat."""
        return (self.topic_key, self.kind, self.key)


def _stored(row: Sequence[Any]) -> StoredUnit:
    (unit_id, chat_id, tkey, kind, key, digest, reactions, msg_ids, senders, start, end, build) = (
        row
    )
    return StoredUnit(
        unit_id=int(unit_id),
        chat_id=int(chat_id),
        topic_key=int(tkey),
        kind=str(kind),
        key=str(key),
        content_hash=str(digest),
        reactions=int(reactions),
        msg_ids=tuple(int(i) for i in json.loads(msg_ids)),
        senders=tuple(str(s) for s in json.loads(senders)),
        first_date=int(start),
        last_date=int(end),
        build_id=None if build is None else int(build),
    )


def stored_units(
    conn: Connection, account: str, chat_id: int, where: str = "1", params: Sequence[object] = ()
) -> list[StoredUnit]:
    """Units of one chat matching the SQL condition ``where`` (over ``units`` columns)."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM units WHERE account = ? AND chat_id = ? AND ({where})",
        (account, chat_id, *params),
    )
    return [_stored(r) for r in rows]


def thread_units(
    conn: Connection, account: str, chat_id: int, roots: Iterable[int]
) -> list[StoredUnit]:
    """The thread units of one chat whose roots are ``roots`` (keys ``t:<root>:<part>``), by
    root, then key: one statement, an index range per root."""
    cols = ", ".join(f"u.{c.strip()}" for c in _COLUMNS.split(","))
    rows = conn.execute(
        f"SELECT {cols} FROM json_each(?) AS r JOIN units AS u"
        " ON u.account = ? AND u.chat_id = ? AND u.kind = 'thread'"
        " AND u.key >= 't:' || r.value || ':' AND u.key < 't:' || r.value || ';'"
        " ORDER BY r.value, u.key",
        (_JSON(sorted(set(roots))), account, chat_id),
    )
    return [_stored(r) for r in rows]


def units_by_ident(
    conn: Connection, account: str, chat_id: int, idents: Iterable[tuple[int, str, str]]
) -> list[StoredUnit]:
    """The stored units of one chat with any of the identities ``(topic_key, kind, key)``."""
    keys: dict[tuple[int, str], list[str]] = {}
    for tkey, kind, key in set(idents):
        keys.setdefault((tkey, kind), []).append(key)
    found: list[StoredUnit] = []
    for (tkey, kind), wanted in sorted(keys.items()):
        wanted.sort()
        for start in range(0, len(wanted), _IN_CHUNK):
            chunk = wanted[start : start + _IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM units WHERE account = ? AND chat_id = ?"
                f" AND topic_key = ? AND kind = ? AND key IN ({marks})",
                (account, chat_id, tkey, kind, *chunk),
            )
            found.extend(_stored(r) for r in rows)
    return found


def held_units(
    conn: Connection, account: str, chat_id: int, msg_ids: Iterable[int]
) -> list[StoredUnit]:
    """Units (other than conversation chunks) that hold any of the messages of one chat.

    Post units of a channel are included when ``chat_id`` is its discussion group.
    """
    ids = sorted(set(msg_ids))
    found: dict[int, StoredUnit] = {}
    cols = ", ".join(f"u.{c.strip()}" for c in _COLUMNS.split(","))
    for start in range(0, len(ids), _IN_CHUNK):
        chunk = ids[start : start + _IN_CHUNK]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(
            f"SELECT DISTINCT {cols} FROM unit_members m JOIN units u ON u.unit_id = m.unit_id"
            f" WHERE m.account = ? AND m.chat_id = ? AND m.msg_id IN ({marks})"
            " AND u.kind != 'conversation'",
            (account, chat_id, *chunk),
        ):
            unit = _stored(row)
            found[unit.unit_id] = unit
    return list(found.values())


def _member_rows(
    unit_id: int, account: str, chat_id: int, linked: int | None, kind: str, msg_ids: Sequence[int]
) -> list[tuple[int, str, int, int]]:
    if kind == "post" and linked is not None:
        rows = [(unit_id, account, chat_id, msg_ids[0])]
        rows.extend((unit_id, account, linked, m) for m in msg_ids[1:])
        return rows
    return [(unit_id, account, chat_id, m) for m in msg_ids]


@dataclass
class UnitWriter:
    """Applies unit diffs for one account inside one transaction and collects feed events.

    Call ``flush`` before the transaction commits to append the collected events.
    """

    conn: Connection
    account: str
    upserted: int = 0
    deleted: int = 0
    quiet: int = 0
    events: list[tuple[str, str, int, int, str]] = field(default_factory=list)

    def sync(
        self,
        chat_id: int,
        linked: int | None,
        old: Iterable[StoredUnit],
        new: Iterable[UnitLike],
        *,
        build_id: int | None = None,
    ) -> dict[tuple[int, str, str], int]:
        """Make the stored units ``old`` (of one chat) become ``new``.

        Args:
            chat_id: The chat the units belong to.
            linked: A channel's discussion group (post members after the first live there).
            old: The stored units the new cut replaces, all of ``chat_id``.
            new: The freshly cut units.
            build_id: Stored on inserted and changed units (conversation chunks).

        Returns:
            The unit id of every new unit, by identity.
        """
        by_ident = {u.ident: u for u in old}
        ids: dict[tuple[int, str, str], int] = {}
        fresh: list[UnitLike] = []
        for unit in new:
            ident = (topic_key(unit.topic_id), unit.kind, unit.key)
            prev = by_ident.pop(ident, None)
            if prev is None:
                fresh.append(unit)
                continue
            ids[ident] = prev.unit_id
            same_shape = (
                prev.msg_ids == unit.msg_ids
                and prev.reactions == unit.reactions
                and prev.senders == unit.senders
                and prev.first_date == unit.first_date
                and prev.last_date == unit.last_date
            )
            if prev.content_hash == unit.content_hash and same_shape:
                continue
            changed = prev.content_hash != unit.content_hash
            self._update(prev, chat_id, linked, unit, announce=changed)
        self.delete(by_ident.values())
        for unit, unit_id in zip(
            fresh, self.insert_many(chat_id, linked, fresh, build_id=build_id), strict=True
        ):
            ids[(topic_key(unit.topic_id), unit.kind, unit.key)] = unit_id
        return ids

    def insert_many(
        self,
        chat_id: int,
        linked: int | None,
        units: Sequence[UnitLike],
        *,
        build_id: int | None = None,
        announce: bool = True,
    ) -> list[int]:
        """Insert units whose identities are not stored yet; returns their new ids in order.

        Raises:
            sqlean.IntegrityError: an identity is already stored (a caller bug: the diff
                must cover every stored unit the new units could collide with).
        """
        if not units:
            return []
        first = int(
            self.conn.execute("SELECT COALESCE(MAX(unit_id), 0) + 1 FROM units").fetchone()[0]
        )
        ids = list(range(first, first + len(units)))
        db.insert_rows(
            self.conn,
            "INSERT INTO units (unit_id, account, chat_id, topic_key, kind, key, build_id,"
            " first_msg_id, last_msg_id, start_date, end_date, msg_ids, senders, reactions, text,"
            " content_hash, recipe)",
            [
                (
                    unit_id,
                    self.account,
                    chat_id,
                    topic_key(unit.topic_id),
                    unit.kind,
                    unit.key,
                    build_id,
                    *self._values(unit),
                )
                for unit_id, unit in zip(ids, units, strict=True)
            ],
        )
        members: list[tuple[int, str, int, int]] = []
        for unit_id, unit in zip(ids, units, strict=True):
            members.extend(
                _member_rows(unit_id, self.account, chat_id, linked, unit.kind, unit.msg_ids)
            )
        members.sort(key=_MEMBER_ORDER)
        db.insert_rows(
            self.conn,
            "INSERT OR IGNORE INTO unit_members (unit_id, account, chat_id, msg_id)",
            members,
        )
        if announce:
            self.events.extend((UNIT_EVENT, self.account, chat_id, i, "upsert") for i in ids)
            self.upserted += len(ids)
        return ids

    @staticmethod
    def _values(unit: UnitLike) -> tuple[object, ...]:
        """``unit``'s values for ``_UPDATE_COLUMNS``, in that order."""
        return (
            unit.msg_ids[0],
            unit.msg_ids[-1],
            unit.first_date,
            unit.last_date,
            _ids_json(unit.msg_ids),
            _JSON(list(unit.senders)),
            unit.reactions,
            unit.text,
            unit.content_hash,
            unit.recipe,
        )

    def retarget(self, prev: StoredUnit, chat_id: int, unit: UnitLike, build_id: int) -> None:
        """Move a stored chunk with ``unit``'s content hash to another build, refreshing its
        other columns. The hash covers recipe and text, so those stay as stored, and ``unit``
        may come without its text (``text_dropped``)."""
        self._update(prev, chat_id, None, unit, announce=False, build_id=build_id, text=False)

    def _update(
        self,
        prev: StoredUnit,
        chat_id: int,
        linked: int | None,
        unit: UnitLike,
        *,
        announce: bool,
        build_id: int | None = None,
        text: bool = True,
    ) -> None:
        values = self._values(unit)
        columns = _UPDATE_COLUMNS if text else _UPDATE_COLUMNS[:_TEXT_COLUMN]
        self.conn.execute(
            f"UPDATE units SET {', '.join(f'{c} = ?' for c in columns)}, build_id = ?"
            " WHERE unit_id = ?",
            (
                *values[: len(columns)],
                build_id if build_id is not None else prev.build_id,
                prev.unit_id,
            ),
        )
        if prev.msg_ids != unit.msg_ids:
            self.conn.execute("DELETE FROM unit_members WHERE unit_id = ?", (prev.unit_id,))
            self.conn.executemany(
                "INSERT OR IGNORE INTO unit_members (unit_id, account, chat_id, msg_id)"
                " VALUES (?, ?, ?, ?)",
                _member_rows(prev.unit_id, self.account, chat_id, linked, unit.kind, unit.msg_ids),
            )
        if announce:
            self.events.append((UNIT_EVENT, self.account, chat_id, prev.unit_id, "upsert"))
            self.upserted += 1
        else:
            self.quiet += 1

    def delete(self, units: Iterable[StoredUnit]) -> None:
        """Delete stored units (their members cascade) and announce each deletion."""
        gone = list(units)
        if not gone:
            return
        self.conn.executemany(
            "DELETE FROM unit_members WHERE unit_id = ?", [(u.unit_id,) for u in gone]
        )
        self.conn.executemany("DELETE FROM units WHERE unit_id = ?", [(u.unit_id,) for u in gone])
        self.events.extend((UNIT_EVENT, self.account, u.chat_id, u.unit_id, "delete") for u in gone)
        self.deleted += len(gone)

    def announce(self, chat_id: int, unit_id: int, op: str) -> None:
        """Queue one event for a unit written outside ``sync`` (e.g. a chunk switched in)."""
        self.events.append((UNIT_EVENT, self.account, chat_id, unit_id, op))

    def flush(self) -> int:
        """Append the collected events to ``_feed``; returns how many."""
        count = len(self.events)
        if count:
            feed.append(self.conn, self.events)
            self.events = []
        return count


def unit_counts(conn: Connection) -> dict[str, int]:
    """How many units of each kind ``unitize.db`` holds (for status)."""
    return {
        str(kind): int(n)
        for kind, n in conn.execute("SELECT kind, COUNT(*) FROM units GROUP BY kind")
    }
