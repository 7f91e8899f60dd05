"""Exports and store snapshots the reader tests share: a big supergroup export written message
by message, every stored row of an ingest.db, an import that returns its error as a value."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from chatseek_core import db
from chatseek_core.errors import MalformedExport
from chatseek_ingest.importer import BATCH_MESSAGES, ImportReport, import_export
from chatseek_testing.exports import export_message
from chatseek_testing.telegram import ingest_db

ACCOUNT = "me"
BASE_UNIX = 1_704_103_200
# Enough for several commits, so that a reader can die between them.
MANY = 3 * BATCH_MESSAGES + 123
TABLES = ("accounts", "sources", "chats", "senders", "messages", "media", "_feed")


def message(mid: int) -> dict[str, Any]:
    text = f"сообщение {mid}: renting a flat near the beach, price {mid % 997} EUR"
    extra: dict[str, Any] = {}
    if mid % 7 == 0:
        extra["reply_to_message_id"] = mid - 3
    if mid % 11 == 0:
        extra["edited"] = "2024-01-02T10:00:00"
        extra["edited_unixtime"] = str(BASE_UNIX + 60 * mid + 30)
    return export_message(mid, text, unix=BASE_UNIX + 60 * mid, sender=1000 + mid % 40, **extra)


def write_export(path: Path, count: int, *, broken_at: int | None = None) -> Path:
    """A supergroup export of ``count`` messages; ``broken_at`` puts bad JSON after that one."""
    with path.open("w", encoding="utf-8") as out:
        out.write('{"name": "Big", "type": "public_supergroup", "id": 42, "messages": [\n')
        for mid in range(1, count + 1):
            out.write(json.dumps(message(mid), ensure_ascii=False, indent=1))
            if mid == broken_at:
                out.write(", ]]] not json {\n")
            out.write(",\n" if mid < count else "\n]}\n")
    return path


def rows(conn: db.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, without the columns that record when it was written."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for table in TABLES:
        columns = [
            str(r[1])
            for r in conn.execute(f"PRAGMA table_info({table})")
            if r[1] != "at" and not str(r[1]).endswith("_at")
        ]
        out[table] = [
            tuple(r)
            for r in conn.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY 1, 2, 3")
        ]
    return out


def import_once(
    root: Path, export: Path, *, process: bool, **kwargs: Any
) -> tuple[ImportReport | MalformedExport, dict[str, list[tuple[Any, ...]]]]:
    conn = ingest_db(root / "ingest.db")
    try:
        try:
            outcome: ImportReport | MalformedExport = import_export(
                conn, ACCOUNT, export, reader_process=process, **kwargs
            )
        except MalformedExport as error:
            outcome = error
        return outcome, rows(conn)
    finally:
        conn.close()


def children() -> list[int]:
    """This process's child processes, over every thread (a thread may end while read)."""
    found: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            text = (task / "children").read_text().split()
        except FileNotFoundError:
            continue
        found += [int(pid) for pid in text]
    return found
