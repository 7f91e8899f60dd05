"""Chunking conversations at message boundaries."""

from __future__ import annotations

from typing import Any

import pytest

from chatseek_core.errors import InvalidValue
from chatseek_unitize.chunking import TAIL_MIN_FRACTION, chunk_conversation
from chatseek_unitize.cutting import render_line
from chatseek_unitize.model import RECIPE_VERSION, Msg, content_hash

T0 = 1_767_225_600  # 2026-01-01 00:00 UTC


def msg(msg_id: int, text: str = "hello there", **kw: Any) -> Msg:
    kw.setdefault("sender_id", 1 + msg_id % 2)
    kw.setdefault("sender_name", "Ann" if msg_id % 2 else "Борис")
    return Msg(msg_id=msg_id, date=T0 + 60 * msg_id, text=text, **kw)


def test_a_chunk_is_one_rendered_line_per_message_with_sender_names() -> None:
    msgs = [msg(1, "where do we rent a flat?"), msg(2, "на Авито")]
    (chunk,) = chunk_conversation(msgs)
    assert chunk.text.split("\n") == [render_line(m) for m in msgs]
    assert "Ann:" in chunk.text and "Борис:" in chunk.text
    assert (chunk.first_msg_id, chunk.last_msg_id, chunk.msg_ids) == (1, 2, (1, 2))
    assert chunk.content_hash == content_hash(RECIPE_VERSION, chunk.text)


def test_chunks_close_before_the_line_that_would_pass_the_target() -> None:
    msgs = [msg(i, "word " * 40) for i in range(1, 40)]
    chunks = chunk_conversation(msgs, target_chars=1200)
    assert len(chunks) > 1
    assert all(len(c.text) <= 1200 for c in chunks[:-1])
    assert [i for c in chunks for i in c.msg_ids] == list(range(1, 40))
    for c, nxt in zip(chunks, chunks[1:], strict=False):
        first_next = next(m for m in msgs if m.msg_id == nxt.msg_ids[0])
        assert len(c.text) + 1 + len(render_line(first_next)) > 1200


def test_an_oversized_message_stays_one_chunk() -> None:
    msgs = [msg(1, "intro"), msg(2, "x" * 5000), msg(3, "outro " * 60)]
    chunks = chunk_conversation(msgs, target_chars=1200)
    assert [c.msg_ids for c in chunks] == [(1,), (2,), (3,)]
    assert len(chunks[1].text) > 5000


def test_a_short_tail_joins_the_chunk_before_it() -> None:
    msgs = [msg(i, "word " * 50) for i in range(1, 6)] + [msg(6, "ok")]
    chunks = chunk_conversation(msgs, target_chars=1000)
    assert len(render_line(msgs[-1])) < 1000 * TAIL_MIN_FRACTION
    assert chunks[-1].msg_ids[-1] == 6
    assert len(chunks[-1].msg_ids) > 1


def test_a_media_only_conversation_makes_no_chunk() -> None:
    msgs = [msg(1, "", media_kind="photo"), msg(2, "", media_kind="sticker")]
    assert chunk_conversation(msgs) == []


def test_media_messages_inside_a_talk_keep_their_markers() -> None:
    msgs = [msg(1, "look", media_kind="photo"), msg(2, "", media_kind="voice"), msg(3, "nice")]
    (chunk,) = chunk_conversation(msgs)
    assert "[photo] look" in chunk.text and "[voice]" in chunk.text


def test_service_messages_are_left_out_and_input_order_does_not_matter() -> None:
    msgs = [msg(3, "c"), msg(2, "Ann pinned a message", is_service=True), msg(1, "a")]
    (chunk,) = chunk_conversation(msgs)
    assert chunk.msg_ids == (1, 3)


def test_an_empty_conversation_has_no_chunks_and_a_bad_target_is_refused() -> None:
    assert chunk_conversation([]) == []
    with pytest.raises(InvalidValue):
        chunk_conversation([msg(1)], target_chars=0)


def test_a_chunk_never_closes_inside_an_album() -> None:
    album = [
        Msg(
            msg_id=10 + n,
            date=1000,
            sender_name="Ana",
            text="x" * 50,
            media_kind="photo",
            grouped_id=7,
        )
        for n in range(4)
    ]
    chunks = chunk_conversation([Msg(msg_id=1, date=900, text="y" * 100), *album], 150)
    holding = [c.msg_ids for c in chunks if 10 in c.msg_ids]
    assert holding == [(10, 11, 12, 13)]
