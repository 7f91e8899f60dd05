"""Recognising a channel post's automatic copy in its discussion group, over a real ingest.db."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chatseek_core import db
from chatseek_fusion.store import COPY_WINDOW_S, ChannelCopy, UnitRow, channel_copies
from chatseek_ingest import schema as ingest_schema

ACCOUNT = "default"
CHANNEL = -1_000_000_001_234  # marked ids, as ingest stores them
GROUP = -1_000_000_005_678
CHANNEL_SENDER = 1234  # a channel posting in its group is the sender with its bare id
POSTED = 1_700_000_000


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[db.Connection]:
    writer = db.connect(tmp_path / "ingest.db")
    db.migrate(writer, ingest_schema.OWNER, ingest_schema.MIGRATIONS)
    with db.transaction(writer):
        writer.execute("INSERT INTO accounts (account) VALUES (?)", (ACCOUNT,))
        for chat_id, kind in ((CHANNEL, "channel"), (GROUP, "supergroup")):
            writer.execute(
                "INSERT INTO chats (account, chat_id, type, title) VALUES (?, ?, ?, ?)",
                (ACCOUNT, chat_id, kind, str(chat_id)),
            )
    writer.close()
    reader = db.connect(":memory:")
    db.attach_readonly(reader, tmp_path / "ingest.db", "ingest")
    reader.execute("PRAGMA ingest.query_only = 1")
    yield reader
    reader.close()


def _store(path: Path, rows: list[tuple[int, int, int, str, str | None, int | None]]) -> None:
    """``(chat_id, msg_id, date, text, fwd_from, sender_id)`` rows into ingest.db."""
    writer = db.connect(path)
    with db.transaction(writer):
        writer.executemany(
            "INSERT INTO messages (account, chat_id, msg_id, date, text, fwd_from, sender_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(ACCOUNT, *row) for row in rows],
        )
    writer.close()


def _unit(msg_ids: tuple[int, ...], unit_id: int = 1) -> UnitRow:
    return UnitRow(
        unit_id=unit_id,
        account=ACCOUNT,
        chat_id=GROUP,
        topic_key=0,
        kind="window",
        build_id=None,
        first_msg_id=min(msg_ids),
        last_msg_id=max(msg_ids),
        start_date=POSTED,
        end_date=POSTED,
        msg_ids=msg_ids,
        senders=(),
        reactions=0,
        text="",
    )


def test_a_forwarded_copy_of_a_recent_post_is_recognised_whatever_its_case_and_spacing(
    conn: db.Connection, tmp_path: Path
) -> None:
    _store(
        tmp_path / "ingest.db",
        [
            (CHANNEL, 10, POSTED - 3600, "Digital nomad visa: remote work", None, None),
            (CHANNEL, 11, POSTED - 30, "Digital  nomad visa:\nREMOTE work", None, None),
            (CHANNEL, 12, POSTED + 5, "Digital nomad visa: remote work", None, None),
            # The copy, 30 s after post 11; and one whose text matches no post.
            (GROUP, 7, POSTED, "digital nomad visa: remote   work", "Channel", CHANNEL_SENDER),
            (GROUP, 8, POSTED, "something else", "Channel", CHANNEL_SENDER),
            # Not forwarded: an ordinary message with the post's text is no copy.
            (GROUP, 9, POSTED, "Digital nomad visa: remote work", None, 42),
            # Whitespace only: never matched.
            (GROUP, 20, POSTED, "   ", "Channel", CHANNEL_SENDER),
        ],
    )
    got = channel_copies(conn, [_unit((7, 8, 9)), _unit((8,), unit_id=2), _unit((20,), 3)])
    # Post 11 is the latest post of the window before the copy; 12 came after it, 10 too early.
    assert got == {1: ChannelCopy(ACCOUNT, GROUP, 7, CHANNEL, 11)}


def test_a_post_older_than_the_window_is_not_the_original(
    conn: db.Connection, tmp_path: Path
) -> None:
    _store(
        tmp_path / "ingest.db",
        [
            (CHANNEL, 10, POSTED - COPY_WINDOW_S - 1, "Same words", None, None),
            (GROUP, 7, POSTED, "same words", "Channel", CHANNEL_SENDER),
        ],
    )
    assert channel_copies(conn, [_unit((7,))]) == {}
