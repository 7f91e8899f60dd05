"""The units consumer: incremental re-cuts from the ingest feed, ids, events, cursor, recipes."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import sqlean
from helpers_unitize import (
    ACCOUNT,
    BASE,
    CHANNEL,
    DISCUSSION,
    GROUP,
    MINUTE,
    Stores,
    make_stores,
    msg,
)

from chatseek_core import db, feed
from chatseek_ingest import store as ingest_store
from chatseek_unitize import loader
from chatseek_unitize.cutting import ALBUM_INDENT, cut_chat
from chatseek_unitize.model import RECIPE_VERSION, content_hash
from chatseek_unitize.schema import MIGRATIONS, OWNER
from chatseek_unitize.units import (
    FEED_NAME,
    apply_ingest_feed,
    recut_chats,
    recut_pending,
)


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    """A group chat in a fresh ingest.db, and a unitize.db attached to it."""
    s = make_stores(tmp_path / "data")
    s.chat(GROUP)
    try:
        yield s
    finally:
        s.close()


def _expected(s: Stores, chat_id: int = GROUP, kind: str = "supergroup") -> dict[str, str]:
    """What a whole cut of the chat's current messages gives: key -> content hash."""
    msgs = loader.load_chat(s.unitize, ACCOUNT, chat_id)
    return {u.key: u.content_hash for u in cut_chat(msgs, chat_type=kind)}


def _hashes(s: Stores, chat_id: int = GROUP) -> dict[str, str]:
    return {k: str(v["content_hash"]) for k, v in s.units(chat_id).items()}


def _ids(s: Stores, chat_id: int = GROUP) -> dict[str, int]:
    return {k: int(v["unit_id"]) for k, v in s.units(chat_id).items()}


def _members(s: Stores, unit_id: int) -> list[tuple[int, int]]:
    return [
        (int(r[0]), int(r[1]))
        for r in s.unitize.execute(
            "SELECT chat_id, msg_id FROM unit_members WHERE unit_id = ? ORDER BY chat_id, msg_id",
            (unit_id,),
        )
    ]


def _history(s: Stores, count: int = 70) -> None:
    """Three windows of chatter (a pause every 30 minutes) with a reply thread."""
    s.put(
        msg(i, (i // 10) * 40 + i % 10, sender=i % 3 + 1, reply_to=2 if i in (5, 7) else None)
        for i in range(1, count + 1)
    )
    s.drain()


# --- first cut and appends ---


def test_a_new_chat_is_cut_whole_with_members_and_its_recipe(stores: Stores) -> None:
    _history(stores)
    units = stores.units()
    assert _hashes(stores) == _expected(stores)
    assert {v["kind"] for v in units.values()} == {"window", "thread"}
    thread = units["t:2:0"]
    assert _members(stores, int(thread["unit_id"])) == [(GROUP, 2), (GROUP, 5), (GROUP, 7)]
    recipe = stores.unitize.execute(
        "SELECT recipe FROM chat_recipes WHERE account = ? AND chat_id = ?", (ACCOUNT, GROUP)
    ).fetchone()
    assert int(recipe[0]) == RECIPE_VERSION
    assert feed.cursor(stores.unitize, FEED_NAME) == feed.head(stores.unitize, "ingest")


def test_a_new_chat_too_big_to_cut_whole_is_cut_batch_by_batch_to_the_same_units(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chatseek_unitize import loader, units

    monkeypatch.setattr(units, "WHOLE_CUT_MAX", 20)

    loaded_whole: list[object] = []
    load_chat = loader.load_chat

    def spy(*args: object) -> object:
        loaded_whole.append(args)
        return load_chat(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(loader, "load_chat", spy)
    stores.put(
        msg(i, (i // 10) * 40 + i % 10, sender=i % 3 + 1, reply_to=2 if i in (5, 7, 63) else None)
        for i in range(1, 71)
    )
    assert apply_ingest_feed(stores.unitize, batch=9) == 9
    # The first batch cut the windows of its own messages, not every later window of the chat.
    assert {k for k in stores.units() if k.startswith("w:")} <= {"w:1"}
    assert stores.drain(batch=9) == 61
    assert loaded_whole == []

    assert _hashes(stores) == _expected(stores)
    thread = stores.units()["t:2:0"]
    assert _members(stores, int(thread["unit_id"])) == [
        (GROUP, 2),
        (GROUP, 5),
        (GROUP, 7),
        (GROUP, 63),
    ]


def test_a_loaded_chat_shares_each_senders_name_between_its_messages(
    stores: Stores,
) -> None:
    _history(stores)
    msgs = loader.load_chat(stores.unitize, ACCOUNT, GROUP)
    by_sender: dict[int | None, list[Any]] = {}
    for m in msgs:
        by_sender.setdefault(m.sender_id, []).append(m)
    repeated = [ms for ms in by_sender.values() if len(ms) > 1 and ms[0].sender_name]
    assert repeated  # senders with several messages
    for ms in repeated:
        assert all(m.sender_name is ms[0].sender_name for m in ms)


def test_appending_a_message_rewrites_only_the_open_window(stores: Stores) -> None:
    _history(stores)
    ids = _ids(stores)
    head = stores.feed_head()
    last_window = max((k for k in ids if k.startswith("w:")), key=lambda k: int(k[2:]))

    stores.put([msg(71, 281, "and one more thing")])
    assert stores.drain() == 1

    assert _ids(stores) == ids
    assert stores.unit_events(head) == [(ids[last_window], "upsert")]
    assert _hashes(stores) == _expected(stores)


def test_a_message_after_a_pause_opens_a_new_window_and_touches_nothing_else(
    stores: Stores,
) -> None:
    _history(stores)
    ids = _ids(stores)
    head = stores.feed_head()

    stores.put([msg(71, 1000, "much later")])
    stores.drain()

    after = _ids(stores)
    assert {k: v for k, v in after.items() if k in ids} == ids
    assert set(after) - set(ids) == {"w:71"}
    assert stores.unit_events(head) == [(after["w:71"], "upsert")]


def test_an_out_of_order_message_recuts_from_the_window_before_it_and_keeps_later_ids(
    stores: Stores,
) -> None:
    _history(stores)
    ids = _ids(stores)
    head = stores.feed_head()

    stores.put([msg(500, 45, "late arrival from the second window")])
    stores.drain()

    assert _hashes(stores) == _expected(stores)
    after = _ids(stores)
    changed = {unit_id for unit_id, op in stores.unit_events(head)}
    assert changed == {after["w:10"]}
    assert {k: v for k, v in after.items() if k != "w:10"} == {
        k: v for k, v in ids.items() if k != "w:10"
    }


def test_a_reply_to_an_old_message_creates_its_thread_and_rewrites_its_window(
    stores: Stores,
) -> None:
    _history(stores)
    head = stores.feed_head()

    stores.put([msg(71, 281, "answering an old one", reply_to=13)])
    stores.drain()

    units = stores.units()
    assert units["t:13:0"]["msg_ids"] == "[13, 71]"
    assert _hashes(stores) == _expected(stores)
    touched = {unit_id for unit_id, _ in stores.unit_events(head)}
    assert touched == {int(units["t:13:0"]["unit_id"]), int(units["w:70"]["unit_id"])}


def test_reads_through_a_pool_equal_full_reads_and_take_the_pooled_messages(
    stores: Stores,
) -> None:
    # Two topics, replies within and across them, a photo with its caption and a reply to a
    # message that is in no page asked for.
    stores.put(
        msg(
            i,
            i,
            f"text {i}",
            topic=1 if i % 3 else 2,
            reply_to=i - 2 if i % 4 == 0 else None,
            media="photo" if i == 7 else None,
        )
        for i in range(1, 41)
    )
    conn = stores.unitize
    pool = loader.load_ids(conn, ACCOUNT, GROUP, range(5, 30, 2))
    returned: set[int] = set()
    for topic in (1, 2, None):
        for start in (None, (BASE + 6 * MINUTE, 6), (BASE + 6 * MINUTE, 7)):
            for limit in (1, 5, 100):
                plain = loader.load_topic_page(conn, ACCOUNT, GROUP, topic, start, limit)
                pooled = loader.load_topic_page(conn, ACCOUNT, GROUP, topic, start, limit, pool)
                assert pooled == plain
                assert all(m is pool[m.msg_id] for m in pooled if m.msg_id in pool)
                returned.update(m.msg_id for m in pooled)
    assert returned - set(pool) and returned & set(pool), "pages mixed pooled and read messages"
    parents = range(1, 41)
    plain_children = loader.children_of(conn, ACCOUNT, GROUP, parents)
    pooled_children = loader.children_of(conn, ACCOUNT, GROUP, parents, pool)
    assert sorted(pooled_children, key=lambda m: m.msg_id) == sorted(
        plain_children, key=lambda m: m.msg_id
    )
    assert {m.msg_id for m in pooled_children} == {i for i in range(1, 41) if i % 4 == 0}
    assert all(m is pool[m.msg_id] for m in pooled_children if m.msg_id in pool)


def test_ids_close_together_read_as_a_range_give_what_lookups_by_id_give(stores: Stores) -> None:
    # Ids 1..60 with gaps (never stored, or deleted), a photo among them and another chat whose
    # ids overlap: a range read must keep exactly the wanted ids of this chat.
    stores.put(
        msg(i, i, f"text {i}", media="photo" if i == 12 else None) for i in range(1, 61) if i % 7
    )
    stores.chat(DISCUSSION)
    stores.put([msg(i, i, f"elsewhere {i}", chat_id=DISCUSSION) for i in range(1, 61)])
    stores.delete(GROUP, [20, 21])
    conn = stores.unitize
    dense = [i for i in range(10, 40) if i not in (15, 25)]  # spans 30, wants 28: a range
    sparse = list(range(1, 61, 5))  # spans 56 ids, wants 12: looked up one by one
    for wanted in (dense, sparse, [5, 6], [30]):
        got = loader.load_ids(conn, ACCOUNT, GROUP, wanted)
        one_by_one = {
            i: m for i in wanted for m in loader.load_ids(conn, ACCOUNT, GROUP, [i]).values()
        }
        assert got == one_by_one
        assert set(got) == {i for i in wanted if i % 7 and i not in (20, 21)}
        assert all(m.text == f"text {m.msg_id}" for m in got.values())
    assert loader.load_ids(conn, ACCOUNT, GROUP, dense)[12].media_kind == "photo"


def test_whether_a_window_is_stored_from_a_point_holds_at_its_bounds(stores: Stores) -> None:
    from chatseek_unitize.units import _stored_from

    _history(stores)
    last = max(
        (int(r[0]), int(r[1]))
        for r in stores.unitize.execute(
            "SELECT start_date, first_msg_id FROM units WHERE kind = 'window' AND chat_id = ?",
            (GROUP,),
        )
    )
    date, first = last

    def stored_from(start: tuple[int, int]) -> bool:
        return _stored_from(stores.unitize, ACCOUNT, GROUP, None, start)

    assert stored_from((date, first))
    assert stored_from((date, first - 1))
    assert stored_from((date - 1, first + 100))
    assert not stored_from((date, first + 1))
    assert not stored_from((date + 1, 0))
    assert not _stored_from(stores.unitize, ACCOUNT, GROUP, 5, (0, 0))  # another topic


# --- edits, deletions, extracted text ---


def test_an_edit_in_a_closed_window_rewrites_that_window_and_its_thread_only(
    stores: Stores,
) -> None:
    _history(stores)
    ids = _ids(stores)
    head = stores.feed_head()

    stores.edit(GROUP, 5, text="edited words", edit_date=stores.messages[(GROUP, 5)].date + 60)
    stores.drain()

    assert _ids(stores) == ids
    assert sorted(stores.unit_events(head)) == sorted(
        [(ids["w:1"], "upsert"), (ids["t:2:0"], "upsert")]
    )
    assert "edited words" in str(stores.units()["w:1"]["text"])
    assert _hashes(stores) == _expected(stores)


def test_a_reaction_change_updates_the_unit_quietly(stores: Stores) -> None:
    _history(stores)
    head = stores.feed_head()

    stores.edit(GROUP, 3, reactions_total=4)
    stores.drain()

    assert stores.unit_events(head) == []
    assert stores.units()["w:1"]["reactions"] == 4


def test_deleting_every_message_of_a_window_deletes_it_and_announces_the_deletion(
    stores: Stores,
) -> None:
    _history(stores)
    ids = _ids(stores)
    head = stores.feed_head()

    stores.delete(GROUP, list(range(60, 71)))
    stores.drain()

    after = _ids(stores)
    assert "w:60" not in after
    assert (ids["w:60"], "delete") in stores.unit_events(head)
    assert not _members(stores, ids["w:60"])
    assert _hashes(stores) == _expected(stores)


def test_deleting_a_thread_root_removes_the_thread_and_rewrites_only_its_units(
    stores: Stores,
) -> None:
    _history(stores)
    ids = _ids(stores)
    head = stores.feed_head()

    stores.delete(GROUP, [2])
    stores.drain()

    assert "t:2:0" not in _ids(stores)
    assert sorted(stores.unit_events(head)) == sorted(
        [(ids["w:1"], "upsert"), (ids["t:2:0"], "delete")]
    )
    assert _hashes(stores) == _expected(stores)


def test_deleting_the_middle_of_a_reply_chain_splits_the_thread(stores: Stores) -> None:
    stores.put(
        [
            msg(1, 0, "root"),
            msg(2, 1, "a", reply_to=1),
            msg(3, 2, "b", reply_to=2),
            msg(4, 3, "c", reply_to=3),
            msg(5, 4, "d", reply_to=1),
        ]
    )
    stores.drain()
    assert stores.units()["t:1:0"]["msg_ids"] == "[1, 2, 3, 4, 5]"

    stores.delete(GROUP, [2])
    stores.drain()

    units = stores.units()
    assert units["t:1:0"]["msg_ids"] == "[1, 5]"
    assert units["t:3:0"]["msg_ids"] == "[3, 4]"
    assert _hashes(stores) == _expected(stores)


def test_extracted_media_text_rewrites_every_unit_holding_the_message(stores: Stores) -> None:
    stores.put(
        [
            msg(1, 0, "look at this", media="document", file_name="lease.pdf"),
            msg(2, 1, "what does it say?", reply_to=1),
            msg(3, 100, "later"),
        ]
    )
    stores.drain()
    ids = _ids(stores)
    head = stores.feed_head()

    stores.extracted(GROUP, 1, "Rent 900 EUR per month")
    stores.drain()

    units = stores.units()
    assert "Rent 900 EUR per month" in str(units["w:1"]["text"])
    assert "Rent 900 EUR per month" in str(units["t:1:0"]["text"])
    assert sorted(stores.unit_events(head)) == sorted(
        [(ids["w:1"], "upsert"), (ids["t:1:0"], "upsert")]
    )


def test_incremental_units_equal_a_whole_cut_after_a_mixed_history(stores: Stores) -> None:
    rnd = random.Random(7)
    minute = 0
    next_id = 1
    alive: list[int] = []
    for _ in range(12):
        batch = []
        for _ in range(rnd.randrange(1, 15)):
            minute += rnd.choice([0, 1, 2, 5, 45])
            reply = rnd.choice(alive[-20:]) if alive and rnd.random() < 0.3 else None
            batch.append(
                msg(next_id, minute, f"m{next_id}", sender=rnd.randrange(1, 4), reply_to=reply)
            )
            alive.append(next_id)
            next_id += 1
        if alive and rnd.random() < 0.5:
            past = rnd.randrange(0, minute + 1)
            batch.append(msg(next_id + 1000, past, "inserted late"))
        stores.put(batch)
        if len(alive) > 10 and rnd.random() < 0.5:
            victim = rnd.choice(alive[:-1])
            alive.remove(victim)
            stores.delete(GROUP, [victim])
        if len(alive) > 5 and rnd.random() < 0.5:
            target = rnd.choice(alive)
            stores.edit(GROUP, target, text=f"edited {target} " * rnd.randrange(1, 60))
        stores.drain(batch=rnd.choice([1, 3, 50]))
        assert _hashes(stores) == _expected(stores)
    for unit in stores.units().values():
        ids = [m for _, m in _members(stores, int(unit["unit_id"]))]
        assert sorted(ids) == sorted(int(i) for i in str(unit["msg_ids"])[1:-1].split(", "))


def test_replaying_the_feed_writes_nothing_and_announces_nothing(stores: Stores) -> None:
    _history(stores)
    after_first_cut = feed.cursor(stores.unitize, FEED_NAME)
    stores.put([msg(71, 281, "x"), msg(72, 282, "y", reply_to=71)])
    stores.edit(GROUP, 10, text="changed")
    stores.drain()
    ids = _ids(stores)
    head = stores.feed_head()

    with db.transaction(stores.unitize):
        feed.set_cursor(stores.unitize, FEED_NAME, after_first_cut)
    assert stores.drain() == 3

    assert _ids(stores) == ids
    assert stores.unit_events(head) == []


# --- cursor safety ---


def test_a_failed_batch_moves_neither_the_cursor_nor_any_unit(stores: Stores) -> None:
    _history(stores)
    cursor = feed.cursor(stores.unitize, FEED_NAME)
    before = _hashes(stores)
    head = stores.feed_head()
    stores.put([msg(71, 1000, "after a pause")])
    stores.unitize.execute(
        "CREATE TEMP TRIGGER fail_units BEFORE INSERT ON main.units"
        " BEGIN SELECT RAISE(ABORT, 'disk went away'); END"
    )

    with pytest.raises(sqlean.Error):
        apply_ingest_feed(stores.unitize, batch=100)

    assert feed.cursor(stores.unitize, FEED_NAME) == cursor
    assert _hashes(stores) == before
    assert stores.feed_head() == head
    stores.unitize.execute("DROP TRIGGER temp.fail_units")
    assert stores.drain() == 1
    assert _hashes(stores) == _expected(stores)


# --- topics, channels, chats ---


def test_forum_topics_are_cut_apart_and_a_change_in_one_leaves_the_other(stores: Stores) -> None:
    stores.chat(GROUP, kind="forum")
    stores.put([msg(i, i, topic=1 if i % 2 else 7) for i in range(1, 21)])
    stores.drain()
    ids = _ids(stores)
    head = stores.feed_head()
    rows = stores.unitize.execute(
        "SELECT DISTINCT topic_key FROM units WHERE chat_id = ?", (GROUP,)
    ).fetchall()
    assert {int(r[0]) for r in rows} == {1, 7}

    stores.put([msg(21, 21, topic=7)])
    stores.drain()

    assert stores.unit_events(head) == [(ids["w:2"], "upsert")]


def test_a_forum_topics_opening_message_does_not_load_the_topic_for_threads(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chatseek_unitize import units

    monkeypatch.setattr(units, "WHOLE_CUT_MAX", 10)  # cut batch by batch, as a big forum is
    asked: list[int] = []
    children_of = loader.children_of

    def spy(conn: Any, account: str, chat_id: int, parent_ids: Any, pool: Any = None) -> Any:
        asked.extend(parent_ids)
        return children_of(conn, account, chat_id, parent_ids, pool)

    monkeypatch.setattr(loader, "children_of", spy)
    stores.chat(GROUP, kind="forum")
    # Each topic opens with a service message, and every message in it replies to that one, as
    # Telegram's forums do; 4 answers 3 in topic 1, which is a thread.
    opening = [msg(1, 0, topic=1, service=True), msg(2, 0, topic=2, service=True)]
    talk = [
        msg(i, i, topic=1 if i % 2 else 2, reply_to=3 if i == 5 else 1 if i % 2 else 2)
        for i in range(3, 41)
    ]
    stores.put(opening + talk)
    stores.drain(batch=8)

    assert 1 not in asked and 2 not in asked
    assert _hashes(stores) == _expected(stores, kind="forum")
    assert stores.units()["t:3:0"]["msg_ids"] == "[3, 5]"


def test_channel_posts_gather_their_discussion_comments(stores: Stores) -> None:
    stores.channel("News")
    stores.put([msg(10, 0, "post one", chat_id=CHANNEL), msg(11, 60, "post two", chat_id=CHANNEL)])
    stores.put([msg(1, 5, "first comment", chat_id=DISCUSSION, sender=2)])
    stores.comment(DISCUSSION, 1, CHANNEL, 10)
    stores.drain()
    posts = stores.units(CHANNEL)
    assert posts["p:10"]["msg_ids"] == "[10, 1]"
    assert _members(stores, int(posts["p:10"]["unit_id"])) == [(DISCUSSION, 1), (CHANNEL, 10)]
    ids = _ids(stores, CHANNEL)
    head = stores.feed_head()

    stores.put([msg(2, 6, "second comment", chat_id=DISCUSSION, sender=3)])
    stores.comment(DISCUSSION, 2, CHANNEL, 10)
    stores.drain()
    assert stores.units(CHANNEL)["p:10"]["msg_ids"] == "[10, 1, 2]"
    assert (ids["p:10"], "upsert") in stores.unit_events(head)
    assert (ids["p:11"], "upsert") not in stores.unit_events(head)

    stores.edit(DISCUSSION, 1, text="first comment, edited")
    stores.drain()
    assert "edited" in str(stores.units(CHANNEL)["p:10"]["text"])
    assert _ids(stores, CHANNEL) == ids


def test_a_comment_re_cuts_its_post_and_no_post_whose_id_it_prefixes(stores: Stores) -> None:
    stores.channel("News")
    stores.put([msg(1, 0, "post one", chat_id=CHANNEL), msg(10, 60, "post ten", chat_id=CHANNEL)])
    stores.drain()
    ids = _ids(stores, CHANNEL)
    head = stores.feed_head()

    stores.put([msg(1, 5, "a comment on post one", chat_id=DISCUSSION, sender=2)])
    stores.comment(DISCUSSION, 1, CHANNEL, 1)
    stores.drain()

    posts = stores.units(CHANNEL)
    assert posts["p:1"]["msg_ids"] == "[1, 1]"
    assert _ids(stores, CHANNEL) == ids
    assert [event for event in stores.unit_events(head) if event[0] == ids["p:10"]] == []


def test_a_deleted_chat_loses_every_unit(stores: Stores) -> None:
    _history(stores)
    with db.transaction(stores.ingest):
        ingest_store.delete_chat(stores.ingest, ACCOUNT, GROUP)
    stores.drain()
    assert stores.units() == {}


# --- recipes ---


def test_a_recipe_change_recuts_chat_by_chat_keeping_ids(stores: Stores) -> None:
    _history(stores)
    stores.chat(GROUP + 1, title="Second")
    stores.put([msg(1, 0, "hello", chat_id=GROUP + 1)])
    stores.drain()
    ids = _ids(stores)
    stores.age()
    assert set(recut_pending(stores.unitize)) == {(ACCOUNT, GROUP), (ACCOUNT, GROUP + 1)}
    head = stores.feed_head()
    seen: list[tuple[int, int, str]] = []

    report = recut_chats(stores.unitize, on_progress=seen.append)

    assert report.chats == 2 and report.pending_left == 0
    assert [done for done, _, _ in seen] == [1, 2]
    assert _ids(stores) == ids
    assert _hashes(stores) == _expected(stores)
    assert {op for _, op in stores.unit_events(head)} == {"upsert"}
    assert len(stores.unit_events(head)) == len(ids) + 1
    assert recut_pending(stores.unitize) == []


# --- albums ---


def _album(first: int, count: int, minute: int, chat_id: int, group: int) -> list[Any]:
    return [
        replace(
            msg(
                first + n,
                minute,
                "three photos of the flat" if n == 0 else "",
                chat_id=chat_id,
                media="photo",
            ),
            grouped_id=group,
        )
        for n in range(count)
    ]


def test_an_albums_posts_are_one_post_unit_with_every_photos_text_and_comments(
    stores: Stores,
) -> None:
    stores.channel("Rentals")
    stores.put([msg(9, 0, "plain post", chat_id=CHANNEL), *_album(10, 3, 1, CHANNEL, 777)])
    for n, text in enumerate(("kitchen with oven", "bedroom view", "bathroom tiles")):
        stores.extracted(CHANNEL, 10 + n, text)
    stores.put([msg(1, 5, "is it still free?", chat_id=DISCUSSION, sender=2)])
    stores.comment(DISCUSSION, 1, CHANNEL, 10)
    stores.drain()
    posts = stores.units(CHANNEL)
    assert sorted(posts) == ["p:10", "p:9"]
    album = posts["p:10"]
    assert album["msg_ids"] == "[10, 11, 12, 1]"
    lines = str(album["text"]).splitlines()
    assert lines[0].split(": ", 1)[1] == "[photo] kitchen with oven three photos of the flat"
    assert lines[1:3] == [
        ALBUM_INDENT + "[photo] bedroom view",
        ALBUM_INDENT + "[photo] bathroom tiles",
    ]
    assert lines[3].endswith("is it still free?")


def test_editing_or_deleting_one_photo_of_an_album_recuts_the_whole_album_unit(
    stores: Stores,
) -> None:
    stores.chat(CHANNEL, kind="channel", title="Rentals")
    stores.put(_album(10, 3, 1, CHANNEL, 777))
    stores.drain()
    stores.extracted(CHANNEL, 12, "bathroom tiles")
    stores.drain()
    assert sorted(stores.units(CHANNEL)) == ["p:10"]
    assert "bathroom tiles" in str(stores.units(CHANNEL)["p:10"]["text"])
    stores.delete(CHANNEL, [10])
    stores.drain()
    assert sorted(stores.units(CHANNEL)) == ["p:11"]
    assert stores.units(CHANNEL)["p:11"]["msg_ids"] == "[11, 12]"
    assert _hashes(stores, CHANNEL) == _expected(stores, CHANNEL, "channel")


def test_a_window_never_closes_inside_an_album(stores: Stores) -> None:
    plain = [msg(n, n) for n in range(1, 30)]
    stores.put([*plain, *_album(30, 4, 30, GROUP, 555), msg(34, 31, "after the album")])
    stores.drain()
    windows = {k: v for k, v in stores.units().items() if k.startswith("w:")}
    holding = [v["msg_ids"] for v in windows.values() if "30," in str(v["msg_ids"])]
    assert len(holding) == 1 and all(f"{n}" in str(holding[0]) for n in (30, 31, 32, 33))
    assert _hashes(stores) == _expected(stores)


def _reply_album(first: int, count: int, minute: int, group: int, reply_to: int | None) -> Any:
    return [
        replace(
            msg(first + n, minute, "", media="photo", sender=2, reply_to=reply_to),
            grouped_id=group,
        )
        for n in range(count)
    ]


def test_an_album_in_a_reply_thread_is_one_line_group_and_any_photos_edit_recuts_it(
    stores: Stores,
) -> None:
    stores.put([msg(1, 0, "who has photos of the flat?")])
    stores.put(_reply_album(2, 3, 1, 888, reply_to=1))
    stores.put([msg(5, 2, "is that the balcony?", sender=3, reply_to=4)])
    stores.drain()
    threads = {k: v for k, v in stores.units().items() if k.startswith("t:")}
    assert sorted(threads) == ["t:1:0"]
    assert threads["t:1:0"]["msg_ids"] == "[1, 2, 3, 4, 5]"
    head = stores.feed_head()

    stores.extracted(GROUP, 4, "sunny balcony with plants")
    stores.drain()
    lines = str(stores.units()["t:1:0"]["text"]).splitlines()
    assert lines[1].endswith("User2: [photo]")
    assert lines[2:4] == [
        ALBUM_INDENT + "[photo]",
        ALBUM_INDENT + "[photo] sunny balcony with plants",
    ]
    thread_id = int(stores.units()["t:1:0"]["unit_id"])
    assert (thread_id, "upsert") in stores.unit_events(head)
    assert _hashes(stores) == _expected(stores)

    head = stores.feed_head()
    stores.edit(GROUP, 3, text="the living room")
    stores.drain()
    assert ALBUM_INDENT + "[photo] the living room" in str(stores.units()["t:1:0"]["text"])
    assert (thread_id, "upsert") in stores.unit_events(head)
    assert _hashes(stores) == _expected(stores)


def test_a_reply_to_a_later_photo_joins_the_thread_of_the_whole_album(stores: Stores) -> None:
    stores.put(_reply_album(10, 4, 0, 999, reply_to=None))
    stores.drain()
    stores.put([msg(20, 1, "the third one is great", reply_to=12)])
    stores.drain()
    threads = {k: v["msg_ids"] for k, v in stores.units().items() if k.startswith("t:")}
    assert threads == {"t:10:0": "[10, 11, 12, 13, 20]"}
    assert _hashes(stores) == _expected(stores)

    stores.delete(GROUP, [10])
    stores.drain()
    threads = {k: v["msg_ids"] for k, v in stores.units().items() if k.startswith("t:")}
    assert threads == {"t:11:0": "[11, 12, 13, 20]"}
    assert _hashes(stores) == _expected(stores)


def test_incremental_threads_with_albums_equal_a_whole_cut(stores: Stores) -> None:
    rnd = random.Random(11)
    minute, next_id, group = 0, 1, 5000
    alive: list[int] = []
    photos: list[int] = []
    for _ in range(14):
        batch: list[Any] = []
        for _ in range(rnd.randrange(1, 8)):
            minute += rnd.choice([0, 1, 2, 45])
            reply = rnd.choice(alive[-15:]) if alive and rnd.random() < 0.4 else None
            if rnd.random() < 0.35:
                count = rnd.randrange(2, 5)
                group += 1
                batch.extend(_reply_album(next_id, count, minute, group, reply))
                ids = list(range(next_id, next_id + count))
                photos.extend(ids)
            else:
                batch.append(msg(next_id, minute, f"m{next_id}", reply_to=reply))
                ids = [next_id]
            alive.extend(ids)
            next_id += len(ids)
        stores.put(batch)
        if len(alive) > 8 and rnd.random() < 0.5:
            victim = rnd.choice(alive[:-1])
            alive.remove(victim)
            if victim in photos:
                photos.remove(victim)
            stores.delete(GROUP, [victim])
        if photos and rnd.random() < 0.6:
            stores.extracted(GROUP, rnd.choice(photos), f"read out {rnd.randrange(1000)}")
        stores.drain(batch=rnd.choice([1, 3, 50]))
        assert _hashes(stores) == _expected(stores)
    assert any(k.startswith("t:") for k in stores.units())


def _stale_then_migrated(stores: Stores, unit_id: int, text: str, *, since: int) -> None:
    """Give a unit the ``text`` an older cut gave it and run migrations ``since`` on again."""
    with db.transaction(stores.unitize):
        stores.unitize.execute(
            "UPDATE units SET text = ?, content_hash = ? WHERE unit_id = ?",
            (text, content_hash(RECIPE_VERSION, text), unit_id),
        )
        # Migrations run in order from the last one applied: take back ``since`` and later.
        stores.unitize.execute(
            "DELETE FROM _migrations WHERE owner = ? AND number >= ?", (OWNER, since)
        )
    db.migrate(stores.unitize, OWNER, MIGRATIONS)


def test_the_album_migration_recuts_every_chat_rewriting_only_units_that_hold_albums(
    stores: Stores,
) -> None:
    _history(stores, 20)
    stores.put([msg(30, 300, "photos?"), *_reply_album(31, 2, 301, 888, reply_to=30)])
    stores.drain()
    album_thread = int(stores.units()["t:30:0"]["unit_id"])
    # What the thread looked like when albums were not kept together yet.
    _stale_then_migrated(stores, album_thread, "cut apart", since=3)
    assert recut_pending(stores.unitize) == [(ACCOUNT, GROUP)]
    head = stores.feed_head()

    recut_chats(stores.unitize)

    assert stores.unit_events(head) == [(album_thread, "upsert")]
    assert _hashes(stores) == _expected(stores)
    assert recut_pending(stores.unitize) == []


def test_the_comment_id_migration_recuts_channels_rewriting_only_wrong_post_units(
    stores: Stores,
) -> None:
    stores.channel("News")
    stores.put([msg(1, 0, "post one", chat_id=CHANNEL), msg(2, 60, "post two", chat_id=CHANNEL)])
    stores.put([msg(2, 5, "a comment numbered like post two", chat_id=DISCUSSION, sender=2)])
    stores.comment(DISCUSSION, 2, CHANNEL, 1)
    stores.drain()
    _history(stores, 10)
    post_two = int(stores.units(CHANNEL)["p:2"]["unit_id"])
    # What the post looked like when the comment's line stood in for it.
    _stale_then_migrated(stores, post_two, "the comment", since=4)
    assert recut_pending(stores.unitize) == [(ACCOUNT, CHANNEL)]
    head = stores.feed_head()

    recut_chats(stores.unitize)

    assert stores.unit_events(head) == [(post_two, "upsert")]
    assert str(stores.units(CHANNEL)["p:2"]["text"]).endswith("post two")
    assert recut_pending(stores.unitize) == []
