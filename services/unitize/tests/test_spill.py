"""A build's big columns in mapped files: the same values as on the heap, nothing left on disk,
and pages the process lets go of when told."""

from __future__ import annotations

import errno
import os
import random
from array import array
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_linkstream import _as_links, _mixed, _renumbered, _senders  # type: ignore[import-not-found]

from chatseek_core.errors import StorageError
from chatseek_unitize import linkfeatures, linkstream
from chatseek_unitize.cutting import chrono_key
from chatseek_unitize.linking import LearnedScorer, build_links
from chatseek_unitize.linkstream import link_chat
from chatseek_unitize.spill import Spill

MIB = 1 << 20


def test_a_growing_column_spills_past_its_threshold_and_reads_back_whole(tmp_path: Path) -> None:
    spill = Spill(tmp_path, threshold=64)
    column = spill.column("q")
    append = column.tail.append  # bound once, as a reader of messages does
    values = [random.Random(3).randrange(-(2**62), 2**62) for _ in range(1000)]
    for k, v in enumerate(values):
        append(v)
        if k % 37 == 0:
            column.flush()
    assert len(column) == len(values)
    whole = column.seal()
    assert isinstance(whole, memoryview) and whole.format == "q"
    assert whole.tolist() == values
    assert spill.files == 1
    assert os.listdir(tmp_path) == []  # unlinked as it was made


def test_a_small_column_stays_on_the_heap(tmp_path: Path) -> None:
    spill = Spill(tmp_path, threshold=1024)
    column = spill.column("i")
    column.tail.extend(range(10))
    column.flush()
    whole = column.seal()
    assert isinstance(whole, array) and whole.tolist() == list(range(10))
    assert spill.files == 0
    assert Spill(None).filled(10**6, "i", -1) == array("i", [-1]) * 10**6


def test_filled_columns_keep_what_is_written_through_a_release(tmp_path: Path) -> None:
    spill = Spill(tmp_path, threshold=64)
    column = spill.filled(5000, "i", -1)
    assert isinstance(column, memoryview)
    assert set(column.tolist()) == {-1}
    column[7] = 42
    floats = spill.filled(300, "f")
    floats[3] = 0.1
    grid = spill.zeros(2000, np.float64)
    grid[5:8] = 2.5
    spill.release()
    assert column[7] == 42 and column[8] == -1
    assert floats[3] == array("f", [0.1])[0]
    assert grid[4:9].tolist() == [0.0, 2.5, 2.5, 2.5, 0.0]
    assert spill.files == 3
    assert os.listdir(tmp_path) == []


def _rss_kib() -> int:
    """The process's resident set (file-backed or, on a tmpfs, shared pages included)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS line")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_release_lets_the_pages_go_and_reading_brings_them_back(tmp_path: Path) -> None:
    spill = Spill(tmp_path)
    column = spill.zeros(32 * MIB // 8, np.int64)
    column[:] = 7  # every page touched
    touched = _rss_kib()
    spill.release()
    released = _rss_kib()
    assert touched - released >= 24 * 1024
    assert int(column.sum()) == 7 * len(column)  # read back from the page cache


@pytest.mark.parametrize("ids_ascend", [True, False])
@pytest.mark.parametrize("seed", [1, 2])
def test_links_made_from_spilled_columns_are_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, ids_ascend: bool
) -> None:
    msgs = _mixed(seed) if ids_ascend else _renumbered(_mixed(seed), seed)
    answers = {m.msg_id: (None if m.msg_id % 2 else m.msg_id - 5) for m in msgs[::37]}
    want = build_links(msgs, agent_answers=answers, scorer=LearnedScorer())
    # Small slices, flushes and releases, so that every carry between them is crossed.
    monkeypatch.setattr(linkstream, "RELEASE_EVERY", 16)
    monkeypatch.setattr(linkstream, "_FLUSH_MESSAGES", 8)
    monkeypatch.setattr(linkstream, "_CUT_MESSAGES", 11)
    monkeypatch.setattr(linkfeatures, "_PACE_SLICE", 13)
    ordered = sorted(msgs, key=chrono_key)
    spill = Spill(tmp_path, threshold=16)
    cols = link_chat(
        ordered, senders=_senders(msgs), agent_answers=answers, scorer=LearnedScorer(), spill=spill
    )
    assert _as_links(cols) == want
    assert spill.files >= 20  # every kind of column went to a file
    assert os.listdir(tmp_path) == []


def test_a_topic_of_one_author_and_one_of_many_spill_alike(tmp_path: Path) -> None:
    # The previous and next message of an author are carried from slice to slice.
    msgs = [replace(m, sender_id=1, sender_name="Solo") for m in _mixed(5)[:90]] + _mixed(6)
    ordered = sorted(msgs, key=chrono_key)
    heap = link_chat(ordered, senders=_senders(msgs), scorer=LearnedScorer())
    mapped = link_chat(
        ordered,
        senders=_senders(msgs),
        scorer=LearnedScorer(),
        spill=Spill(tmp_path, threshold=16),
    )
    assert _as_links(mapped) == _as_links(heap)


@pytest.mark.parametrize("authors", [1, 3, 40])
def test_pace_and_same_author_neighbours_sliced_are_the_whole_topics_to_the_bit(
    monkeypatch: pytest.MonkeyPatch, authors: int
) -> None:
    rng = np.random.default_rng(authors)
    n = 5000
    date = np.cumsum(rng.integers(0, 4000, n)).astype(np.int64)
    date[rng.integers(0, n, 50)] -= 10_000  # a few dates out of order
    author = rng.integers(0, authors, n).astype(np.int32)
    pace = linkfeatures._pace(date)
    prev, nxt = linkfeatures._prev_next_same(author)
    for width in (1, 7, 50, 51, 333):
        monkeypatch.setattr(linkfeatures, "_PACE_SLICE", width)
        assert linkfeatures._pace(date).tobytes() == pace.tobytes()
        got_prev, got_next = linkfeatures._prev_next_same(author)
        assert got_prev.tolist() == prev.tolist() and got_next.tolist() == nxt.tolist()
    # And against the definitions themselves.
    last: dict[int, int] = {}
    want_prev = []
    for k, a in enumerate(author.tolist()):
        want_prev.append(last.get(a, -1))
        last[a] = k
    assert prev.tolist() == want_prev
    want_next = [n] * n
    for k, p in enumerate(want_prev):
        if p >= 0:
            want_next[p] = k
    assert nxt.tolist() == want_next


def test_a_full_disk_is_a_storage_error_that_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_room(fd: int, offset: int, size: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", no_room)
    spill = Spill(tmp_path, threshold=16)
    with pytest.raises(StorageError) as raised:
        spill.filled(100, "q")
    assert "No space left" in str(raised.value) and str(tmp_path) in str(raised.value)
    assert "free some disk space" in raised.value.hint
    assert os.listdir(tmp_path) == []
