"""The streamed linker gives the links the list linker gives, field for field."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from test_link_reference import WORDS, _chat  # type: ignore[import-not-found]

from chatseek_core.errors import InvalidValue
from chatseek_unitize import linkfeatures
from chatseek_unitize.cutting import chrono_key
from chatseek_unitize.linkfeatures import DynamicState
from chatseek_unitize.linking import LearnedScorer, Link, build_links, conversations
from chatseek_unitize.linkstream import NO_ID, REASONS, LinkColumns, link_chat
from chatseek_unitize.model import Msg


def _as_links(cols: LinkColumns) -> list[Link]:
    return [
        Link(
            cols.msg_id[k],
            None if cols.parent_id[k] == NO_ID else cols.parent_id[k],
            REASONS[cols.reason[k]],
            cols.confidence(k),
            tuple(cols.runners_up(k)),
        )
        for k in range(len(cols))
    ]


def _senders(msgs: list[Msg]) -> list[tuple[int | None, str]]:
    return [(m.topic_id, m.sender_name) for m in msgs]


def _mixed(seed: int) -> list[Msg]:
    """``_chat`` spread over three topics, with albums, service and empty messages, and the
    order shuffled as a store would not keep it."""
    rng = random.Random(seed)
    out: list[Msg] = []
    album, topic = 0, None
    for m in _chat(seed):
        roll = rng.random()
        if album:  # the rest of an album: same topic, same group
            album -= 1
            m = replace(m, grouped_id=out[-1].grouped_id, media_kind="photo")
        else:
            topic = rng.choice([None, 7, 9])
            if roll < 0.03:  # by someone who never writes, named like a common word
                m = replace(m, is_service=True, sender_id=999, sender_name=f"{rng.choice(WORDS)} X")
            elif roll < 0.05:
                m = replace(m, text="  ")
            elif roll < 0.08:
                album = 2
                m = replace(m, grouped_id=m.msg_id, media_kind="photo")
            elif roll < 0.14 and m.msg_id > 200:  # a reply far back, past any candidate
                m = replace(m, reply_to=rng.randint(1, m.msg_id - 150))
        out.append(replace(m, topic_id=topic))
    rng.shuffle(out)
    return out


def _renumbered(msgs: list[Msg], seed: int) -> list[Msg]:
    """The same chat with its message ids shuffled, so ids no longer ascend with the dates
    (as after an import of a migrated group): the streamed linker then keeps an id index."""
    ids = sorted(m.msg_id for m in msgs)
    shuffled = ids[:]
    random.Random(seed).shuffle(shuffled)
    new = dict(zip(ids, shuffled, strict=True))
    return [
        replace(m, msg_id=new[m.msg_id], reply_to=new.get(m.reply_to, m.reply_to))
        if m.reply_to is not None
        else replace(m, msg_id=new[m.msg_id])
        for m in msgs
    ]


@pytest.mark.parametrize("ids_ascend", [True, False])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_streamed_links_are_the_list_linkers_field_for_field(seed: int, ids_ascend: bool) -> None:
    msgs = _mixed(seed) if ids_ascend else _renumbered(_mixed(seed), seed)
    answers = {m.msg_id: (None if m.msg_id % 2 else m.msg_id - 5) for m in msgs[::37]}
    want = build_links(msgs, agent_answers=answers, scorer=LearnedScorer())
    ordered = sorted(msgs, key=chrono_key)
    cols = link_chat(ordered, senders=_senders(msgs), agent_answers=answers, scorer=LearnedScorer())
    got = _as_links(cols)
    assert got == want
    assert {r.reason for r in got} >= {"album", "reply", "agent", "scored", "new"}
    number, count = cols.conversations()
    groups = conversations(want)
    assert count == len(groups)
    by_msg = dict(zip(cols.msg_id, number.tolist(), strict=True))
    assert [[by_msg[i] for i in g] for g in groups] == [
        [k + 1] * len(g) for k, g in enumerate(groups)
    ]


def test_an_empty_chat_links_nothing() -> None:
    cols = link_chat((), senders=(), scorer=LearnedScorer())
    assert len(cols) == 0
    assert cols.conversations()[1] == 0


def test_conversations_out_of_reach_are_dropped_and_replayed_to_the_same_links(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    msgs = [
        replace(m, reply_to=m.msg_id - 100 - m.msg_id % 50)
        if m.msg_id % 9 == 0 and m.msg_id > 150
        else m
        for m in _chat(4)
    ]
    ordered = sorted(msgs, key=chrono_key)
    want = build_links(msgs, agent_answers={}, scorer=LearnedScorer())
    replayed: list[int] = []
    live: list[int] = []
    replay, evict = DynamicState._replay, DynamicState._evict

    def counted_replay(self: DynamicState, conv: int) -> None:
        replayed.append(conv)
        replay(self, conv)

    def counted_evict(self: DynamicState, i: int) -> None:
        evict(self, i)
        live.append(len(self.conv_stems))

    monkeypatch.setattr(linkfeatures, "EVICT_EVERY", 8)
    monkeypatch.setattr(DynamicState, "_replay", counted_replay)
    monkeypatch.setattr(DynamicState, "_evict", counted_evict)
    assert build_links(msgs, agent_answers={}, scorer=LearnedScorer()) == want
    cols = link_chat(ordered, senders=_senders(msgs), scorer=LearnedScorer())
    assert _as_links(cols) == want
    assert len(replayed) >= 5  # replies joined conversations that had been dropped
    conversations_made = sum(1 for link in want if link.parent_id is None)
    assert max(live) < conversations_made / 3


def test_link_columns_hold_every_four_place_probability_exactly() -> None:
    cols = LinkColumns()
    every = [k / 10_000 for k in range(10_001)]
    for k, p in enumerate(every):
        cols.add(k, k, None, "scored", p, [(k + 1, p), (k + 2, 1.0), (-1, 0.0)])
    assert [cols.confidence(k) for k in range(len(cols))] == every
    assert [cols.runners_up(k)[0][1] for k in range(len(cols))] == every
    assert cols.runners_up(7) == [(8, 0.0007), (9, 1.0), (-1, 0.0)]
    assert cols.in_chrono_order().confidence(9_999) == 0.9999


@pytest.mark.parametrize("p", [0.33333, 1.0001, -0.0001, 2.0])
def test_link_columns_refuse_a_probability_a_build_would_not_make(p: float) -> None:
    cols = LinkColumns()
    with pytest.raises(InvalidValue, match="4 places"):
        cols.add(1, 1, None, "scored", p)
    with pytest.raises(InvalidValue, match="4 places"):
        cols.add(1, 1, None, "scored", 0.5, [(2, p)])
    assert len(cols) == 0 and not cols.rejected_id  # a refused link leaves nothing behind
