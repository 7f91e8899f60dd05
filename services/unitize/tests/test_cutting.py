"""Unit cutting: rendering, windows, threads, posts and the incremental re-cut contract."""

from __future__ import annotations

import bisect
import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatseek_core.errors import InvalidValue
from chatseek_unitize.cutting import (
    ALBUM_INDENT,
    chrono_key,
    cut_chat,
    cut_posts,
    cut_threads,
    cut_windows,
    parent_map,
    recut_anchor,
    recut_from,
    render_line,
    thread_roots_of,
)
from chatseek_unitize.model import RECIPE_VERSION, CutConfig, Msg, Unit, content_hash

T0 = 1_767_225_600  # 2026-01-01 00:00 UTC
MINUTE = 60


def msg(msg_id: int, minute: float, text: str = "hello", **kw: Any) -> Msg:
    kw.setdefault("sender_id", 1)
    kw.setdefault("sender_name", "Ann")
    return Msg(msg_id=msg_id, date=T0 + int(minute * MINUTE), text=text, **kw)


# --- rendering ---


def test_a_line_shows_utc_minute_sender_and_text() -> None:
    assert render_line(msg(1, 62.5, "see you")) == "[2026-01-01 01:02] Ann: see you"


def test_media_markers_are_visible_and_the_caption_follows() -> None:
    photo = msg(1, 0, "our flat", media_kind="photo")
    voice = msg(2, 0, "", media_kind="voice")
    doc = msg(3, 0, "invoice", media_kind="document", file_name="inv.pdf")
    poll = msg(4, 0, "", media_kind="poll", media_text="Pizza or sushi?")
    assert render_line(photo).endswith("Ann: [photo] our flat")
    assert render_line(voice).endswith("Ann: [voice]")
    assert render_line(doc).endswith("Ann: [document: inv.pdf] invoice")
    assert render_line(poll).endswith("Ann: [poll: Pizza or sushi?]")


def test_extracted_media_text_follows_its_marker_before_the_caption() -> None:
    m = msg(1, 0, "please pay", media_kind="document", file_name="a.pdf", media_text="Total 40 EUR")
    assert render_line(m).endswith("Ann: [document: a.pdf] Total 40 EUR please pay")


def test_a_message_is_always_one_line() -> None:
    line = render_line(msg(1, 0, "first\nsecond\r\n\nthird", sender_name="Bob\nSmith"))
    assert "\n" not in line
    assert line.endswith("Bob Smith: first second third")


def test_a_nameless_sender_renders_as_unknown() -> None:
    assert render_line(msg(1, 0, "hi", sender_name="")).endswith("unknown: hi")


# --- windows ---


def test_a_pause_longer_than_the_gap_closes_a_window() -> None:
    msgs = [msg(1, 0), msg(2, 30), msg(3, 60.5)]
    windows = cut_windows(msgs)
    assert [w.msg_ids for w in windows] == [(1, 2), (3,)]


def test_a_window_holds_at_most_window_max_msgs() -> None:
    msgs = [msg(i, i * 0.1) for i in range(1, 32)]
    windows = cut_windows(msgs)
    assert [len(w.msg_ids) for w in windows] == [30, 1]


def test_the_char_ceiling_moves_the_overflowing_message_to_the_next_window() -> None:
    cfg = CutConfig(window_max_chars=200)
    msgs = [msg(i, i, "x" * 60) for i in range(1, 8)]
    windows = cut_windows(msgs, cfg)
    assert all(len(w.text) <= 200 for w in windows)
    assert [m for w in windows for m in w.msg_ids] == list(range(1, 8))
    first_line_len = len(render_line(msgs[0]))
    assert len(windows[0].msg_ids) == (200 + 1) // (first_line_len + 1)


def test_a_single_long_message_is_a_window_of_its_own() -> None:
    msgs = [msg(1, 0, "short"), msg(2, 1, "y" * 3000), msg(3, 2, "after")]
    windows = cut_windows(msgs)
    assert [w.msg_ids for w in windows] == [(1,), (2,), (3,)]
    assert len(windows[1].text) > 1500


def test_topics_never_share_a_window() -> None:
    msgs = [msg(i, i, topic_id=10 if i % 2 else 20) for i in range(1, 9)]
    windows = cut_windows(msgs)
    assert [(w.topic_id, w.msg_ids) for w in windows] == [(10, (1, 3, 5, 7)), (20, (2, 4, 6, 8))]
    assert [w.key for w in windows] == ["w:1", "w:2"]


def test_service_and_empty_messages_are_not_unit_members() -> None:
    msgs = [msg(1, 0), msg(2, 1, "Ann joined", is_service=True), msg(3, 2, "  "), msg(4, 3)]
    windows = cut_windows(msgs)
    assert [w.msg_ids for w in windows] == [(1, 4)]


def test_a_unit_carries_dates_senders_reactions_and_its_hash() -> None:
    msgs = [
        msg(1, 0, reactions=2),
        msg(2, 1, sender_id=2, sender_name="Bob", reactions=3),
        msg(3, 2, reactions=1),
    ]
    (w,) = cut_windows(msgs)
    assert (w.kind, w.key, w.first_date, w.last_date) == ("window", "w:1", T0, T0 + 120)
    assert w.senders == ("Ann", "Bob")
    assert w.reactions == 6
    assert w.text.count("\n") == 2
    assert w.recipe == RECIPE_VERSION
    assert w.content_hash == content_hash(RECIPE_VERSION, w.text)
    assert content_hash(RECIPE_VERSION + 1, w.text) != w.content_hash


def test_input_order_does_not_change_the_cut() -> None:
    msgs = [msg(i, i * 7 % 50) for i in range(1, 40)]
    assert cut_windows(msgs) == cut_windows(list(reversed(msgs)))


# --- incremental re-cuts ---


def _split_at(windows: list[Unit], anchor: tuple[int, int] | None) -> list[Unit]:
    return [w for w in windows if anchor is not None and (w.first_date, w.msg_ids[0]) < anchor]


def test_appending_messages_keeps_every_earlier_window_identical() -> None:
    old = [msg(i, i * 3) for i in range(1, 60)]
    new = [*old, msg(60, 60 * 3), msg(61, 61 * 3)]
    before, after = cut_windows(old), cut_windows(new)
    assert after[: len(before) - 1] == before[:-1]
    assert after[len(before) - 1].key == before[-1].key


def test_recut_from_the_anchor_reproduces_the_full_cut_after_an_edit() -> None:
    old = [msg(i, i * 2, "word " * (i % 13)) for i in range(1, 120)]
    old_windows = cut_windows(old)
    edited = list(old)
    edited[70] = dataclasses.replace(edited[70], text="a much longer text " * 20)
    anchor = recut_anchor(old_windows, chrono_key(edited[70]))
    assert anchor is not None and anchor < chrono_key(edited[70])
    start = bisect.bisect_left([chrono_key(m) for m in edited], anchor)
    merged = _split_at(old_windows, anchor) + recut_from(edited, start)
    assert merged == cut_windows(edited)


def test_an_edit_to_a_windows_first_message_restarts_at_the_window_before() -> None:
    old = [msg(i, i) for i in range(1, 70)]
    old_windows = cut_windows(old)
    second = old_windows[1]
    anchor = recut_anchor(old_windows, (second.first_date, second.msg_ids[0]))
    assert anchor == (old_windows[0].first_date, old_windows[0].msg_ids[0])


def test_recut_from_refuses_mixed_topics_and_unsorted_input() -> None:
    with pytest.raises(InvalidValue):
        recut_from([msg(1, 0, topic_id=1), msg(2, 1, topic_id=2)], 0)
    with pytest.raises(InvalidValue):
        recut_from([msg(2, 1), msg(1, 0)], 0)
    with pytest.raises(InvalidValue):
        recut_from([msg(1, 0)], 5)


@st.composite
def _histories(draw: st.DrawFn) -> tuple[list[Msg], int, str]:
    n = draw(st.integers(min_value=1, max_value=60))
    gaps = draw(st.lists(st.sampled_from([0, 1, 5, 29, 31, 90]), min_size=n, max_size=n))
    sizes = draw(st.lists(st.integers(min_value=0, max_value=700), min_size=n, max_size=n))
    msgs, minute = [], 0
    for i in range(n):
        minute += gaps[i]
        msgs.append(msg(i + 1, minute, "z" * sizes[i]))
    change = draw(st.integers(min_value=0, max_value=n - 1))
    op = draw(st.sampled_from(["edit", "delete", "insert"]))
    return msgs, change, op


@settings(max_examples=60, deadline=None)
@given(_histories())
def test_any_change_recut_from_its_anchor_equals_a_full_recut(
    case: tuple[list[Msg], int, str],
) -> None:
    msgs, k, op = case
    cfg = CutConfig(window_max_msgs=5, window_max_chars=900)
    old_windows = cut_windows(msgs, cfg)
    changed = chrono_key(msgs[k])
    new = list(msgs)
    if op == "edit":
        new[k] = dataclasses.replace(msgs[k], text=msgs[k].text + "edited" * 30)
    elif op == "delete":
        del new[k]
    else:
        inserted = dataclasses.replace(msgs[k], msg_id=1000, text="inserted")
        new = sorted([*msgs, inserted], key=chrono_key)
        changed = chrono_key(inserted)
    anchor = recut_anchor(old_windows, changed)
    start = 0 if anchor is None else bisect.bisect_left([chrono_key(m) for m in new], anchor)
    kept = _split_at(old_windows, anchor)
    assert kept + recut_from(new, start, cfg) == cut_windows(new, cfg)


# --- threads ---


def test_a_root_and_all_its_descendants_form_a_chronological_thread() -> None:
    msgs = [
        msg(1, 0, "question"),
        msg(2, 1, "unrelated"),
        msg(3, 2, "answer", reply_to=1),
        msg(4, 3, "follow-up", reply_to=3),
        msg(5, 4, "second answer", reply_to=1),
    ]
    (thread,) = cut_threads(msgs)
    assert (thread.kind, thread.key, thread.msg_ids) == ("thread", "t:1:0", (1, 3, 4, 5))


def test_a_reply_to_a_missing_message_makes_its_sender_a_root() -> None:
    msgs = [msg(10, 0, "reply to an old message", reply_to=3), msg(11, 1, "and?", reply_to=10)]
    assert parent_map(msgs) == {11: 10}
    (thread,) = cut_threads(msgs)
    assert thread.msg_ids == (10, 11)


def test_a_message_without_replies_is_no_thread() -> None:
    assert cut_threads([msg(1, 0), msg(2, 1)]) == []


def test_long_threads_continue_in_parts_that_repeat_the_root_first() -> None:
    cfg = CutConfig(thread_max_msgs=4)
    msgs = [msg(1, 0, "root")] + [msg(i, i, f"reply {i}", reply_to=1) for i in range(2, 10)]
    parts = cut_threads(msgs, cfg)
    assert [p.key for p in parts] == ["t:1:0", "t:1:1", "t:1:2"]
    assert [p.msg_ids for p in parts] == [(1, 2, 3, 4), (1, 5, 6, 7), (1, 8, 9)]
    root_line = render_line(msgs[0])
    assert all(p.text.split("\n")[0] == root_line for p in parts)


def test_replies_across_topics_do_not_join_threads() -> None:
    msgs = [msg(1, 0, topic_id=5), msg(2, 1, reply_to=1, topic_id=6)]
    assert parent_map(msgs) == {}
    assert cut_threads(msgs) == []


def test_thread_roots_of_walks_up_to_the_root() -> None:
    parents = {3: 1, 4: 3, 7: 6}
    assert thread_roots_of([4, 7, 9], parents) == [1, 6, 9]
    assert thread_roots_of([1], {1: 2, 2: 1}) in ([1], [2])


def test_cut_threads_can_be_limited_to_some_roots() -> None:
    msgs = [msg(1, 0), msg(2, 1, reply_to=1), msg(3, 2), msg(4, 3, reply_to=3)]
    assert [t.key for t in cut_threads(msgs, roots=[3])] == ["t:3:0"]


# --- posts and whole chats ---


def test_every_channel_post_is_a_unit_and_comments_follow_their_post() -> None:
    posts = [msg(100, 0, "post one", sender_name="Chan"), msg(101, 5, "post two")]
    comments = {100: [msg(7, 2, "second comment"), msg(6, 1, "first comment")]}
    units = cut_posts(posts, comments)
    assert [(u.kind, u.key, u.msg_ids) for u in units] == [
        ("post", "p:100", (100, 6, 7)),
        ("post", "p:101", (101,)),
    ]
    assert units[0].text.split("\n")[0].endswith("Chan: post one")


def test_cut_chat_cuts_channels_into_posts_with_their_comments() -> None:
    posts = [msg(100, 0, "post"), msg(101, 60, "another post")]
    comments = [msg(5, 1, "nice", comment_of=(-1001, 100)), msg(6, 2, "no link")]
    units = cut_chat(posts, chat_type="channel", comments=comments)
    assert [(u.key, u.msg_ids) for u in units] == [("p:100", (100, 5)), ("p:101", (101,))]


def test_a_comment_sharing_a_later_posts_id_leaves_that_posts_line_its_own() -> None:
    # The discussion group numbers its messages apart from the channel: comment 101 on post
    # 100 is rendered before post 101, and neither may stand in for the other.
    posts = [msg(100, 0, "post one"), msg(101, 60, "post two")]
    comments = [msg(101, 1, "a comment", comment_of=(-1001, 100))]
    first, second = cut_chat(posts, chat_type="channel", comments=comments)
    assert first.msg_ids == (100, 101) and first.text.endswith("a comment")
    assert second.msg_ids == (101,) and second.text.endswith("post two")


def test_cut_chat_gives_groups_windows_and_threads() -> None:
    msgs = [msg(1, 0), msg(2, 1, reply_to=1), msg(3, 100)]
    units = cut_chat(msgs, chat_type="supergroup")
    assert [(u.kind, u.key) for u in units] == [
        ("window", "w:1"),
        ("window", "w:3"),
        ("thread", "t:1:0"),
    ]


def test_cut_config_refuses_nonsense_limits() -> None:
    with pytest.raises(InvalidValue):
        CutConfig(thread_max_msgs=1)
    with pytest.raises(InvalidValue):
        CutConfig(window_max_msgs=0)


# --- albums ---


def _album(first: int, count: int, minute: float, group: int, **kw: Any) -> list[Msg]:
    kw.setdefault("sender_name", "Bob")
    return [
        msg(first + n, minute, "", media_kind="photo", grouped_id=group, **kw) for n in range(count)
    ]


def test_an_albums_photos_are_one_line_group_with_one_header() -> None:
    album = _album(10, 3, 0, 7)
    album[0] = dataclasses.replace(album[0], text="our flat")
    album[2] = dataclasses.replace(album[2], media_text="BALCONY 12 m2")
    (window,) = cut_windows([msg(1, 0, "show me"), *album])
    assert window.text.split("\n")[1:] == [
        "[2026-01-01 00:00] Bob: [photo] our flat",
        ALBUM_INDENT + "[photo]",
        ALBUM_INDENT + "[photo] BALCONY 12 m2",
    ]


def test_a_reply_to_any_photo_of_an_album_threads_the_whole_album() -> None:
    msgs = [*_album(10, 3, 0, 7), msg(13, 1, "the second is nice", reply_to=11)]
    (thread,) = cut_threads(msgs)
    assert (thread.key, thread.msg_ids) == ("t:10:0", (10, 11, 12, 13))
    assert cut_threads(msgs, roots=[12]) == [thread]


def test_an_album_replying_to_a_message_joins_its_thread_whole() -> None:
    msgs = [msg(1, 0, "photos please"), *_album(2, 3, 1, 7, reply_to=1), msg(5, 2, "thanks")]
    (thread,) = cut_threads(msgs)
    assert thread.msg_ids == (1, 2, 3, 4)
    lines = thread.text.split("\n")
    assert [line.startswith(ALBUM_INDENT) for line in lines] == [False, False, True, True]


def test_thread_parts_never_close_inside_an_album_and_repeat_an_album_root_whole() -> None:
    cfg = CutConfig(thread_max_msgs=4)
    root = _album(1, 2, 0, 7)
    replies = [
        msg(3, 1, "a", reply_to=1),
        *_album(4, 3, 2, 8, reply_to=2),
        msg(7, 3, "b", reply_to=1),
    ]
    parts = cut_threads([*root, *replies], cfg)
    assert [p.msg_ids for p in parts] == [(1, 2, 3), (1, 2, 4, 5, 6), (1, 2, 7)]
    assert [p.key for p in parts] == ["t:1:0", "t:1:1", "t:1:2"]


def test_an_album_among_a_posts_comments_stays_whole_in_one_part() -> None:
    cfg = CutConfig(thread_max_msgs=3)
    post = msg(100, 0, "new flat for rent", sender_name="Chan")
    comments = {100: [msg(5, 1, "where?"), *_album(6, 3, 2, 9)]}
    units = cut_posts([post], comments, cfg)
    assert [u.msg_ids for u in units] == [(100, 5), (100, 6, 7, 8)]


def test_a_whole_cut_and_a_cut_limited_to_roots_agree_with_albums() -> None:
    msgs = [
        msg(1, 0, "root"),
        *_album(2, 2, 1, 7, reply_to=1),
        msg(4, 2, "reply to the second photo", reply_to=3),
        *_album(5, 2, 3, 8),
        msg(7, 4, "reply to the other album", reply_to=6),
    ]
    whole = cut_threads(msgs)
    assert [t.msg_ids for t in whole] == [(1, 2, 3, 4), (5, 6, 7)]
    assert cut_threads(msgs, roots=[6]) == whole[1:]
