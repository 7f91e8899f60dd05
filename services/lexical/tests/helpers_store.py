"""Test stand-ins for the producers: ingest.db and unitize.db written through their real schemas.

Each write mirrors what the owning service does: the rows and their ``_feed`` events are
committed in one transaction, so the lexical indexer sees exactly what production would show it.
``open_lexical`` opens a migrated lexical.db with both producer files attached read-only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from chatseek_core import db, feed
from chatseek_ingest import schema as ingest_schema
from chatseek_lexical.indexer import connect_index
from chatseek_unitize import schema as unitize_schema

__all__ = [
    "ACCOUNT",
    "BASE_DATE",
    "IngestStore",
    "MessageRow",
    "Stores",
    "UnitizeStore",
    "make_stores",
    "open_lexical",
]

ACCOUNT = "me"
BASE_DATE = 1_714_560_000  # 2024-05-01 10:40 UTC
CHAT_TYPE = "supergroup"
RECIPE = 1


@dataclass(frozen=True, slots=True)
class MessageRow:
    """One message for ``IngestStore.bulk_messages``; media fields are optional."""

    chat_id: int
    msg_id: int
    date: int
    text: str
    file_name: str | None = None
    extracted_text: str | None = None


class IngestStore:
    """ingest.db as the ingest service writes it: message rows plus ``message`` feed events."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = db.connect(path)
        db.migrate(self.conn, ingest_schema.OWNER, ingest_schema.MIGRATIONS)
        with db.transaction(self.conn):
            self.conn.execute("INSERT OR IGNORE INTO accounts (account) VALUES (?)", (ACCOUNT,))

    def close(self) -> None:
        """Close the writer connection."""
        self.conn.close()

    def add_chat(self, chat_id: int, *, account: str = ACCOUNT, title: str = "") -> None:
        """Register a chat (no feed event: chats are not indexed)."""
        with db.transaction(self.conn):
            self.conn.execute("INSERT OR IGNORE INTO accounts (account) VALUES (?)", (account,))
            self.conn.execute(
                "INSERT OR IGNORE INTO chats (account, chat_id, type, title) VALUES (?, ?, ?, ?)",
                (account, chat_id, CHAT_TYPE, title),
            )

    def put_message(
        self,
        chat_id: int,
        msg_id: int,
        text: str,
        *,
        account: str = ACCOUNT,
        date: int | None = None,
        file_name: str | None = None,
        media_kind: str = "document",
    ) -> int:
        """Store or edit a message (and its media row when ``file_name`` is given); return mid."""
        self.add_chat(chat_id, account=account)
        stamp = BASE_DATE + msg_id * 60 if date is None else date
        with db.transaction(self.conn):
            self.conn.execute(
                "INSERT INTO messages (account, chat_id, msg_id, date, text,"
                " content_hash) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (account, chat_id, msg_id) DO UPDATE SET text = excluded.text,"
                " content_hash = excluded.content_hash, edit_date = excluded.date",
                (account, chat_id, msg_id, stamp, text, _digest(text)),
            )
            mid = self._mid(account, chat_id, msg_id)
            if file_name is not None:
                self.conn.execute(
                    "INSERT INTO media (mid, kind, file_name) VALUES (?, ?, ?)"
                    " ON CONFLICT (mid) DO UPDATE SET file_name = excluded.file_name",
                    (mid, media_kind, file_name),
                )
            feed.append(self.conn, [("message", account, chat_id, msg_id, "upsert")])
        return mid

    def set_extracted_text(
        self, chat_id: int, msg_id: int, text: str, *, account: str = ACCOUNT
    ) -> None:
        """Record text read out of a message's media, announced as an upsert of the message."""
        with db.transaction(self.conn):
            mid = self._mid(account, chat_id, msg_id)
            self.conn.execute(
                "UPDATE media SET extracted_text = ?, extract_state = 'read' WHERE mid = ?",
                (text, mid),
            )
            feed.append(self.conn, [("message", account, chat_id, msg_id, "upsert")])

    def delete_message(self, chat_id: int, msg_id: int, *, account: str = ACCOUNT) -> None:
        """Delete a message (its media cascades) and announce the delete."""
        with db.transaction(self.conn):
            self.conn.execute(
                "DELETE FROM messages WHERE account = ? AND chat_id = ? AND msg_id = ?",
                (account, chat_id, msg_id),
            )
            feed.append(self.conn, [("message", account, chat_id, msg_id, "delete")])

    def announce(self, chat_id: int, msg_id: int, op: str, *, account: str = ACCOUNT) -> None:
        """Append a bare feed event (for replays and events about rows that are gone)."""
        with db.transaction(self.conn):
            feed.append(self.conn, [("message", account, chat_id, msg_id, op)])

    def bulk_messages(self, rows: Iterable[MessageRow], *, account: str = ACCOUNT) -> int:
        """Insert many new messages with one upsert event each, in one transaction; the count."""
        count = 0
        with db.transaction(self.conn):
            chats: set[int] = set()
            for chunk in _chunks(rows, 10_000):
                for r in chunk:
                    if r.chat_id not in chats:
                        chats.add(r.chat_id)
                        self.conn.execute(
                            "INSERT OR IGNORE INTO chats (account, chat_id, type) VALUES (?, ?, ?)",
                            (account, r.chat_id, CHAT_TYPE),
                        )
                self.conn.executemany(
                    "INSERT INTO messages (account, chat_id, msg_id, date, text)"
                    " VALUES (?, ?, ?, ?, ?)",
                    [(account, r.chat_id, r.msg_id, r.date, r.text) for r in chunk],
                )
                self.conn.executemany(
                    "INSERT INTO media (mid, kind, file_name, extracted_text)"
                    " SELECT mid, 'document', ?, ? FROM messages"
                    " WHERE account = ? AND chat_id = ? AND msg_id = ?",
                    [
                        (r.file_name, r.extracted_text, account, r.chat_id, r.msg_id)
                        for r in chunk
                        if r.file_name is not None or r.extracted_text is not None
                    ],
                )
                feed.append(
                    self.conn,
                    [("message", account, r.chat_id, r.msg_id, "upsert") for r in chunk],
                )
                count += len(chunk)
        return count

    def _mid(self, account: str, chat_id: int, msg_id: int) -> int:
        row = self.conn.execute(
            "SELECT mid FROM messages WHERE account = ? AND chat_id = ? AND msg_id = ?",
            (account, chat_id, msg_id),
        ).fetchone()
        return int(row[0])


class UnitizeStore:
    """unitize.db as the unitize service writes it: units, members, builds and ``unit`` events."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = db.connect(path)
        db.migrate(self.conn, unitize_schema.OWNER, unitize_schema.MIGRATIONS)

    def close(self) -> None:
        """Close the writer connection."""
        self.conn.close()

    def put_unit(
        self,
        chat_id: int,
        kind: str,
        msg_ids: Sequence[int],
        text: str,
        *,
        account: str = ACCOUNT,
        key: str | None = None,
        start_date: int | None = None,
        build_id: int | None = None,
    ) -> int:
        """Store or re-cut a unit keyed by ``(account, chat_id, kind, key)``; return unit_id."""
        unit_key = key if key is not None else f"{kind[0]}:{msg_ids[0]}"
        first = BASE_DATE + msg_ids[0] * 60 if start_date is None else start_date
        with db.transaction(self.conn):
            self.conn.execute(
                "INSERT INTO units (account, chat_id, kind, key, build_id, first_msg_id,"
                " last_msg_id, start_date, end_date, msg_ids, senders, text, content_hash,"
                " recipe) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '[]', ?, ?, ?)"
                " ON CONFLICT (account, chat_id, topic_key, kind, key) DO UPDATE SET"
                " first_msg_id = excluded.first_msg_id, last_msg_id = excluded.last_msg_id,"
                " start_date = excluded.start_date, end_date = excluded.end_date,"
                " msg_ids = excluded.msg_ids, text = excluded.text,"
                " content_hash = excluded.content_hash",
                (
                    account,
                    chat_id,
                    kind,
                    unit_key,
                    build_id,
                    min(msg_ids),
                    max(msg_ids),
                    first,
                    first + 60 * len(msg_ids),
                    json.dumps(list(msg_ids)),
                    text,
                    _digest(f"{RECIPE}\n{text}"),
                    RECIPE,
                ),
            )
            row = self.conn.execute(
                "SELECT unit_id FROM units WHERE account = ? AND chat_id = ? AND topic_key = 0"
                " AND kind = ? AND key = ?",
                (account, chat_id, kind, unit_key),
            ).fetchone()
            unit_id = int(row[0])
            self.conn.execute("DELETE FROM unit_members WHERE unit_id = ?", (unit_id,))
            self.conn.executemany(
                "INSERT INTO unit_members (unit_id, account, chat_id, msg_id) VALUES (?, ?, ?, ?)",
                [(unit_id, account, chat_id, m) for m in msg_ids],
            )
            feed.append(self.conn, [("unit", account, chat_id, unit_id, "upsert")])
        return unit_id

    def delete_unit(self, unit_id: int) -> None:
        """Delete a unit (members cascade) and announce the delete."""
        with db.transaction(self.conn):
            row = self.conn.execute(
                "SELECT account, chat_id FROM units WHERE unit_id = ?", (unit_id,)
            ).fetchone()
            self.conn.execute("DELETE FROM units WHERE unit_id = ?", (unit_id,))
            feed.append(self.conn, [("unit", row[0], row[1], unit_id, "delete")])

    def start_build(self, chat_id: int, *, account: str = ACCOUNT) -> int:
        """Open a conversation build in state ``building``; return its id."""
        with db.transaction(self.conn):
            cur = self.conn.execute(
                "INSERT INTO conversation_builds (account, chat_id, state, scorer)"
                " VALUES (?, ?, 'building', 'rules')",
                (account, chat_id),
            )
            return int(cur.lastrowid or 0)

    def publish_build(self, build_id: int) -> None:
        """Mark a build complete and make it its chat's current one, in one transaction."""
        with db.transaction(self.conn):
            row = self.conn.execute(
                "SELECT account, chat_id FROM conversation_builds WHERE build_id = ?",
                (build_id,),
            ).fetchone()
            self.conn.execute(
                "UPDATE conversation_builds SET state = 'complete' WHERE build_id = ?",
                (build_id,),
            )
            self.conn.execute(
                "INSERT INTO current_builds (account, chat_id, build_id) VALUES (?, ?, ?)"
                " ON CONFLICT (account, chat_id) DO UPDATE SET build_id = excluded.build_id",
                (row[0], row[1], build_id),
            )


@dataclass
class Stores:
    """The two producer stores and a lexical connection over one data directory."""

    ingest: IngestStore
    unitize: UnitizeStore
    lex: db.Connection

    def close(self) -> None:
        """Close every connection."""
        self.lex.close()
        self.ingest.close()
        self.unitize.close()


def make_stores(data_dir: Path) -> Stores:
    """Fresh ingest.db and unitize.db in ``data_dir`` plus a lexical.db attached to both."""
    ingest = IngestStore(data_dir / "ingest.db")
    unitize = UnitizeStore(data_dir / "unitize.db")
    return Stores(ingest=ingest, unitize=unitize, lex=open_lexical(data_dir))


def open_lexical(data_dir: Path) -> db.Connection:
    """lexical.db in ``data_dir``, migrated, with ingest.db and unitize.db attached read-only."""
    return connect_index(
        data_dir / "lexical.db",
        ingest_path=data_dir / "ingest.db",
        unitize_path=data_dir / "unitize.db",
    )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _chunks(rows: Iterable[MessageRow], size: int) -> Iterable[list[MessageRow]]:
    chunk: list[MessageRow] = []
    for r in rows:
        chunk.append(r)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
