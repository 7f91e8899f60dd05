"""A big chat re-cut page by page: the units of a whole cut, without loading the chat."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers_unitize import ACCOUNT, CHANNEL, DISCUSSION, GROUP, Stores, make_stores, msg

from chatseek_unitize import loader, paged, units
from chatseek_unitize.cutting import cut_chat
from chatseek_unitize.units import recut_chats


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    s = make_stores(tmp_path / "data")
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Chats above 20 messages are re-cut in pages of 16; returns the whole-chat loads made."""
    monkeypatch.setattr(units, "WHOLE_CUT_MAX", 20)
    monkeypatch.setattr(paged, "PAGE", 16)
    loads: list[object] = []
    load_chat = loader.load_chat

    def spy(*args: Any) -> Any:
        loads.append(args)
        return load_chat(*args)

    monkeypatch.setattr(loader, "load_chat", spy)
    return loads


def _album(first: int, count: int, minute: int, group: int, **kw: Any) -> list[Any]:
    return [
        replace(msg(first + n, minute, "", media="photo", **kw), grouped_id=group)
        for n in range(count)
    ]


def _forum_history(stores: Stores, rnd: random.Random, count: int = 260) -> None:
    """Three topics of chatter with pauses, replies (some to later or other-topic messages),
    reply albums, service messages and a few long texts, stored in shuffled batches."""
    topics = [None, 3, 9]
    minute, next_id, group = 0, 1, 100
    by_topic: dict[int | None, list[int]] = {t: [] for t in topics}
    out: list[Any] = []
    while next_id <= count:
        minute += rnd.choice([0, 1, 1, 2, 7, 45])
        topic = rnd.choice(topics)
        earlier = by_topic[topic][-30:]
        roll = rnd.random()
        reply = None
        if earlier and roll < 0.35:
            reply = rnd.choice(earlier)
        elif roll < 0.40:
            reply = next_id + rnd.randrange(1, 6)  # a later message: not a counted edge
        elif roll < 0.45 and by_topic[9]:
            reply = rnd.choice(by_topic[9])  # maybe another topic's message
        if rnd.random() < 0.12:
            size = rnd.randrange(2, 5)
            group += 1
            batch = _album(next_id, size, minute, group, topic=topic, reply_to=reply, sender=2)
        elif rnd.random() < 0.05:
            batch = [msg(next_id, minute, topic=topic, service=True)]
        else:
            text = f"m{next_id} " * rnd.choice([1, 1, 3, 40])
            sender = rnd.randrange(1, 5)
            batch = [msg(next_id, minute, text, sender=sender, topic=topic, reply_to=reply)]
        out.extend(batch)
        by_topic[topic].extend(m.msg_id for m in batch)
        next_id += len(batch)
    rnd.shuffle(out)
    for start in range(0, len(out), 37):
        stores.put(out[start : start + 37])


def _hashes(stores: Stores, chat_id: int) -> dict[str, str]:
    return {k: str(v["content_hash"]) for k, v in stores.units(chat_id).items()}


def _ids(stores: Stores, chat_id: int) -> dict[str, int]:
    return {k: int(v["unit_id"]) for k, v in stores.units(chat_id).items()}


def _whole_cut(stores: Stores, chat_id: int, kind: str, comments_from: int | None = None) -> Any:
    """What a whole cut of the chat's current messages gives: key -> content hash."""
    msgs = loader.load_chat(stores.unitize, ACCOUNT, chat_id)
    comments = (
        loader.comments_of(stores.unitize, ACCOUNT, comments_from, chat_id)
        if comments_from is not None
        else None
    )
    return {u.key: u.content_hash for u in cut_chat(msgs, chat_type=kind, comments=comments)}


def _members_match(stores: Stores, chat_id: int) -> None:
    for key, unit in stores.units(chat_id).items():
        rows = stores.unitize.execute(
            "SELECT msg_id FROM unit_members WHERE unit_id = ?", (unit["unit_id"],)
        ).fetchall()
        held = sorted(int(i) for i in str(unit["msg_ids"])[1:-1].split(", "))
        assert sorted(int(r[0]) for r in rows) == held, key


def test_a_big_forum_on_an_old_recipe_is_recut_in_pages_to_a_whole_cuts_units(
    stores: Stores, small_pages: list[object]
) -> None:
    stores.chat(GROUP, kind="forum")
    rnd = random.Random(5)
    _forum_history(stores, rnd)
    stores.drain(batch=50)
    stores.age()
    # Changes the recut sees before their events are applied: its old units are stale.
    stores.delete(GROUP, rnd.sample(range(1, 200), 12))
    stores.edit(GROUP, 201, text="edited " * 30)
    stores.put(
        [msg(5000, 3, "late arrival", reply_to=7), msg(5001, 4, "and its reply", reply_to=5000)]
    )
    before = _ids(stores, GROUP)
    head = stores.feed_head()

    report = recut_chats(stores.unitize)

    assert report.chats == 1 and small_pages == []
    after = _ids(stores, GROUP)
    assert _hashes(stores, GROUP) == _whole_cut(stores, GROUP, "forum")
    assert {k for k in after if k.startswith("t:")} and {k for k in after if k.startswith("w:")}
    _members_match(stores, GROUP)
    assert {k: after[k] for k in before.keys() & after.keys()} == {
        k: before[k] for k in before.keys() & after.keys()
    }
    events = stores.unit_events(head)
    assert {i for i, op in events if op == "delete"} == {
        before[k] for k in before.keys() - after.keys()
    }
    assert {i for i, op in events if op == "upsert"} == set(after.values())


def test_a_big_chat_recut_again_writes_and_announces_nothing(
    stores: Stores, small_pages: list[object]
) -> None:
    stores.chat(GROUP, kind="forum")
    _forum_history(stores, random.Random(9), count=120)
    stores.drain()
    recut_chats(stores.unitize, account=ACCOUNT, chat_ids=[GROUP])
    ids = _ids(stores, GROUP)
    head = stores.feed_head()

    report = recut_chats(stores.unitize, account=ACCOUNT, chat_ids=[GROUP])

    assert (report.upserted, report.deleted) == (0, 0)
    assert stores.unit_events(head) == []
    assert _ids(stores, GROUP) == ids
    assert small_pages == []


def test_paged_and_whole_recuts_agree_on_many_histories(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paged, "PAGE", 8)
    stores.chat(GROUP, kind="forum")
    rnd = random.Random(21)
    _forum_history(stores, rnd, count=180)
    stores.drain()
    for round_ in range(4):
        stores.delete(GROUP, rnd.sample(range(1, 180), 5))
        stores.age()
        monkeypatch.setattr(units, "WHOLE_CUT_MAX", 10 if round_ % 2 else 1_000_000)
        recut_chats(stores.unitize, account=ACCOUNT, chat_ids=[GROUP])
        assert _hashes(stores, GROUP) == _whole_cut(stores, GROUP, "forum")
        _members_match(stores, GROUP)


def test_a_big_channel_is_recut_in_pages_that_keep_albums_and_comments_whole(
    stores: Stores, small_pages: list[object]
) -> None:
    stores.channel("Rentals")
    posts: list[Any] = []
    next_id = 1
    for n in range(30):
        if n % 4 == 1:
            posts.extend(_album(next_id, 3, n, 700 + n, chat_id=CHANNEL))
            next_id += 3
        else:
            posts.append(msg(next_id, n, f"post {next_id}", chat_id=CHANNEL))
            next_id += 1
    stores.put(posts)
    comments = [msg(c, 40 + c, f"comment {c}", chat_id=DISCUSSION, sender=2) for c in range(1, 60)]
    stores.put(comments)
    for c in range(1, 60):
        stores.comment(DISCUSSION, c, CHANNEL, 1 + (c * 7) % (next_id - 1))
    stores.drain()
    stores.age()
    stores.delete(CHANNEL, [1, 2])  # a post and the first photo of an album
    before = _ids(stores, CHANNEL)

    recut_chats(stores.unitize)

    assert small_pages == []
    assert _hashes(stores, CHANNEL) == _whole_cut(stores, CHANNEL, "channel", DISCUSSION)
    after = _ids(stores, CHANNEL)
    assert "p:3" in after and not {"p:1", "p:2"} & after.keys()
    assert {k: after[k] for k in before.keys() & after.keys()} == {
        k: before[k] for k in before.keys() & after.keys()
    }
    assert str(stores.units(CHANNEL)["p:3"]["msg_ids"]).startswith("[3, 4, ")
