"""``chatseek verify``: checks every derived store against its sources; ``backup`` copies them.

Checks (each a named finding with a count and examples):
* every stored message is in a unit, unless unitize has not consumed its latest event yet;
* every unit is in the word index, unless lexical has not consumed the unit's latest event;
* every unit has a vector of the current space, unless it is queued or vector is behind;
* no orphan rows: unit members, indexed messages and units, and vectors whose source is gone;
* no feed cursor is ahead of its feed (a producer file replaced under its consumers);
* every chat's current conversation build is complete.
Everything is read through read-only connections, in one snapshot per file. ``repair`` never
touches source data: it replays from the feeds (re-cut, re-index, re-embed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlean

from chatseek_core import db
from chatseek_core.errors import InvalidArgument, StorageError

__all__ = ["Finding", "backup", "verify_store"]

EXAMPLES = 5
OWNERS = ("ingest", "unitize", "lexical", "vector")


@dataclass
class Finding:
    """One check: ``problems`` rows failed it; ``examples`` name a few."""

    check: str
    problems: int = 0
    examples: list[str] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "ok": self.problems == 0,
            "problems": self.problems,
            "examples": self.examples,
            "note": self.note,
        }


def _open(data_dir: Path) -> db.Connection:
    conn = db.connect(":memory:", vec=True)
    for owner in OWNERS:
        path = data_dir / f"{owner}.db"
        if not path.exists():
            raise StorageError(
                f"{path} does not exist",
                hint="start the stack and import or sync something first",
            )
        db.attach_readonly(conn, path, owner)
    return conn


def _count(conn: db.Connection, finding: Finding, sql: str, params: tuple[Any, ...] = ()) -> None:
    rows = conn.execute(sql, params).fetchall()
    finding.problems = len(rows)
    finding.examples = [" ".join(str(v) for v in row) for row in rows[:EXAMPLES]]


def _cursor(conn: db.Connection, schema: str, feed: str) -> int:
    row = conn.execute(f"SELECT seq FROM {schema}._cursors WHERE feed = ?", (feed,)).fetchone()
    return int(row[0]) if row else 0


def _head(conn: db.Connection, schema: str) -> int:
    row = conn.execute(f"SELECT COALESCE(MAX(seq), 0) FROM {schema}._feed").fetchone()
    return int(row[0])


def verify_store(data_dir: Path) -> dict[str, Any]:
    """Run every check; returns ``{ok, findings, checked_at}``."""
    conn = _open(data_dir)
    try:
        conn.execute("BEGIN")
        findings = _checks(conn)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return {
        "ok": all(f.problems == 0 for f in findings),
        "findings": [f.to_dict() for f in findings],
        "checked_at": int(time.time()),
    }


def _checks(conn: db.Connection) -> list[Finding]:
    out: list[Finding] = []
    cursors = {
        ("unitize", "ingest"): _cursor(conn, "unitize", "ingest"),
        ("lexical", "ingest"): _cursor(conn, "lexical", "ingest"),
        ("lexical", "unitize"): _cursor(conn, "lexical", "unitize"),
        ("vector", "unitize"): _cursor(conn, "vector", "unitize"),
    }
    heads = {"ingest": _head(conn, "ingest"), "unitize": _head(conn, "unitize")}

    ahead = Finding("feed cursors are not ahead of their feeds")
    for (consumer, producer), position in cursors.items():
        if position > heads[producer]:
            ahead.problems += 1
            ahead.examples.append(f"{consumer} at {position} > {producer} head {heads[producer]}")
    out.append(ahead)

    units = Finding("every stored message is in a unit (or announced and pending)")
    _count(
        conn,
        units,
        "SELECT m.account, m.chat_id, m.msg_id FROM ingest.messages m"
        " WHERE m.kind = 'message'"
        " AND NOT EXISTS (SELECT 1 FROM unitize.unit_members um WHERE um.account = m.account"
        "  AND um.chat_id = m.chat_id AND um.msg_id = m.msg_id)"
        " AND NOT EXISTS (SELECT 1 FROM ingest._feed f WHERE f.account = m.account"
        "  AND f.chat_id = m.chat_id AND f.entity = m.msg_id AND f.seq > ?)"
        " AND (m.text <> '' OR EXISTS (SELECT 1 FROM ingest.media md WHERE md.mid = m.mid))",
        (cursors[("unitize", "ingest")],),
    )
    out.append(units)

    words = Finding("every unit is in the word index (or pending)")
    _count(
        conn,
        words,
        "SELECT u.unit_id, u.kind FROM unitize.units u"
        " WHERE NOT EXISTS (SELECT 1 FROM lexical.indexed_units i WHERE i.unit_id = u.unit_id)"
        " AND NOT EXISTS (SELECT 1 FROM unitize._feed f WHERE f.entity = u.unit_id AND f.seq > ?)",
        (cursors[("lexical", "unitize")],),
    )
    out.append(words)

    messages = Finding("every stored message is in the message word index (or pending)")
    _count(
        conn,
        messages,
        "SELECT m.account, m.chat_id, m.msg_id FROM ingest.messages m"
        " WHERE NOT EXISTS (SELECT 1 FROM lexical.indexed_messages i WHERE i.mid = m.mid)"
        " AND NOT EXISTS (SELECT 1 FROM ingest._feed f WHERE f.account = m.account"
        "  AND f.chat_id = m.chat_id AND f.entity = m.msg_id AND f.seq > ?)",
        (cursors[("lexical", "ingest")],),
    )
    out.append(messages)

    space = conn.execute("SELECT space_id FROM vector.spaces WHERE current = 1").fetchone()
    vectors = Finding("every unit has a vector of the current space (or is queued)")
    if space is None:
        vectors.note = "nothing embedded yet"
    else:
        _count(
            conn,
            vectors,
            "SELECT u.unit_id FROM unitize.units u"
            " WHERE NOT EXISTS (SELECT 1 FROM vector.embedded_units e"
            "  WHERE e.space_id = ? AND e.unit_id = u.unit_id)"
            " AND NOT EXISTS (SELECT 1 FROM vector.pending_units p WHERE p.unit_id = u.unit_id)"
            " AND NOT EXISTS (SELECT 1 FROM unitize._feed f WHERE f.entity = u.unit_id"
            "  AND f.seq > ?)",
            (int(space[0]), cursors[("vector", "unitize")]),
        )
    out.append(vectors)

    orphans = Finding("no orphan rows in derived tables")
    checks = (
        "SELECT 'unit_member', um.unit_id, um.msg_id FROM unitize.unit_members um"
        " WHERE NOT EXISTS (SELECT 1 FROM ingest.messages m WHERE m.account = um.account"
        "  AND m.chat_id = um.chat_id AND m.msg_id = um.msg_id)"
        " AND NOT EXISTS (SELECT 1 FROM ingest._feed f WHERE f.account = um.account"
        f"  AND f.chat_id = um.chat_id AND f.entity = um.msg_id"
        f"  AND f.seq > {cursors[('unitize', 'ingest')]})",
        "SELECT 'indexed_message', i.mid, i.msg_id FROM lexical.indexed_messages i"
        " WHERE NOT EXISTS (SELECT 1 FROM ingest.messages m WHERE m.mid = i.mid)"
        " AND NOT EXISTS (SELECT 1 FROM ingest._feed f WHERE f.account = i.account"
        f"  AND f.chat_id = i.chat_id AND f.entity = i.msg_id"
        f"  AND f.seq > {cursors[('lexical', 'ingest')]})",
        "SELECT 'indexed_unit', i.unit_id, i.kind FROM lexical.indexed_units i"
        " WHERE NOT EXISTS (SELECT 1 FROM unitize.units u WHERE u.unit_id = i.unit_id)"
        " AND NOT EXISTS (SELECT 1 FROM unitize._feed f WHERE f.entity = i.unit_id"
        f"  AND f.seq > {cursors[('lexical', 'unitize')]})",
        "SELECT 'vector', e.unit_id, e.space_id FROM vector.embedded_units e"
        " WHERE NOT EXISTS (SELECT 1 FROM unitize.units u WHERE u.unit_id = e.unit_id)"
        " AND NOT EXISTS (SELECT 1 FROM unitize._feed f WHERE f.entity = e.unit_id"
        f"  AND f.seq > {cursors[('vector', 'unitize')]})",
    )
    for sql in checks:
        rows = conn.execute(sql).fetchall()
        orphans.problems += len(rows)
        orphans.examples.extend(" ".join(str(v) for v in r) for r in rows[:EXAMPLES])
    out.append(orphans)

    builds = Finding("every current conversation build is complete")
    _count(
        conn,
        builds,
        "SELECT cb.account, cb.chat_id, cb.build_id, b.state FROM unitize.current_builds cb"
        " JOIN unitize.conversation_builds b ON b.build_id = cb.build_id"
        " WHERE b.state <> 'complete'",
    )
    out.append(builds)
    return out


def _unwritable(target: Path, exc: Exception) -> InvalidArgument:
    return InvalidArgument(
        f"{target} cannot hold a backup: {exc}",
        hint="back up into a directory you can write",
        metadata={"field": "directory"},
    )


def backup(data_dir: Path, target: Path) -> dict[str, Any]:
    """Write a consistent copy of every database file into ``target`` (``VACUUM INTO``).

    Raises:
        InvalidArgument: ``target`` already holds a copy (nothing is overwritten), or it cannot
            be created or written.
    """
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _unwritable(target, exc) from exc
    copies = []
    for owner in OWNERS:
        source = data_dir / f"{owner}.db"
        if not source.exists():
            continue
        destination = target / source.name
        if destination.exists():
            raise InvalidArgument(
                f"{destination} already exists", hint="back up into an empty directory"
            )
        conn = db.connect(source, readonly=True, vec=owner == "vector")
        try:
            with db.storage_errors():
                conn.execute("VACUUM INTO ?", (str(destination),))
        except sqlean.OperationalError as exc:
            raise _unwritable(target, exc) from exc
        finally:
            conn.close()
        copies.append({"file": source.name, "bytes": destination.stat().st_size})
    return {"directory": str(target), "files": copies}
