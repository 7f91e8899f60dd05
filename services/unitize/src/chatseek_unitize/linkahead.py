"""The learned scorer's static blocks, computed ahead in a forked process.

A conversation build decides its messages one after another, and about a quarter of a build
needs no decision: the learned scorer's first layer over every candidate of a block of
messages and the shortlist it gives (``LearnedScorer``'s static part). A thread cannot take
that work off the deciding one (its numpy calls are too small to run without the
interpreter lock), so a big topic forks a child that computes every static block of the
topic, in order, and writes them to a pipe, while the parent decides. The child has
everything the parent had at the fork (the topic's arrays, which messages are scored, the
weights), computes exactly what the parent would (the same code over the same arrays), and
touches nothing shared: it reads the arrays, writes the pipe and exits.

The pipe and the child's write buffer hold a few blocks (2 MiB), so the child runs at most that
far ahead and its own memory stays a few blocks'. Anything unexpected (a block the child did
not make, a short read, a child that died) and the parent computes the block itself: the
child only ever saves time.

Only where ``os.fork`` is safe to use from a process with threads in this way: on Linux, and
where gRPC is not loaded or has its fork support off. gRPC's fork support (on by default in
its core) restarts gRPC's threads in every forked child, and those crash there; the unitize
service turns it off before gRPC starts (``keep_grpc_out_of_forks``), as nothing it forks
uses gRPC. Elsewhere every block is computed in the parent.
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from chatseek_core import pipes

__all__ = [
    "AHEAD_MIN_SCORED",
    "GRPC_FORK_ENV",
    "Ahead",
    "StaticArrays",
    "available",
    "keep_grpc_out_of_forks",
]

AHEAD_MIN_SCORED = 4096
"""A topic forks a child only with at least this many scored messages (a fork of a big
process costs milliseconds; a small topic decides in less)."""
_HEADER = struct.Struct("<qq")
GRPC_FORK_ENV = "GRPC_ENABLE_FORK_SUPPORT"
_OFF = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True, slots=True)
class StaticArrays:
    """One block's static part as arrays: the block's scored rows (``picked``, absolute
    indices), their "new" scores, shortlists (``top`` candidate columns, the first ``lens``
    of a row real), shortlisted pre-activations and off-list log-sum-exps."""

    lo: int
    picked: np.ndarray  # int64 (n,)
    new: np.ndarray  # float32 (n,)
    top: np.ndarray  # int64 (n, keep)
    lens: np.ndarray  # int64 (n,)
    short_pre: np.ndarray  # float32 (n, keep, hidden)
    rest: np.ndarray  # float64 (n,)


def available() -> bool:
    """Whether a build forks its child here: on Linux, where gRPC is not loaded or has its
    fork support off."""
    if not (sys.platform.startswith("linux") and hasattr(os, "fork")):
        return False
    return "grpc" not in sys.modules or os.environ.get(GRPC_FORK_ENV, "").lower() in _OFF


def keep_grpc_out_of_forks() -> None:
    """Turn gRPC's fork support off for this process, unless the environment already says;
    call it before gRPC is first imported (its core reads the setting once)."""
    os.environ.setdefault(GRPC_FORK_ENV, "false")


class Ahead:
    """A child computing a topic's static blocks in order; ``take`` reads them.

    Args:
        blocks: The start of every block to compute, increasing.
        compute: ``compute(lo)``: block ``lo``'s arrays (run in the child).
        keep: Shortlist length; ``hidden``: the hidden layer's width.

    Raises:
        OSError: the child could not be forked (the caller computes every block itself).
    """

    def __init__(
        self,
        blocks: Sequence[int],
        compute: Callable[[int], StaticArrays],
        keep: int,
        hidden: int,
    ) -> None:
        self.keep, self.hidden = keep, hidden
        self._pending: StaticArrays | None = None
        read, write = os.pipe()
        pipes.widen(write)
        try:
            pid = os.fork()
        except OSError:
            os.close(read)
            os.close(write)
            raise
        if pid == 0:  # the child: compute, write, exit without running anything of the parent's
            code = 0
            try:
                os.close(read)
                _serve(write, blocks, compute)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(write)
        self.pid = pid
        self._file: BinaryIO | None = os.fdopen(read, "rb", buffering=pipes.PIPE_BYTES)
        self._finalizer = weakref.finalize(self, _reap, self._file, pid)

    def take(self, lo: int, picked: Sequence[int]) -> StaticArrays | None:
        """Block ``lo``'s arrays if the child made them for exactly the rows ``picked``;
        None (compute it yourself) otherwise. Blocks before ``lo`` are passed over."""
        got = self._pending
        while got is None or got.lo < lo:
            got = self._read()
            if got is None:
                return None
        if got.lo > lo:
            self._pending = got
            return None
        self._pending = None
        if len(got.picked) != len(picked) or got.picked.tolist() != list(picked):
            return None
        return got

    def _read(self) -> StaticArrays | None:
        file = self._file
        if file is None:
            return None
        try:
            head = file.read(_HEADER.size)
            if len(head) < _HEADER.size:
                raise EOFError
            lo, n = _HEADER.unpack(head)
            keep, hidden = self.keep, self.hidden
            sizes = (8 * n, 4 * n, 8 * n * keep, 8 * n, 4 * n * keep * hidden, 8 * n)
            body = file.read(sum(sizes))
            if len(body) < sum(sizes):
                raise EOFError
        except (OSError, EOFError, struct.error):
            self.close()
            return None
        parts = []
        at = 0
        for size in sizes:
            parts.append(memoryview(body)[at : at + size])
            at += size
        return StaticArrays(
            lo,
            np.frombuffer(parts[0], dtype=np.int64),
            np.frombuffer(parts[1], dtype=np.float32),
            np.frombuffer(parts[2], dtype=np.int64).reshape(n, keep),
            np.frombuffer(parts[3], dtype=np.int64),
            np.frombuffer(parts[4], dtype=np.float32).reshape(n, keep, hidden),
            np.frombuffer(parts[5], dtype=np.float64),
        )

    def close(self) -> None:
        """Stop the child (if still running) and reap it."""
        self._file = None
        self._pending = None
        self._finalizer()


def _serve(fd: int, blocks: Sequence[int], compute: Callable[[int], StaticArrays]) -> None:
    with os.fdopen(fd, "wb", buffering=pipes.PIPE_BYTES) as out:
        for lo in blocks:
            a = compute(lo)
            out.write(_HEADER.pack(a.lo, len(a.picked)))
            for part, dtype in (
                (a.picked, np.int64),
                (a.new, np.float32),
                (a.top, np.int64),
                (a.lens, np.int64),
                (a.short_pre, np.float32),
                (a.rest, np.float64),
            ):
                out.write(np.ascontiguousarray(part, dtype=dtype).data)


def _reap(file: Any, pid: int) -> None:
    if file is not None:
        with contextlib.suppress(OSError):
            file.close()
    # A child blocked on a full pipe gets EPIPE once the read end is closed, and exits.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0)
