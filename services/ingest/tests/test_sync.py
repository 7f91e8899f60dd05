"""Sync against the strict fake Telegram over a real, migrated ingest.db."""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from telethon import errors

from chatseek_core import db, feed
from chatseek_core.errors import SyncRunning
from chatseek_ingest import store
from chatseek_ingest.model import ExportChat
from chatseek_ingest.sources import add_source
from chatseek_ingest.sync import LOCK_FILE, sync
from chatseek_testing.telegram import FakeTelegram, ingest_db

ACCOUNT = "me"


class Clock:
    """A test clock: advances only when the code sleeps or a request costs time."""

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
        if method == "get_history":
            self.now += self.per_request


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[db.Connection]:
    connection = ingest_db(tmp_path / "data" / "ingest.db")
    yield connection
    connection.close()


@pytest.fixture
def tg() -> FakeTelegram:
    return FakeTelegram()


def rows(conn: db.Connection, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(sql, params)]


def chat_state(conn: db.Connection, chat_id: int) -> dict[str, Any]:
    row = conn.execute("SELECT * FROM chats WHERE chat_id = ?", (chat_id,)).fetchone()
    return dict(zip(row.keys(), tuple(row), strict=True))


def stored_ids(conn: db.Connection, chat_id: int) -> list[int]:
    return [
        r[0]
        for r in rows(conn, "SELECT msg_id FROM messages WHERE chat_id = ? ORDER BY 1", chat_id)
    ]


def channel_with(tg: FakeTelegram, count: int, *, channel_id: int = 500) -> Any:
    channel = tg.add_channel(channel_id, f"Channel {channel_id}", username=f"chan{channel_id}")
    for n in range(count):
        tg.send(channel, f"post {n}")
    return channel


async def run(conn: db.Connection, tg: FakeTelegram, **kwargs: Any) -> Any:
    """One sync as a new ingest process runs it: a fresh client whose entity cache is empty."""
    clock = kwargs.pop("clock", Clock())
    tg.restart()
    return await sync(conn, tg, ACCOUNT, clock=clock, sleep=clock.sleep, **kwargs)


# --- fetching ---


async def test_first_sync_fetches_the_whole_history_oldest_first_and_marks_it_complete(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = channel_with(tg, 7)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    report = await run(conn, tg, batch_size=3)
    chat_id = -1000000000500
    assert report.new == 7 and report.chats_done == 1 and report.stopped_by is None
    assert stored_ids(conn, chat_id) == list(range(1, 8))
    state = chat_state(conn, chat_id)
    assert (state["last_msg_id"], state["history_complete"], state["message_count"]) == (7, 1, 7)
    assert rows(conn, "SELECT first_msg_id, last_msg_id FROM history_ranges") == [(1, 7)]
    assert tg.entity(chat_id) is channel


async def test_incremental_sync_fetches_only_what_came_after_last_msg_id(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = channel_with(tg, 4)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    await run(conn, tg)
    head = feed.head(conn)
    tg.send(channel, "fresh one")
    tg.send(channel, "fresh two")
    report = await run(conn, tg)
    assert report.new == 2 and report.updated == 0 and report.deleted == 0
    announced = feed.read_after(conn, head, 100)
    assert [(e.entity, e.op) for e in announced] == [(5, "upsert"), (6, "upsert")]
    assert rows(conn, "SELECT first_msg_id, last_msg_id FROM history_ranges") == [(1, 6)]


async def test_a_first_sync_does_not_reread_and_a_later_one_does(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 5)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    await run(conn, tg)
    # Oldest first, Telethon learns that a channel's history is done from an empty page.
    assert len(tg.requested("get_history")) == 2
    await run(conn, tg)
    # One (empty) page after last_msg_id, then one page of the re-read.
    assert len(tg.requested("get_history")) == 4


async def test_since_starts_the_first_sync_at_that_day(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = tg.add_channel(500, "Dated", username="dated")
    for day in (1, 2, 3, 4):
        tg.send(channel, f"day {day}", date=datetime(2024, 3, day, 12, tzinfo=UTC))
    since = int(datetime(2024, 3, 3, tzinfo=UTC).timestamp())
    await add_source(conn, tg, ACCOUNT, "@dated", since=since)
    await run(conn, tg)
    assert stored_ids(conn, -1000000000500) == [3, 4]
    assert rows(conn, "SELECT first_msg_id, last_msg_id FROM history_ranges") == [(3, 4)]


async def test_budget_stops_between_batches_keeps_what_was_committed_and_the_next_run_resumes(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 10)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    clock = Clock(per_request=10.0)
    tg.on_request = clock.tick
    report = await run(conn, tg, clock=clock, budget_s=25, batch_size=2)
    chat_id = -1000000000500
    assert report.stopped_by == "budget" and report.chats_remaining == 1
    assert report.chats_done == 0 and report.new == 6
    assert stored_ids(conn, chat_id) == list(range(1, 7))
    assert [e.entity for e in feed.read_after(conn, 0, 100)] == list(range(1, 7))
    assert chat_state(conn, chat_id)["history_complete"] == 0
    resumed = await run(conn, tg, batch_size=2)
    assert resumed.new == 4 and resumed.stopped_by is None and resumed.chats_remaining == 0
    assert stored_ids(conn, chat_id) == list(range(1, 11))
    assert chat_state(conn, chat_id)["history_complete"] == 1


# --- the re-read ---


async def test_the_reread_updates_edits_and_reactions_and_deletes_only_inside_its_range(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = channel_with(tg, 10)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    await run(conn, tg)
    tg.edit(channel, 9, "post 8, corrected")
    tg.react(channel, 10, {"👍": 3, "🔥": 1})
    tg.delete(channel, 8, 2)
    report = await run(conn, tg, reread=4)
    chat_id = -1000000000500
    assert (report.updated, report.deleted, report.new) == (2, 1, 0)
    assert stored_ids(conn, chat_id) == [1, 2, 3, 4, 5, 6, 7, 9, 10]
    text, edited = conn.execute(
        "SELECT text, edit_date FROM messages WHERE chat_id = ? AND msg_id = 9", (chat_id,)
    ).fetchone()
    assert text == "post 8, corrected" and edited is not None
    total = conn.execute(
        "SELECT reactions_total FROM messages WHERE chat_id = ? AND msg_id = 10", (chat_id,)
    ).fetchone()[0]
    assert total == 4
    assert chat_state(conn, chat_id)["message_count"] == 9


async def test_a_reread_that_gets_nothing_back_deletes_nothing(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = channel_with(tg, 3)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    await run(conn, tg)
    tg.delete(channel, 1, 2, 3)
    report = await run(conn, tg)
    assert report.deleted == 0
    assert stored_ids(conn, -1000000000500) == [1, 2, 3]


# --- flood waits and the lock ---


async def test_a_short_flood_wait_is_slept_through_with_the_injected_sleep(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 4)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    tg.flood(30, method="get_history")
    clock = Clock()
    report = await run(conn, tg, clock=clock)
    assert clock.slept == [30.0]
    assert report.stopped_by is None and report.new == 4 and report.flood_wait_s == 0


async def test_a_long_flood_wait_stops_the_run_cleanly_and_the_next_run_continues(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 6)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    tg.flood(300, at=2, method="get_history")
    clock = Clock()
    report = await run(conn, tg, clock=clock, batch_size=2)
    assert report.stopped_by == "flood_wait" and report.flood_wait_s == 300
    assert report.chats_remaining == 1 and clock.slept == []
    assert stored_ids(conn, -1000000000500) == [1, 2]
    resumed = await run(conn, tg, batch_size=2)
    assert resumed.stopped_by is None
    assert stored_ids(conn, -1000000000500) == list(range(1, 7))


async def test_a_flood_wait_longer_than_the_budget_left_is_not_slept_through(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 2)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    tg.flood(30, method="get_history")
    clock = Clock()
    report = await run(conn, tg, clock=clock, budget_s=20)
    assert report.stopped_by == "flood_wait" and clock.slept == []


async def test_a_second_sync_while_one_runs_is_refused_at_once(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 2)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    tg.hold = asyncio.Event()
    first = asyncio.create_task(run(conn, tg))
    await tg.holding.wait()
    with pytest.raises(SyncRunning) as refused:
        await run(conn, tg)
    assert refused.value.reason == "SYNC_RUNNING"
    tg.hold.set()
    report = await first
    assert report.new == 2


async def test_a_sync_lock_held_by_another_process_refuses_the_sync(
    conn: db.Connection, tg: FakeTelegram, tmp_path: Path
) -> None:
    lock_file = tmp_path / "data" / LOCK_FILE
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(SyncRunning):
            await run(conn, tg)
    finally:
        os.close(fd)
    assert (await run(conn, tg)).stopped_by is None


# --- chats Telegram refuses, migrations, imports ---


async def test_a_refused_chat_is_marked_unavailable_and_retried_and_cleared_later(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    private = channel_with(tg, 2, channel_id=501)
    channel_with(tg, 3, channel_id=502)
    await add_source(conn, tg, ACCOUNT, "@chan501")
    await add_source(conn, tg, ACCOUNT, "@chan502")
    tg.forbid(private)
    report = await run(conn, tg)
    assert report.unavailable == [
        {"chat_id": -1000000000501, "title": "Channel 501", "reason": "ChannelPrivate"}
    ]
    assert report.chats_done == 1 and report.new == 3
    state = chat_state(conn, -1000000000501)
    assert (state["unavailable"], state["unavailable_reason"]) == (1, "ChannelPrivate")
    tg.allow(private)
    again = await run(conn, tg)
    assert again.unavailable == [] and again.new == 2
    assert chat_state(conn, -1000000000501)["unavailable"] == 0


async def test_a_legacy_group_upgraded_to_a_supergroup_is_followed(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    group = tg.add_group(77, "Neighbours")
    friend = tg.add_user(11, "Ana")
    tg.send(group, "old one", sender=friend)
    tg.send(group, "old two")
    await add_source(conn, tg, ACCOUNT, "-77")
    await run(conn, tg)
    supergroup = tg.migrate(group, 880)
    tg.send(supergroup, "new one", sender=friend)
    report = await run(conn, tg)
    new_id = -1000000000880
    assert chat_state(conn, -77)["migrated_to"] == new_id
    follow = chat_state(conn, new_id)
    assert (follow["type"], follow["source_id"]) == ("supergroup", "chat:-77")
    assert stored_ids(conn, new_id) == [1, 2]
    assert any("upgraded" in w for w in report.warnings)
    before = len(tg.requested("get_history"))
    await run(conn, tg)
    assert -77 not in tg.requested("get_history")[before:]
    assert new_id in tg.requested("get_history")[before:]


async def test_imported_chats_are_never_fetched_even_when_a_folder_lists_them(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    imported = channel_with(tg, 3, channel_id=600)
    live = channel_with(tg, 2, channel_id=601)
    tg.add_folder(1, "Expats", [imported, live])
    with db.transaction(conn):
        store.ensure_account(conn, ACCOUNT)
        store.ensure_source(conn, ACCOUNT, "import:old", "import", "old")
        store.upsert_chat(
            conn,
            ACCOUNT,
            ExportChat(-1000000000600, 600, "channel", "Channel 600", None, "public_channel"),
            source_id="import:old",
            is_import=True,
        )
    await add_source(conn, tg, ACCOUNT, "folder:Expats")
    report = await run(conn, tg)
    assert -1000000000600 not in tg.requested("get_history")
    assert report.new == 2 and stored_ids(conn, -1000000000600) == []
    assert chat_state(conn, -1000000000600)["source_id"] == "import:old"


async def test_refresh_only_never_runs_a_chats_first_sync(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 2, channel_id=701)
    await add_source(conn, tg, ACCOUNT, "@chan701")
    await run(conn, tg)
    channel_with(tg, 2, channel_id=702)
    await add_source(conn, tg, ACCOUNT, "@chan702")
    report = await run(conn, tg, refresh_only=True)
    assert -1000000000702 not in tg.requested("get_history")
    assert report.chats_done == 1 and report.chats_remaining == 1
    assert any("first sync" in w for w in report.warnings)


async def test_a_folder_source_picks_up_chats_added_to_the_folder(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    first = channel_with(tg, 1, channel_id=801)
    second = channel_with(tg, 1, channel_id=802)
    tg.add_folder(3, "News", [first])
    await add_source(conn, tg, ACCOUNT, "folder:News")
    await run(conn, tg)
    tg.add_folder(3, "News", [first, second])
    report = await run(conn, tg)
    assert report.new == 1
    assert chat_state(conn, -1000000000802)["source_id"] == "folder:News"


async def test_a_missing_folder_is_recorded_and_its_stored_chats_still_sync(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = channel_with(tg, 1, channel_id=803)
    tg.add_folder(4, "Gone soon", [channel])
    await add_source(conn, tg, ACCOUNT, "folder:Gone soon")
    tg.remove_folder(4)
    tg.send(channel, "still here")
    report = await run(conn, tg)
    assert report.new == 2
    error = conn.execute("SELECT resolve_error FROM sources").fetchone()[0]
    assert "Gone soon" in error


# --- comments and topics ---


def discussion(tg: FakeTelegram) -> tuple[Any, Any, Any]:
    channel = tg.add_channel(900, "Daily", username="daily")
    group = tg.add_channel(901, "Daily chat", megagroup=True, dialog=False)
    tg.link_discussion(channel, group)
    reader = tg.add_user(21, "Lea")
    return channel, group, reader


async def test_channel_comments_are_fetched_from_the_discussion_group_and_kept_apart(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel, group, reader = discussion(tg)
    post = tg.send(channel, "first post")
    tg.send(channel, "quiet post")
    first = tg.comment(channel, post.id, "nice", sender=reader)
    tg.comment(channel, post.id, "agreed", sender=reader, reply_to=first.id)
    await add_source(conn, tg, ACCOUNT, "@daily", comments=True)
    report = await run(conn, tg)
    group_id = -1000000000901
    assert report.new == 4
    assert chat_state(conn, -1000000000900)["linked_chat_id"] == group_id
    assert chat_state(conn, group_id)["source_id"] == "chat:@daily"
    comments = rows(
        conn,
        "SELECT msg_id, comment_channel_id, comment_post_id, reply_to_msg_id FROM messages"
        " WHERE chat_id = ? ORDER BY msg_id",
        group_id,
    )
    assert comments == [(2, -1000000000900, 1, 1), (3, -1000000000900, 1, 2)]
    assert group_id not in tg.requested("get_history")
    assert set(tg.requested("get_replies")) == {-1000000000900}
    tg.comment(channel, post.id, "late", sender=reader)
    later = await run(conn, tg)
    assert later.new == 1
    assert stored_ids(conn, group_id) == [2, 3, 4]


async def test_comments_are_not_taken_from_an_imported_discussion_group(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel, _, reader = discussion(tg)
    post = tg.send(channel, "post")
    tg.comment(channel, post.id, "hello", sender=reader)
    with db.transaction(conn):
        store.ensure_account(conn, ACCOUNT)
        store.ensure_source(conn, ACCOUNT, "import:chat", "import", "chat")
        store.upsert_chat(
            conn,
            ACCOUNT,
            ExportChat(-1000000000901, 901, "supergroup", "Daily chat", None, "x"),
            source_id="import:chat",
            is_import=True,
        )
    await add_source(conn, tg, ACCOUNT, "@daily", comments=True)
    report = await run(conn, tg)
    assert report.new == 1
    assert stored_ids(conn, -1000000000901) == []
    assert any("imported" in w for w in report.warnings)


async def test_forum_topics_are_kept_on_every_message(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    forum = tg.add_channel(950, "Makers", username="makers", forum=True)
    member = tg.add_user(31, "Ola")
    general = tg.send(forum, "hello all", sender=member)
    topic = tg.topic(forum, "Printers")
    root = tg.send(forum, "which filament?", sender=member, topic=topic)
    tg.send(forum, "PLA", topic=topic, reply_to=root.id)
    await add_source(conn, tg, ACCOUNT, "@makers")
    await run(conn, tg)
    topics = rows(conn, "SELECT msg_id, topic_id FROM messages ORDER BY msg_id")
    assert topics == [(general.id, 1), (topic, topic), (root.id, topic), (root.id + 1, topic)]
    assert chat_state(conn, -1000000000950)["type"] == "forum"


async def test_a_flood_wait_while_fetching_comments_commits_the_posts_before_it(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel, _, reader = discussion(tg)
    for n in range(3):
        post = tg.send(channel, f"post {n}")
        tg.comment(channel, post.id, f"comment {n}", sender=reader)
    await add_source(conn, tg, ACCOUNT, "@daily", comments=True)
    # The first thread takes two pages (the second, empty, ends it); the next one floods.
    tg.flood(900, at=3, method="get_replies")
    report = await run(conn, tg)
    assert report.stopped_by == "flood_wait"
    assert stored_ids(conn, -1000000000900) == [1]
    assert chat_state(conn, -1000000000900)["last_msg_id"] == 1
    await run(conn, tg)
    assert stored_ids(conn, -1000000000900) == [1, 2, 3]
    assert len(stored_ids(conn, -1000000000901)) == 3


async def test_an_unknown_error_is_not_mistaken_for_an_unavailable_chat(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 1)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    tg.inject(errors.RPCError(request=None, message="INTERNAL"), method="get_history")
    with pytest.raises(errors.RPCError):
        await run(conn, tg)
    outcome = conn.execute("SELECT outcome FROM sync_runs").fetchone()[0]
    assert outcome == "error"


async def test_private_chats_store_both_sides_with_their_senders(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    friend = tg.add_user(41, "Ines", username="ines")
    tg.send(friend, "hola", sender=friend)
    tg.send(friend, "hi back")
    await add_source(conn, tg, ACCOUNT, "@ines")
    await run(conn, tg)
    senders = rows(conn, "SELECT sender_id, sender_name FROM messages ORDER BY msg_id")
    assert senders == [(41, "Ines"), (1000, "Me")]


async def test_a_chat_the_session_cannot_find_is_marked_as_an_unknown_peer(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    tg.add_channel(990, "Left long ago", megagroup=True, dialog=False)
    with db.transaction(conn):
        store.ensure_account(conn, ACCOUNT)
        store.ensure_source(conn, ACCOUNT, "chat:-1000000000990", "chat", "-1000000000990")
        store.upsert_chat(
            conn,
            ACCOUNT,
            ExportChat(-1000000000990, 990, "supergroup", "Left long ago", None, "x"),
            source_id="chat:-1000000000990",
            is_import=False,
        )
    report = await run(conn, tg)
    assert [u["reason"] for u in report.unavailable] == ["UnknownPeer"]
    assert tg.requested("get_history") == []


async def test_a_discussion_group_a_folder_lists_is_synced_whole_and_owned_by_the_folder(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel, group, reader = discussion(tg)
    post = tg.send(channel, "post")
    tg.comment(channel, post.id, "hello", sender=reader)
    tg.send(group, "general talk", sender=reader)
    await add_source(conn, tg, ACCOUNT, "@daily", comments=True)
    await run(conn, tg)
    assert stored_ids(conn, -1000000000901) == [2]
    tg.allow(group)
    tg.add_folder(5, "Talk", [group])
    await add_source(conn, tg, ACCOUNT, "folder:Talk")
    await run(conn, tg)
    assert chat_state(conn, -1000000000901)["source_id"] == "folder:Talk"
    assert stored_ids(conn, -1000000000901) == [1, 2, 3]


# --- Telegram's paging, mid-iteration flood waits and refusals ---


def pages_of(tg: FakeTelegram, chat_id: int) -> list[tuple[int, int]]:
    """(lowest, highest) id of every non-empty history page served for ``chat_id``."""
    return [(min(ids), max(ids)) for marked, ids in tg.pages if marked == chat_id and ids]


async def test_a_long_history_comes_in_pages_of_at_most_100_oldest_first(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 250)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    report = await run(conn, tg)
    chat_id = -1000000000500
    assert report.new == 250
    assert pages_of(tg, chat_id) == [(1, 100), (101, 200), (201, 250)]
    assert stored_ids(conn, chat_id) == list(range(1, 251))


async def test_a_flood_wait_in_the_middle_of_a_batch_resumes_after_the_last_message_received(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 250)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    tg.flood(30, at=2, method="get_history")
    clock = Clock()
    report = await run(conn, tg, clock=clock)
    chat_id = -1000000000500
    assert clock.slept == [30.0] and report.stopped_by is None and report.new == 250
    # The page that flooded is asked again from message 101: nothing is fetched twice.
    assert pages_of(tg, chat_id) == [(1, 100), (101, 200), (201, 250)]
    assert stored_ids(conn, chat_id) == list(range(1, 251))
    assert rows(conn, "SELECT first_msg_id, last_msg_id FROM history_ranges") == [(1, 250)]


async def test_flood_waits_on_a_schedule_across_a_long_iteration_are_each_slept_through(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 450)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    tg.flood(5, at=2, every=2, times=0, method="get_history")
    clock = Clock()
    report = await run(conn, tg, clock=clock)
    chat_id = -1000000000500
    assert report.stopped_by is None and report.new == 450
    assert len(clock.slept) >= 3 and set(clock.slept) == {5.0}
    assert pages_of(tg, chat_id) == [(1, 100), (101, 200), (201, 300), (301, 400), (401, 450)]


async def test_a_premium_flood_wait_is_waited_out_like_any_flood_wait(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 150)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    tg.flood(12, at=2, method="get_history", premium=True)
    clock = Clock()
    report = await run(conn, tg, clock=clock)
    assert clock.slept == [12.0] and report.new == 150


async def test_a_mid_batch_flood_wait_too_long_commits_what_came_before_and_the_next_run_resumes(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 250)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    tg.flood(3600, at=3, method="get_history")
    report = await run(conn, tg)
    chat_id = -1000000000500
    assert report.stopped_by == "flood_wait" and report.flood_wait_s == 3600
    assert stored_ids(conn, chat_id) == list(range(1, 201))
    assert chat_state(conn, chat_id)["history_complete"] == 0
    warning = next(w for w in report.warnings if "3600" in w)
    assert f"account {ACCOUNT!r}" in warning and "'Channel 500'" in warning
    head = feed.head(conn)
    resumed = await run(conn, tg)
    assert resumed.new == 50 and resumed.stopped_by is None
    assert [e.entity for e in feed.read_after(conn, head, 1000)] == list(range(201, 251))
    assert stored_ids(conn, chat_id) == list(range(1, 251))
    assert rows(conn, "SELECT first_msg_id, last_msg_id FROM history_ranges") == [(1, 250)]


async def test_a_chat_made_private_mid_sync_keeps_its_pages_and_resumes_once_readable(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = channel_with(tg, 250)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    served = 0

    def go_private(method: str) -> None:
        nonlocal served
        if method == "get_history":
            served += 1
            if served == 3:
                tg.forbid(channel)

    tg.on_request = go_private
    report = await run(conn, tg)
    tg.on_request = None
    chat_id = -1000000000500
    assert [u["reason"] for u in report.unavailable] == ["ChannelPrivate"]
    assert any(f"account {ACCOUNT!r}" in w and "'Channel 500'" in w for w in report.warnings)
    assert stored_ids(conn, chat_id) == list(range(1, 201))
    tg.allow(channel)
    again = await run(conn, tg)
    assert again.new == 50 and again.unavailable == []
    assert stored_ids(conn, chat_id) == list(range(1, 251))


async def test_a_chat_that_needs_admin_rights_is_marked_unavailable_with_its_reason(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = channel_with(tg, 3)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    tg.forbid(channel, errors.ChatAdminRequiredError)
    report = await run(conn, tg)
    assert [u["reason"] for u in report.unavailable] == ["ChatAdminRequired"]
    assert any("admin rights" in w for w in report.warnings)


async def test_a_new_client_resolves_a_stored_chat_by_its_access_hash_not_by_its_cache(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 2)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    tg.restart()
    with pytest.raises(ValueError, match="Could not find the input entity"):
        await tg.get_input_entity(-1000000000500)
    report = await run(conn, tg)
    assert report.new == 2 and tg.requested("resolve_username") == [None]


async def test_the_reread_catches_edited_and_deleted_comments_of_its_newest_posts(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel, _, reader = discussion(tg)
    post = tg.send(channel, "post")
    kept = tg.comment(channel, post.id, "first", sender=reader)
    gone = tg.comment(channel, post.id, "second", sender=reader)
    await add_source(conn, tg, ACCOUNT, "@daily", comments=True)
    await run(conn, tg)
    group_id = -1000000000901
    assert stored_ids(conn, group_id) == [kept.id, gone.id]
    tg.edit(-1000000000901, kept.id, "first, corrected")
    tg.delete(-1000000000901, gone.id)
    report = await run(conn, tg)
    assert report.deleted == 1 and report.updated >= 1
    assert stored_ids(conn, group_id) == [kept.id]
    text = conn.execute(
        "SELECT text FROM messages WHERE chat_id = ? AND msg_id = ?", (group_id, kept.id)
    ).fetchone()[0]
    assert text == "first, corrected"


# --- takeout ---


async def test_a_takeout_sync_fetches_every_page_inside_one_finished_takeout_session(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 150)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    report = await run(conn, tg, takeout=True)
    assert report.takeout == "used" and report.new == 150
    assert tg.requested("get_history") == []
    assert len(tg.requested("takeout:get_history")) == 3
    assert tg.takeouts == [(1, True)] and tg.session.takeout_id is None


async def test_a_big_first_sync_without_the_flag_never_asks_for_a_takeout(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 1200)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    report = await run(conn, tg)
    assert report.new == 1200 and report.takeout != "used"
    assert tg.requested("init_takeout") == [] and tg.takeouts == []


async def test_a_takeout_the_user_has_not_allowed_falls_back_to_ordinary_requests(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 5)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    tg.takeout_delay = 86400
    report = await run(conn, tg, takeout=True)
    assert report.takeout == "declined" and report.new == 5 and report.stopped_by is None
    assert tg.takeouts == [] and tg.requested("takeout:get_history") == []
    assert any(f"account {ACCOUNT!r}" in w and "--takeout" in w for w in report.warnings)


async def test_a_flood_wait_inside_a_takeout_stops_the_run_and_still_finishes_the_session(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel_with(tg, 250)
    await add_source(conn, tg, ACCOUNT, "@chan500")
    tg.flood(3600, at=2, method="takeout:get_history")
    report = await run(conn, tg, takeout=True)
    assert report.stopped_by == "flood_wait" and stored_ids(conn, -1000000000500) == list(
        range(1, 101)
    )
    assert tg.takeouts == [(1, True)]
    resumed = await run(conn, tg, takeout=True)
    assert resumed.new == 150 and tg.takeouts[-1] == (2, True)


async def test_an_album_is_stored_as_its_photos_with_one_shared_group(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = channel_with(tg, 1)
    photos = tg.album(channel, 3, "the flat, three rooms")
    await add_source(conn, tg, ACCOUNT, "@chan500")
    await run(conn, tg)
    stored = rows(
        conn,
        "SELECT m.msg_id, m.grouped_id, md.kind FROM messages m JOIN media md ON md.mid = m.mid"
        " ORDER BY m.msg_id",
    )
    group = photos[0].grouped_id
    assert stored == [(p.id, group, "photo") for p in photos]
    assert rows(conn, "SELECT grouped_id FROM messages WHERE msg_id = 1") == [(None,)]
