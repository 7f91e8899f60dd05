"""A big export through the real stack: ingest parses it in its reader process, and what it
stores is what an import read in one process stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chatseek_core import db
from chatseek_ingest.importer import import_export
from chatseek_ingest.reading import PROCESS_MIN_BYTES
from chatseek_testing.exports import export_message
from chatseek_testing.telegram import ingest_db
from tests.stack_helpers import cli, cli_json, stack_env

BASE_UNIX = 1_704_103_200
TEXT = "Looking for a flat near the old town, two rooms, balcony, pets allowed. " * 8


def _export(folder: Path) -> tuple[Path, int]:
    """A supergroup export just above the reader's threshold; returns it and its messages."""
    folder.mkdir(parents=True)
    path = folder / "result.json"
    count = 0
    with path.open("w", encoding="utf-8") as out:
        out.write('{"name": "Big Flats", "type": "public_supergroup", "id": 4242, "messages": [\n')
        while out.tell() < PROCESS_MIN_BYTES + 4096:
            count += 1
            text = f"{count}: {TEXT}"
            row = export_message(count, text, unix=BASE_UNIX + 60 * count, sender=5000 + count % 30)
            if count % 5 == 0:
                row["reply_to_message_id"] = count - 2
            out.write(("" if count == 1 else ",\n") + json.dumps(row, ensure_ascii=False))
        out.write("\n]}\n")
    return folder, count


def _messages(path: Path) -> list[tuple[Any, ...]]:
    conn = db.connect(path, readonly=True)
    try:
        return [
            tuple(r)
            for r in conn.execute(
                "SELECT chat_id, msg_id, date, sender_id, sender_name, text,"
                " reply_to_msg_id, mentions, content_hash FROM messages ORDER BY chat_id, msg_id"
            )
        ]
    finally:
        conn.close()


def test_a_big_export_is_read_in_ingests_reader_process_and_stored_as_in_one_process(
    tmp_path: Path,
) -> None:
    export, count = _export(tmp_path / "export")
    home = tmp_path / "home"
    env = stack_env(home)
    try:
        report = cli_json(env, "import", str(export), "--json")
    finally:
        cli(env, "stack", "down", check=False)
    assert report["messages_imported"] == count
    log = (home / "logs" / "ingest.log").read_text(encoding="utf-8")
    assert "in reader process" in log
    reference = ingest_db(tmp_path / "reference" / "ingest.db")
    import_export(reference, "default", export, reader_process=False)
    reference.close()
    stored = _messages(home / "data" / "ingest.db")
    assert len(stored) == count
    assert stored == _messages(tmp_path / "reference" / "ingest.db")
