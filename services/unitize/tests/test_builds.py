"""Conversation builds: links, conversations and chunks published atomically, crash-safe."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import sqlean
from helpers_unitize import ACCOUNT, GROUP, Stores, make_stores, msg

from chatseek_core import db
from chatseek_core.errors import ChatNotFound, IndexNotReady
from chatseek_unitize import builds, linkstream, loader, readers, spill
from chatseek_unitize.batches import answer_batch, batch_status, valid_answers
from chatseek_unitize.builds import build_chat, build_chats, discard_unfinished
from chatseek_unitize.linking import LearnedScorer, RuleScorer
from chatseek_unitize.linkstream import NO_ID, REASONS, link_chat
from chatseek_unitize.model import Msg
from chatseek_unitize.spill import Spill

KILL_WAIT_S = 120.0


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    """A group chat with two interleaved discussions and a reply, already cut into units."""
    s = make_stores(tmp_path / "data")
    s.chat(GROUP)
    s.put(
        [
            msg(1, 0, "who knows a good dentist downtown?", sender=1),
            msg(2, 1, "User1: try the clinic on Main street", sender=2, reply_to=1),
            msg(3, 2, "anyone selling a bike?", sender=3),
            msg(4, 3, "User3 I have one, 150 EUR", sender=4),
            msg(5, 4, "thanks, booked it", sender=1, reply_to=2),
            msg(6, 5, "User4: can I see it tomorrow?", sender=3),
            msg(7, 6, "", sender=2, service=True),
            msg(8, 300, "new topic: the tram strike on monday", sender=5),
        ]
    )
    s.drain()
    try:
        yield s
    finally:
        s.close()


def _chunks(s: Stores) -> dict[int, tuple[int | None, str]]:
    return {
        int(r[0]): (None if r[1] is None else int(r[1]), str(r[2]))
        for r in s.unitize.execute(
            "SELECT unit_id, build_id, content_hash FROM units WHERE kind = 'conversation'"
        )
    }


def _chunk_rows(s: Stores) -> dict[int, tuple[object, ...]]:
    """Every stored column of each chunk but its build."""
    return {
        int(r[0]): tuple(r[1:])
        for r in s.unitize.execute(
            "SELECT unit_id, key, first_msg_id, last_msg_id, start_date, end_date, msg_ids,"
            " senders, reactions, text, content_hash, recipe FROM units"
            " WHERE kind = 'conversation'"
        )
    }


def _state(s: Stores, build_id: int) -> str:
    row = s.unitize.execute(
        "SELECT state FROM conversation_builds WHERE build_id = ?", (build_id,)
    ).fetchone()
    return str(row[0])


def test_a_build_publishes_links_conversations_and_chunks(stores: Stores) -> None:
    head = stores.feed_head()
    stages: list[str] = []

    report = build_chat(
        stores.unitize, ACCOUNT, GROUP, RuleScorer(), on_progress=lambda p: stages.append(p[0])
    )

    assert _state(stores, report.build_id) == "complete"
    assert report.previous_build_id is None
    assert report.messages == 7
    assert report.reasons["reply"] == 2
    assert stages[0] == "load" and stages[-1] == "publish"
    links = readers.chat_links(stores.unitize, ACCOUNT, GROUP)
    assert links[2] == 1 and links[5] == 2
    assert links[7] is None
    listed = readers.list_conversations(stores.unitize, ACCOUNT, GROUP)
    assert listed["build_id"] == report.build_id
    assert sum(c["message_count"] for c in listed["conversations"]) == 7
    assert "change" in listed["note"]
    chunks = _chunks(stores)
    assert chunks and {b for b, _ in chunks.values()} == {report.build_id}
    assert report.chunks == len(chunks) == report.chunks_new
    assert sorted(stores.unit_events(head)) == sorted((u, "upsert") for u in chunks)


@pytest.mark.parametrize("spilled", [False, True])
def test_a_learned_build_writes_the_links_and_conversations_the_streamed_reference_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spilled: bool
) -> None:
    # Two forum topics interleaved in time: a build links them one after the other, so its
    # conversations are numbered again by their first message when it ends.
    s = make_stores(tmp_path / "data")
    try:
        s.chat(GROUP)
        words = ["bike", "dentist", "tram", "strike", "rent", "flat", "visa", "bank"]
        s.put(
            [
                msg(
                    k,
                    k * (2 if k % 7 else 40),
                    f"{words[k % 8]} {words[(k * 3) % 8]} question {k}?"
                    if k % 5 == 0
                    else f"User{1 + (k % 4)}: {words[k % 8]} again",
                    sender=1 + (k * 7) % 5,
                    topic=(None, 10, 20)[(k // 3) % 3],
                    reply_to=k - 4 if k % 11 == 0 else None,
                )
                for k in range(1, 121)
            ]
        )
        s.drain()
        conn = s.unitize
        answers = valid_answers(conn, ACCOUNT, GROUP).valid
        reference = link_chat(
            loader.iter_chat(conn, ACCOUNT, GROUP),
            senders=loader.senders(conn, ACCOUNT, GROUP),
            agent_answers=answers,
            scorer=LearnedScorer(),
        )
        number, count = reference.conversations()
        if spilled:  # every column of the build in a file beside the store
            monkeypatch.setattr(spill, "SPILL_BYTES", 8)
            monkeypatch.setattr(linkstream, "RELEASE_EVERY", 5)
            monkeypatch.setattr(linkstream, "_FLUSH_MESSAGES", 3)
            made = builds.spill_beside

            def counted(conn: sqlean.Connection) -> Spill:
                out = made(conn)
                spills.append(out)
                return out

            spills: list[Spill] = []
            monkeypatch.setattr(builds, "spill_beside", counted)
        before = sorted(os.listdir(tmp_path / "data"))

        report = build_chat(conn, ACCOUNT, GROUP, LearnedScorer(), write_batch=7)

        if spilled:
            assert spills[0].directory == tmp_path / "data"
            assert spills[0].files >= 20
        assert sorted(os.listdir(tmp_path / "data")) == before  # no file left behind

        assert (report.messages, report.conversations) == (len(reference), count)
        rows = {
            int(r[0]): tuple(r[1:])
            for r in conn.execute(
                "SELECT msg_id, parent_id, conversation_id, reason, confidence, rejected"
                " FROM links WHERE build_id = ?",
                (report.build_id,),
            )
        }
        expected = {}
        spans: dict[int, list[tuple[int, int]]] = {}
        for k in range(len(reference)):
            parent = reference.parent_id[k]
            runners = reference.runners_up(k)
            expected[reference.msg_id[k]] = (
                None if parent == NO_ID else parent,
                int(number[k]),
                REASONS[reference.reason[k]],
                reference.confidence(k),
                json.dumps([list(r) for r in runners]) if runners else None,
            )
            spans.setdefault(int(number[k]), []).append((reference.date[k], reference.msg_id[k]))
        assert rows == expected
        assert len({(None, 10, 20)[(k // 3) % 3] for k in rows}) == 3
        conversations = {
            int(r[0]): tuple(r[1:])
            for r in conn.execute(
                "SELECT conversation_id, first_msg_id, last_msg_id, start_date, end_date,"
                " message_count FROM conversations WHERE build_id = ?",
                (report.build_id,),
            )
        }
        assert conversations == {
            c: (span[0][1], span[-1][1], span[0][0], span[-1][0], len(span))
            for c, span in spans.items()
        }
        firsts = [conversations[c][2:0:-1] for c in sorted(conversations)]
        assert firsts == sorted(firsts)
    finally:
        s.close()


def test_show_and_message_links_read_the_current_build(stores: Stores) -> None:
    build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())
    chain = readers.message_links(stores.unitize, ACCOUNT, GROUP, 5)
    assert [(c["msg_id"], c["parent_id"], c["reason"]) for c in chain["chain"]] == [
        (5, 2, "reply"),
        (2, 1, "reply"),
        (1, None, chain["chain"][-1]["reason"]),
    ]
    shown = readers.show_conversation(stores.unitize, ACCOUNT, GROUP, chain["conversation_id"])
    ids = [m["msg_id"] for m in shown["messages"]]
    assert ids == [1, 2, 5]
    first = shown["messages"][0]
    assert first["locator"] == f"tg:{ACCOUNT}/{GROUP}/1"
    assert first["date"] == "2026-01-01T00:00:00Z"
    assert first["sender"] == "User1"


def test_a_rebuild_reuses_unchanged_chunks_and_retires_the_previous_build(
    stores: Stores,
) -> None:
    first = build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())
    chunks = _chunks(stores)
    rows = _chunk_rows(stores)
    head = stores.feed_head()

    second = build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())

    assert second.previous_build_id == first.build_id
    assert _state(stores, first.build_id) == "superseded"
    assert second.chunks_reused == len(chunks) and second.chunks_new == 0
    assert {u: h for u, (_, h) in _chunks(stores).items()} == {u: h for u, (_, h) in chunks.items()}
    assert {b for b, _ in _chunks(stores).values()} == {second.build_id}
    # Moved without their texts in hand, the chunks keep every column, the text included.
    assert _chunk_rows(stores) == rows
    assert all(row[8] for row in rows.values())
    assert stores.unit_events(head) == []
    old_links = stores.unitize.execute(
        "SELECT COUNT(*) FROM links WHERE build_id = ?", (first.build_id,)
    ).fetchone()
    assert int(old_links[0]) == 0


def test_a_rebuild_after_an_edit_replaces_only_the_chunks_that_changed(stores: Stores) -> None:
    build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())
    before = _chunks(stores)
    stores.edit(GROUP, 8, text="new topic: the tram strike moved to tuesday")
    stores.drain()
    head = stores.feed_head()

    report = build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())

    after = _chunks(stores)
    assert report.chunks_new == 1 and report.chunks_dropped == 1
    assert len(set(after) & set(before)) == len(before) - 1
    events = stores.unit_events(head)
    assert sorted(op for _, op in events) == ["delete", "upsert"]


def test_a_rebuild_keeps_a_chunk_whose_reactions_changed_with_its_new_count(
    stores: Stores,
) -> None:
    build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())
    before = _chunk_rows(stores)
    stores.edit(GROUP, 4, reactions_total=3)
    stores.drain()
    head = stores.feed_head()

    report = build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())

    after = _chunk_rows(stores)
    assert report.chunks_reused == len(before) and report.chunks_new == 0
    assert set(after) == set(before)
    moved = [u for u in after if after[u] != before[u]]
    assert len(moved) == 1
    reactions = 7  # the column's place in ``_chunk_rows``
    row, was = after[moved[0]], before[moved[0]]
    assert row[reactions] == was[reactions] + 3
    assert row[:reactions] + row[reactions + 1 :] == was[:reactions] + was[reactions + 1 :]
    assert {b for b, _ in _chunks(stores).values()} == {report.build_id}
    assert stores.unit_events(head) == []


def _many_conversations(s: Stores) -> None:
    """Twelve conversations a day apart, each a question and its answer."""
    day = 24 * 60
    s.chat(GROUP)
    s.put(
        m
        for k in range(12)
        for m in (
            msg(2 * k + 1, k * day, f"question {k}: where is the {k}th office?", sender=1),
            msg(2 * k + 2, k * day + 1, f"answer {k}: on floor {k}", sender=2, reply_to=2 * k + 1),
        )
    )
    s.drain()


def _chunk_columns(s: Stores) -> dict[str, tuple[object, ...]]:
    """Each chunk's stored columns by key, its ids aside."""
    return {str(row[0]): row[1:] for row in _chunk_rows(s).values()}


def test_a_rebuild_by_small_pages_publishes_what_a_first_build_of_the_same_messages_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rebuilt, fresh = make_stores(tmp_path / "rebuilt"), make_stores(tmp_path / "fresh")
    try:
        _many_conversations(rebuilt)
        first = build_chat(rebuilt.unitize, ACCOUNT, GROUP, RuleScorer())
        ids = {str(row[0]): u for u, row in _chunk_rows(rebuilt).items()}
        for k in (2, 5, 9):
            rebuilt.edit(GROUP, 2 * k + 2, text=f"answer {k}: moved to floor {k + 1}")
        for k in (3, 7):
            rebuilt.edit(GROUP, 2 * k + 1, reactions_total=k)
        rebuilt.drain()
        head = rebuilt.feed_head()
        # Pages of two: the lookups of the previous build, the kept chunks' moves, the
        # dropped chunks' deletions and the announcements each take several.
        monkeypatch.setattr(builds, "WRITE_BATCH", 2)

        report = build_chat(rebuilt.unitize, ACCOUNT, GROUP, RuleScorer())

        monkeypatch.undo()
        _many_conversations(fresh)
        for k in (2, 5, 9):
            fresh.edit(GROUP, 2 * k + 2, text=f"answer {k}: moved to floor {k + 1}")
        for k in (3, 7):
            fresh.edit(GROUP, 2 * k + 1, reactions_total=k)
        fresh.drain()
        build_chat(fresh.unitize, ACCOUNT, GROUP, RuleScorer())
        assert _chunk_columns(rebuilt) == _chunk_columns(fresh)
        assert (report.chunks, report.chunks_new, report.chunks_dropped) == (first.chunks, 3, 3)
        assert report.chunks_reused == first.chunks - 3
        kept = {str(row[0]): u for u, row in _chunk_rows(rebuilt).items()}
        assert sum(1 for key, u in kept.items() if ids.get(key) == u) == first.chunks - 3
        events = rebuilt.unit_events(head)
        assert sorted(op for _, op in events) == ["delete"] * 3 + ["upsert"] * 3
        assert {u for u, op in events if op == "upsert"} == set(kept.values()) - set(ids.values())
        assert {b for b, _ in _chunks(rebuilt).values()} == {report.build_id}
        assert _state(rebuilt, first.build_id) == "superseded"
    finally:
        rebuilt.close()
        fresh.close()


def _chunk_texts(s: Stores) -> list[str]:
    rows = s.unitize.execute("SELECT text FROM units WHERE kind = 'conversation' ORDER BY text")
    return [str(r[0]) for r in rows]


def _orphan_members(s: Stores) -> int:
    row = s.unitize.execute(
        "SELECT COUNT(*) FROM unit_members um WHERE NOT EXISTS (SELECT 1 FROM ingest.messages m"
        " WHERE m.account = um.account AND m.chat_id = um.chat_id AND m.msg_id = um.msg_id)"
    ).fetchone()
    return int(row[0])


def test_a_deleted_message_leaves_the_current_builds_chunks_at_once(stores: Stores) -> None:
    build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())
    assert any("150 EUR" in text for text in _chunk_texts(stores))
    head = stores.feed_head()

    stores.delete(GROUP, [4, 8])
    stores.drain()

    texts = _chunk_texts(stores)
    assert not any("150 EUR" in t or "tram strike" in t for t in texts)
    assert any("anyone selling a bike?" in t for t in texts)
    assert _orphan_members(stores) == 0
    ops = sorted(op for _, op in stores.unit_events(head))
    assert "delete" in ops and "upsert" in ops
    report = build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())
    assert report.messages == 5 and _orphan_members(stores) == 0


def test_a_deletion_during_a_running_build_is_left_to_that_build(stores: Stores) -> None:
    build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())
    with db.transaction(stores.unitize):
        stores.unitize.execute(
            "INSERT INTO conversation_builds (account, chat_id, state, scorer)"
            " VALUES (?, ?, 'building', 'rules')",
            (ACCOUNT, GROUP),
        )
    before = _chunk_texts(stores)
    stores.delete(GROUP, [4])
    stores.drain()
    assert _chunk_texts(stores) == before


def test_a_build_that_fails_mid_write_exposes_nothing(stores: Stores) -> None:
    first = build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())
    listed = readers.list_conversations(stores.unitize, ACCOUNT, GROUP)
    stores.unitize.execute(
        "CREATE TEMP TRIGGER fail_links BEFORE INSERT ON main.links WHEN NEW.msg_id >= 5"
        " BEGIN SELECT RAISE(ABORT, 'disk went away'); END"
    )

    with pytest.raises(sqlean.Error):
        build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer(), write_batch=2)

    stores.unitize.execute("DROP TRIGGER temp.fail_links")
    assert readers.list_conversations(stores.unitize, ACCOUNT, GROUP) == listed
    states = [str(r[0]) for r in stores.unitize.execute("SELECT state FROM conversation_builds")]
    assert sorted(states) == ["complete", "failed"]
    orphans = stores.unitize.execute(
        "SELECT COUNT(*) FROM links WHERE build_id != ?", (first.build_id,)
    ).fetchone()
    assert int(orphans[0]) == 0


def test_a_build_that_fails_between_chunk_batches_exposes_none_of_them(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(builds, "WRITE_BATCH", 1)  # a transaction per chunk
    stores.unitize.execute(
        "CREATE TEMP TRIGGER fail_chunks BEFORE INSERT ON main.units"
        " WHEN NEW.kind = 'conversation' AND (SELECT COUNT(*) FROM main.units"
        " WHERE kind = 'conversation') >= 2 BEGIN SELECT RAISE(ABORT, 'disk went away'); END"
    )

    with pytest.raises(sqlean.Error):
        build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())

    assert _chunks(stores) == {}
    with pytest.raises(IndexNotReady):
        readers.list_conversations(stores.unitize, ACCOUNT, GROUP)
    stores.unitize.execute("DROP TRIGGER temp.fail_chunks")
    report = build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())
    chunks = _chunks(stores)
    assert len(chunks) == report.chunks == report.chunks_new > 2
    assert {b for b, _ in chunks.values()} == {report.build_id}


def test_a_build_killed_mid_write_leaves_the_previous_build_readable(
    stores: Stores, tmp_path: Path
) -> None:
    first = build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())
    listed = readers.list_conversations(stores.unitize, ACCOUNT, GROUP)
    links = readers.chat_links(stores.unitize, ACCOUNT, GROUP)
    marker = tmp_path / "paused"
    script = tmp_path / "build_and_hang.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            from pathlib import Path
            from chatseek_core import db
            from chatseek_unitize.builds import build_chat
            from chatseek_unitize.linking import RuleScorer

            root = Path({str(stores.root)!r})
            conn = db.connect(root / "unitize.db")
            db.attach_readonly(conn, root / "ingest.db", "ingest")

            def pause(progress):
                stage, done, total = progress
                if stage == "write" and 0 < done < total:
                    Path({str(marker)!r}).write_text("paused")
                    time.sleep(3600)

            build_chat(conn, {ACCOUNT!r}, {GROUP}, RuleScorer(), on_progress=pause, write_batch=2)
            """
        )
    )
    child = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.monotonic() + KILL_WAIT_S
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the child build never reached the write stage"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()

    reader = db.connect(stores.root / "unitize.db", readonly=True)
    db.attach_readonly(reader, stores.root / "ingest.db", "ingest")
    try:
        states = dict(
            (int(r[0]), str(r[1]))
            for r in reader.execute("SELECT build_id, state FROM conversation_builds")
        )
        half = [b for b, st in states.items() if st == "building"]
        assert len(half) == 1
        partial = reader.execute(
            "SELECT COUNT(*) FROM links WHERE build_id = ?", (half[0],)
        ).fetchone()
        assert 0 < int(partial[0]) < len(links)
        assert readers.list_conversations(reader, ACCOUNT, GROUP) == listed
        assert readers.chat_links(reader, ACCOUNT, GROUP) == links
        visible = reader.execute(
            "SELECT COUNT(*) FROM links l JOIN current_builds c ON c.build_id = l.build_id"
            " WHERE c.account = ? AND c.chat_id = ?",
            (ACCOUNT, GROUP),
        ).fetchone()
        assert int(visible[0]) == 7
    finally:
        reader.close()

    assert discard_unfinished(stores.unitize) == 1
    assert _state(stores, half[0]) == "failed"
    assert _state(stores, first.build_id) == "complete"
    gone = stores.unitize.execute(
        "SELECT COUNT(*) FROM links WHERE build_id = ?", (half[0],)
    ).fetchone()
    assert int(gone[0]) == 0
    again = build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())
    assert again.previous_build_id == first.build_id


def test_stale_answers_are_excluded_from_builds_and_counted(stores: Stores) -> None:
    build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())
    stored = answer_batch(
        stores.unitize,
        ACCOUNT,
        GROUP,
        '{"answers": [{"msg_id": 4, "parent": 3}, {"msg_id": 8, "parent": "new"}]}',
    )
    assert stored["stored"] == 2 and stored["rejected"] == []

    applied = build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())
    chain = readers.message_links(stores.unitize, ACCOUNT, GROUP, 4)["chain"]
    assert (chain[0]["parent_id"], chain[0]["reason"]) == (3, "agent")
    assert applied.answers_applied == 2 and applied.stale_answers == 0

    stores.edit(GROUP, 3, text="anyone selling a road bike?")
    stores.drain()
    rebuilt = build_chat(stores.unitize, ACCOUNT, GROUP, RuleScorer())

    assert rebuilt.stale_answers == 1 and rebuilt.answers_applied == 1
    assert readers.message_links(stores.unitize, ACCOUNT, GROUP, 4)["chain"][0]["reason"] != (
        "agent"
    )
    assert batch_status(stores.unitize, ACCOUNT, GROUP)["stale_answers"] == 1


def test_reads_before_any_build_and_builds_of_unknown_chats_fail_with_reasons(
    stores: Stores,
) -> None:
    with pytest.raises(IndexNotReady):
        readers.list_conversations(stores.unitize, ACCOUNT, GROUP)
    with pytest.raises(ChatNotFound):
        build_chat(stores.unitize, ACCOUNT, 42, RuleScorer())


def test_building_all_chats_builds_every_chat_of_the_account(stores: Stores) -> None:
    stores.chat(GROUP + 1, title="Second")
    stores.put([msg(1, 0, "hello there", chat_id=GROUP + 1)])
    reports = build_chats(stores.unitize, ACCOUNT, [], all_chats=True, scorer=RuleScorer())
    assert sorted(r.chat_id for r in reports) == sorted([GROUP, GROUP + 1])
    with db.transaction(stores.unitize):
        built = stores.unitize.execute("SELECT COUNT(*) FROM current_builds").fetchone()
    assert int(built[0]) == 2


def test_repeated_chunk_texts_are_numbered_per_topic_across_merges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(builds._Repeats, "MERGE", 3)
    seq = [
        Msg(msg_id=k, date=1_700_000_000 + 60 * k, sender_id=1, sender_name="Ann", text=t)
        for k, t in enumerate(["the flat", "is rented", "from May"], start=1)
    ]
    other = [replace(m, topic_id=5) for m in seq]
    repeats = builds._Repeats()
    keys = [
        [u.key for u in builds._chunk_units(s, repeats)]
        for s in (seq, seq[:1], other, seq, seq[1:], seq, other)
    ]
    first = keys[0]
    assert all(k.startswith("h:") and k.count(":") == 1 for k in first + keys[1] + keys[4])
    assert keys[2] == first  # another topic counts apart
    assert keys[3] == [f"{k}:1" for k in first]
    assert keys[5] == [f"{k}:2" for k in first]
    assert keys[6] == [f"{k}:1" for k in first]
    for topic in ((0, 1, 3, 4, 5), (2, 6)):
        held = [k for t in topic for k in keys[t]]
        assert len(held) == len(set(held))  # unique within each topic
