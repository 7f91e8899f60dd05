"""Prune-deleted against the strict fake Telegram over a real, migrated ingest.db."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatseek_core import db, feed
from chatseek_core.errors import ChatNotFound, FailedPrecondition, SyncRunning
from chatseek_ingest import store
from chatseek_ingest.model import ExportChat
from chatseek_ingest.prune import prune_deleted
from chatseek_ingest.sources import add_source
from chatseek_ingest.sync import default_lock_path, sync, sync_lock
from chatseek_testing.telegram import FakeTelegram, ingest_db

ACCOUNT = "me"
CHANNEL = -1000000000500
GROUP = -1000000000501


class Clock:
    """Advances by ``per_request`` seconds on every ``get_messages`` and on sleeps."""

    def __init__(self, per_request: float = 0.0) -> None:
        self.now = 0.0
        self.per_request = per_request
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def tick(self, method: str) -> None:
        if method == "get_messages":
            self.now += self.per_request


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[db.Connection]:
    connection = ingest_db(tmp_path / "data" / "ingest.db")
    yield connection
    connection.close()


@pytest.fixture
def tg() -> FakeTelegram:
    return FakeTelegram()


async def synced_channel(conn: db.Connection, tg: FakeTelegram, count: int) -> Any:
    channel = tg.add_channel(500, "Archive", username="archive")
    for n in range(count):
        tg.send(channel, f"post {n}")
    await add_source(conn, tg, ACCOUNT, "@archive")
    await sync(conn, tg, ACCOUNT)
    return channel


def stored(conn: db.Connection, chat_id: int) -> list[int]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT msg_id FROM messages WHERE chat_id = ? ORDER BY msg_id", (chat_id,)
        )
    ]


def cursor(conn: db.Connection, chat_id: int) -> int:
    row = conn.execute("SELECT prune_cursor FROM chats WHERE chat_id = ?", (chat_id,)).fetchone()
    return int(row[0])


async def test_prune_asks_in_batches_of_a_hundred_oldest_first_and_drops_only_what_is_gone(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = await synced_channel(conn, tg, 250)
    tg.delete(channel, 3, 150, 249)
    head = feed.head(conn)
    before = len(tg.requested("get_messages"))
    report = await prune_deleted(conn, tg, ACCOUNT)
    assert len(tg.requested("get_messages")) - before == 3
    assert (report.checked, report.deleted, report.chats_done) == (250, 3, 1)
    assert [e.entity for e in feed.read_after(conn, head, 10)] == [3, 150, 249]
    assert len(stored(conn, CHANNEL)) == 247 and 150 not in stored(conn, CHANNEL)
    assert cursor(conn, CHANNEL) == 0
    count = conn.execute("SELECT message_count FROM chats WHERE chat_id = ?", (CHANNEL,))
    assert count.fetchone()[0] == 247


async def test_a_budget_stop_keeps_finished_batches_and_the_next_run_resumes_from_the_cursor(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = await synced_channel(conn, tg, 250)
    tg.delete(channel, 10, 240)
    clock = Clock(per_request=10.0)
    tg.on_request = clock.tick
    report = await prune_deleted(conn, tg, ACCOUNT, budget_s=5, clock=clock, sleep=clock.sleep)
    assert report.stopped_by == "budget" and report.chats_remaining == 1
    assert (report.checked, report.deleted) == (100, 1)
    assert cursor(conn, CHANNEL) == 100
    before = len(tg.requested("get_messages"))
    resumed = await prune_deleted(conn, tg, ACCOUNT)
    assert len(tg.requested("get_messages")) - before == 2
    assert (resumed.checked, resumed.deleted) == (150, 1)
    assert cursor(conn, CHANNEL) == 0


async def test_a_long_flood_wait_stops_the_run_and_a_short_one_is_slept_through(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = await synced_channel(conn, tg, 150)
    tg.delete(channel, 120)
    tg.flood(10, method="get_messages")
    tg.flood(3600, at=2, method="get_messages")
    clock = Clock()
    report = await prune_deleted(conn, tg, ACCOUNT, clock=clock, sleep=clock.sleep)
    assert clock.slept == [10.0]
    assert report.stopped_by == "flood_wait" and report.flood_wait_s == 3600
    assert cursor(conn, CHANNEL) == 100 and 120 in stored(conn, CHANNEL)
    await prune_deleted(conn, tg, ACCOUNT)
    assert 120 not in stored(conn, CHANNEL)


async def test_a_channel_is_followed_to_its_discussion_group(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = tg.add_channel(500, "Archive", username="archive")
    group = tg.add_channel(501, "Archive chat", megagroup=True, dialog=False)
    tg.link_discussion(channel, group)
    reader = tg.add_user(21, "Lea")
    post = tg.send(channel, "post")
    first = tg.comment(channel, post.id, "one", sender=reader)
    tg.comment(channel, post.id, "two", sender=reader)
    await add_source(conn, tg, ACCOUNT, "@archive", comments=True)
    await sync(conn, tg, ACCOUNT)
    tg.delete(group, first.id)
    report = await prune_deleted(conn, tg, ACCOUNT, CHANNEL)
    assert report.deleted == 1 and report.chats_done == 2
    assert first.id not in stored(conn, GROUP) and len(stored(conn, GROUP)) == 1


async def test_a_chat_telegram_refuses_is_left_as_it_is(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = await synced_channel(conn, tg, 5)
    tg.delete(channel, 1)
    tg.forbid(channel)
    report = await prune_deleted(conn, tg, ACCOUNT)
    assert report.deleted == 0 and len(stored(conn, CHANNEL)) == 5
    assert any("ChannelPrivate" in w for w in report.warnings)


async def test_an_unknown_chat_and_an_imported_chat_are_refused(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    with db.transaction(conn):
        store.ensure_account(conn, ACCOUNT)
        store.ensure_source(conn, ACCOUNT, "import:x", "import", "x")
        store.upsert_chat(
            conn,
            ACCOUNT,
            ExportChat(-42, 42, "group", "Old", None, "private_group"),
            source_id="import:x",
            is_import=True,
        )
    with pytest.raises(ChatNotFound):
        await prune_deleted(conn, tg, ACCOUNT, -43)
    with pytest.raises(FailedPrecondition):
        await prune_deleted(conn, tg, ACCOUNT, -42)
    assert tg.requested("get_messages") == []


async def test_prune_is_refused_while_a_sync_runs(conn: db.Connection, tg: FakeTelegram) -> None:
    await synced_channel(conn, tg, 2)
    with sync_lock(default_lock_path(conn)), pytest.raises(SyncRunning):
        await prune_deleted(conn, tg, ACCOUNT)


async def test_private_chat_ids_of_another_chat_are_not_mistaken_for_this_one(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    friend = tg.add_user(31, "Ola", username="ola")
    other = tg.add_user(32, "Kai")
    tg.send(friend, "a", sender=friend)
    tg.send(other, "b", sender=other)
    tg.send(friend, "c")
    await add_source(conn, tg, ACCOUNT, "@ola")
    await sync(conn, tg, ACCOUNT)
    report = await prune_deleted(conn, tg, ACCOUNT)
    assert report.deleted == 0 and stored(conn, 31) == [1, 3]
