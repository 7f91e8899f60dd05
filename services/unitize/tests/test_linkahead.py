"""Static blocks computed ahead in a forked child: the same links, whatever the child does."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from test_link_reference import _chat  # type: ignore[import-not-found]
from test_linkstream import _as_links, _mixed, _senders  # type: ignore[import-not-found]

from chatseek_unitize import linkahead, linkstream
from chatseek_unitize.cutting import chrono_key
from chatseek_unitize.linkahead import Ahead, StaticArrays
from chatseek_unitize.linking import Choice, LearnedScorer, ScoringContext, build_links
from chatseek_unitize.linkstream import link_chat
from chatseek_unitize.spill import Spill

pytestmark = pytest.mark.skipif(not linkahead.available(), reason="a build forks only on Linux")


class _Counting(Ahead):
    """An ``Ahead`` that counts the blocks handed over and those the child made."""

    made: ClassVar[list[_Counting]] = []

    def __init__(self, blocks: Sequence[int], *rest: Any) -> None:
        super().__init__(blocks, *rest)
        self.blocks = len(blocks)
        self.hits = 0
        _Counting.made.append(self)

    def take(self, lo: int, picked: Sequence[int]) -> StaticArrays | None:
        got = super().take(lo, picked)
        self.hits += got is not None
        return got


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[_Counting]:
    """Every topic forks (the chats here are small), through ``_Counting``."""
    monkeypatch.setattr(linkahead, "AHEAD_MIN_SCORED", 1)
    monkeypatch.setattr(linkahead, "Ahead", _Counting)
    _Counting.made.clear()
    return _Counting.made


def _reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@pytest.mark.parametrize("seed", [1, 2])
def test_links_from_blocks_made_ahead_are_the_same(children: list[_Counting], seed: int) -> None:
    msgs = _mixed(seed)
    answers = {m.msg_id: (None if m.msg_id % 2 else m.msg_id - 5) for m in msgs[::37]}
    want = build_links(msgs, agent_answers=answers, scorer=LearnedScorer(ahead=False))
    assert children == []
    got = build_links(msgs, agent_answers=answers, scorer=LearnedScorer())
    assert got == want
    assert len(children) == 3  # one child a topic
    assert all(c.hits == c.blocks for c in children)
    assert sum(c.blocks for c in children) > len(children)
    assert all(_reaped(c.pid) for c in children)


def test_streamed_links_from_spilled_columns_and_blocks_made_ahead_are_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, children: list[_Counting]
) -> None:
    msgs = _mixed(3)
    want = build_links(msgs, scorer=LearnedScorer(ahead=False))
    monkeypatch.setattr(linkstream, "RELEASE_EVERY", 16)
    spill = Spill(tmp_path, threshold=16)
    cols = link_chat(
        sorted(msgs, key=chrono_key), senders=_senders(msgs), scorer=LearnedScorer(), spill=spill
    )
    assert _as_links(cols) == want
    assert spill.files > 0
    assert children and all(c.hits == c.blocks for c in children)
    assert all(_reaped(c.pid) for c in children)


def test_a_child_that_dies_leaves_the_rest_to_the_parent(
    monkeypatch: pytest.MonkeyPatch, children: list[_Counting]
) -> None:
    serve = linkahead._serve

    def one_block_then_die(fd: int, blocks: Sequence[int], compute: Any) -> None:
        serve(fd, blocks[:1], compute)
        os._exit(3)

    monkeypatch.setattr(linkahead, "_serve", one_block_then_die)
    msgs = _chat(4)  # one topic of four blocks
    want = build_links(msgs, scorer=LearnedScorer(ahead=False))
    assert build_links(msgs, scorer=LearnedScorer()) == want
    assert [(c.hits, c.blocks) for c in children] == [(1, 4)]
    assert _reaped(children[0].pid)


def test_a_build_cut_short_stops_and_reaps_its_child(children: list[_Counting]) -> None:
    class Failing(LearnedScorer):
        calls = 0

        def choose(self, ctx: ScoringContext, i: int) -> Choice:
            Failing.calls += 1
            if Failing.calls > 5:
                raise RuntimeError("stop")
            return super().choose(ctx, i)

    with pytest.raises(RuntimeError, match="stop"):
        build_links(_chat(5), scorer=Failing())
    assert len(children) == 1
    # The child had a whole topic to write and was stopped with the pipe still full.
    assert children[0].hits < children[0].blocks
    assert _reaped(children[0].pid)


def _arrays(lo: int, picked: Sequence[int]) -> StaticArrays:
    n = len(picked)
    return StaticArrays(
        lo,
        np.asarray(picked, dtype=np.int64),
        np.arange(n, dtype=np.float32) + lo,
        np.tile(np.arange(2, dtype=np.int64), (n, 1)),
        np.full(n, 2, dtype=np.int64),
        np.full((n, 2, 3), lo, dtype=np.float32),
        np.full(n, np.nan),
    )


def test_take_hands_over_only_the_block_asked_for_with_the_same_rows() -> None:
    picks = {0: [0, 2, 5], 128: [130], 256: [256, 300]}
    ahead = Ahead(list(picks), lambda lo: _arrays(lo, picks[lo]), 2, 3)
    try:
        first = ahead.take(0, [0, 2, 5])
        assert first is not None
        assert first.picked.tolist() == [0, 2, 5]
        assert first.new.tolist() == [0.0, 1.0, 2.0]
        assert first.short_pre.shape == (3, 2, 3)
        assert np.isnan(first.rest).all()
        # A block the child did not make as asked (another message of it is scored now).
        assert ahead.take(128, [128, 130]) is None
        # Asked past a block: it is passed over; a block asked twice is computed again.
        third = ahead.take(256, [256, 300])
        assert third is not None
        assert float(third.short_pre[1, 1, 2]) == 256.0
        assert ahead.take(256, [256, 300]) is None
        assert ahead.take(384, [390]) is None  # the child has finished
    finally:
        ahead.close()
    assert _reaped(ahead.pid)


def test_a_fork_refused_leaves_every_block_to_the_parent(
    monkeypatch: pytest.MonkeyPatch, children: list[_Counting], caplog: pytest.LogCaptureFixture
) -> None:
    def refuse() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refuse)
    msgs = _chat(6)
    want = build_links(msgs, scorer=LearnedScorer(ahead=False))
    assert build_links(msgs, scorer=LearnedScorer()) == want
    assert children == []
    assert "runs in one process" in caplog.text
