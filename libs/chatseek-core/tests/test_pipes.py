"""Room in a pipe: asked for where Linux allows it, left alone everywhere else."""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

from chatseek_core.pipes import PIPE_BYTES, capacity, widen

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pipe sizes are Linux's")


@linux
def test_a_widened_pipe_takes_a_megabyte_without_a_reader() -> None:
    read, write = os.pipe()
    try:
        before = capacity(write)
        assert before is not None and before < PIPE_BYTES
        assert widen(write) == PIPE_BYTES
        assert capacity(read) == PIPE_BYTES  # one pipe: either end reads the same room
        os.set_blocking(write, False)
        assert os.write(write, b"x" * PIPE_BYTES) == PIPE_BYTES
        with pytest.raises(BlockingIOError):
            os.write(write, b"x")
    finally:
        os.close(read)
        os.close(write)


@linux
def test_a_size_past_the_limit_leaves_the_pipe_as_it_was() -> None:
    read, write = os.pipe()
    try:
        before = capacity(write)
        with open("/proc/sys/fs/pipe-max-size") as limit:
            too_big = int(limit.read()) * 2
        got = widen(write, too_big)
        if got is not None:
            pytest.skip("this process may size a pipe past /proc/sys/fs/pipe-max-size")
        assert capacity(write) == before
    finally:
        os.close(read)
        os.close(write)


def test_what_is_not_a_pipe_is_not_widened() -> None:
    with tempfile.TemporaryFile() as f:
        assert widen(f.fileno()) is None
        assert capacity(f.fileno()) is None


@pytest.mark.parametrize("size", [0, -1, 1 << 31, 1 << 40])
def test_a_size_outside_what_the_kernel_reads_is_refused(size: int) -> None:
    read, write = os.pipe()
    try:
        before = capacity(write)
        with pytest.raises(ValueError, match="pipe size"):
            widen(write, size)
        assert capacity(write) == before
    finally:
        os.close(read)
        os.close(write)
