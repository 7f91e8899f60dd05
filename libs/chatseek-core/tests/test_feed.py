"""Change feeds: a consumer killed between its writes and its commit loses and repeats nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from chatseek_core import db, feed

PRODUCER = [
    db.Migration(1, "feed", feed.FEED_DDL + "CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT);")
]
CONSUMER_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from chatseek_core import db, feed
    consumer_path, producer_path, kill_at = sys.argv[1], sys.argv[2], sys.argv[3]
    conn = db.connect(consumer_path)
    db.migrate(conn, "consumer", [db.Migration(1, "derived", feed.CURSOR_DDL +
        "CREATE TABLE derived (item INTEGER PRIMARY KEY, v TEXT);")])
    db.attach_readonly(conn, producer_path, "producer")
    while True:
        with db.transaction(conn):
            after = feed.cursor(conn, "producer")
            events = feed.read_after(conn, after, 3, schema="producer")
            if not events:
                break
            for event in events:
                row = conn.execute("SELECT v FROM producer.items WHERE id = ?",
                                   (event.entity,)).fetchone()
                conn.execute("INSERT INTO derived (item, v) VALUES (?, ?)", (event.entity, row[0]))
            feed.set_cursor(conn, "producer", events[-1].seq)
            if kill_at != "never" and events[-1].seq >= int(kill_at):
                os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _produce(path: Path, ids: range) -> None:
    conn = db.connect(path)
    db.migrate(conn, "producer", PRODUCER)
    with db.transaction(conn):
        for i in ids:
            conn.execute("INSERT INTO items (id, v) VALUES (?, ?)", (i, f"v{i}"))
            feed.append(conn, [("item", "acct", 1, i, "upsert")])
    conn.close()


def _consume(tmp_path: Path, kill_at: str) -> int:
    script = tmp_path / "consumer.py"
    script.write_text(CONSUMER_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "c.db"), str(tmp_path / "p.db"), kill_at],
        capture_output=True,
        timeout=60,
    )
    return proc.returncode


def test_a_consumer_killed_before_commit_resumes_without_loss_or_repeat(tmp_path: Path) -> None:
    _produce(tmp_path / "p.db", range(1, 11))
    assert _consume(tmp_path, kill_at="5") == -9
    conn = db.connect(tmp_path / "c.db")
    # The batch holding seq 5 (seqs 4..6) was killed inside its transaction: only 1..3 landed.
    assert [r[0] for r in conn.execute("SELECT item FROM derived ORDER BY item")] == [1, 2, 3]
    assert feed.cursor(conn, "producer") == 3
    conn.close()
    assert _consume(tmp_path, kill_at="never") == 0
    conn = db.connect(tmp_path / "c.db")
    assert [r[0] for r in conn.execute("SELECT item FROM derived ORDER BY item")] == list(
        range(1, 11)
    )
    assert feed.cursor(conn, "producer") == 10


def test_new_events_after_a_complete_pass_are_picked_up_from_the_cursor(tmp_path: Path) -> None:
    _produce(tmp_path / "p.db", range(1, 4))
    assert _consume(tmp_path, kill_at="never") == 0
    _produce(tmp_path / "p.db", range(4, 6))
    assert _consume(tmp_path, kill_at="never") == 0
    conn = db.connect(tmp_path / "c.db")
    assert tuple(conn.execute("SELECT COUNT(*), COUNT(DISTINCT item) FROM derived").fetchone()) == (
        5,
        5,
    )
