"""A big conversation build's per-message columns, kept in files beside the store.

Linking a topic holds a few numbers a message until its last message is decided: ids, dates,
stems, the scorer's arrays, the decisions so far. That is about 150 bytes a message, 150 MiB
for a million-message group, and on the heap it stays with the process until the build ends.

Here a column past ``SPILL_BYTES`` lives in a temporary file in the store's directory instead
(unlinked as soon as it is made, so a crash leaves nothing behind) and is read and written
through a shared mapping. ``Spill.release`` drops every page the process has mapped; the
build calls it every ``RELEASE_EVERY`` messages, so the process keeps only what it touched
since. The data stays in the OS page cache, which the kernel writes back and reclaims as it
needs: what the process holds no longer grows with the topic. The algorithms are untouched:
a mapped column is a ``memoryview`` (cast to the ``array`` type code), read and written as
the ``array`` it replaces, at the same speed.

Without a directory (``Spill(None)``, the default everywhere but a build) every column is a
plain ``array`` or numpy array on the heap, as before.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import weakref
from array import array
from pathlib import Path
from typing import Any, BinaryIO, TypeAlias

import numpy as np

from chatseek_core.errors import StorageError

__all__ = ["RELEASE_EVERY", "SPILL_BYTES", "Col", "Column", "Spill"]

SPILL_BYTES = 1 << 20
"""A column up to this size stays on the heap; a bigger one goes to a file."""
RELEASE_EVERY = 4096
"""Messages a build links between two ``Spill.release`` calls."""
_FILL_SLICE = 1 << 20
_DONTNEED: int | None = getattr(mmap, "MADV_DONTNEED", None)

Col: TypeAlias = "array[Any] | memoryview[Any]"
"""A column: an ``array`` on the heap, or a mapped ``memoryview`` of the same type code;
either is indexed, sliced and read by numpy (``np.frombuffer``) alike."""


class Spill:
    """Where a build's big columns live: files in ``directory``, or the heap when None."""

    def __init__(self, directory: Path | str | None, *, threshold: int | None = None) -> None:
        self.directory = None if directory is None else Path(directory)
        self.threshold = SPILL_BYTES if threshold is None else threshold
        self.files = 0  # how many columns went to a file
        self._maps: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()

    def column(self, code: str) -> Column:
        """An empty column of ``array`` type ``code`` that grows by appending to its ``tail``."""
        return Column(self, code)

    def filled(self, n: int, code: str, value: float = 0) -> Col:
        """``array(code, [value]) * n``, or the same as a mapped ``memoryview``."""
        size = n * array(code).itemsize
        if not self._spills(size):
            return array(code, [value]) * n
        mapped = self._mapped(size)
        if value:
            view = np.frombuffer(mapped, dtype=np.dtype(code))
            for a in range(0, n, _FILL_SLICE):
                view[a : a + _FILL_SLICE] = value
            del view
            self._drop(mapped)
        return _typed(mapped, code)

    def zeros(self, n: int, dtype: Any) -> np.ndarray:
        """``np.zeros(n, dtype)``, mapped from a file when it is big."""
        dt = np.dtype(dtype)
        if not self._spills(n * dt.itemsize):
            return np.zeros(n, dtype=dt)
        return np.frombuffer(self._mapped(n * dt.itemsize), dtype=dt)

    def release(self) -> None:
        """Drop the pages of every mapped column from the process (their data stays)."""
        for mapped in list(self._maps):
            self._drop(mapped)

    def _spills(self, size: int) -> bool:
        return self.directory is not None and size > self.threshold

    def _open(self) -> BinaryIO:
        """A new temporary file in the directory, already unlinked."""
        assert self.directory is not None
        try:
            fd, path = tempfile.mkstemp(prefix=".build-", suffix=".tmp", dir=self.directory)
        except OSError as exc:
            raise self._failed(exc) from exc
        os.unlink(path)
        self.files += 1
        return os.fdopen(fd, "w+b")

    def _mapped(self, size: int, file: BinaryIO | None = None) -> mmap.mmap:
        """A shared, writable mapping of ``size`` bytes of ``file`` (a new zero file if None).

        A new file's blocks are allocated first: a write to a mapped page the disk has no
        room for would kill the process (SIGBUS), where an allocation fails with an error.
        """
        own = file is None
        f = self._open() if file is None else file
        try:
            if own:
                if hasattr(os, "posix_fallocate"):
                    os.posix_fallocate(f.fileno(), 0, size)
                else:  # pragma: no cover - platforms without it
                    f.truncate(size)
            else:
                f.flush()
            mapped = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_WRITE)
        except OSError as exc:
            raise self._failed(exc) from exc
        finally:
            f.close()
        self._maps.add(mapped)
        return mapped

    def _failed(self, exc: OSError) -> StorageError:
        return StorageError(
            f"a conversation build cannot keep its working columns in {self.directory}:"
            f" {exc.strerror or exc}",
            hint="free some disk space in the data directory (a build of a big chat needs"
            " up to about 330 bytes a message while it runs) and build again; nothing was changed",
            metadata={"directory": str(self.directory)},
        )

    @staticmethod
    def _drop(mapped: mmap.mmap) -> None:
        # Where madvise is missing (Windows) the pages stay until the mapping goes.
        if not mapped.closed and _DONTNEED is not None:
            mapped.madvise(_DONTNEED)


class Column:
    """A column that grows: append to ``tail`` (an ``array``), call ``flush`` now and then,
    and ``seal`` once it is whole.

    ``flush`` moves the tail to the column's file once it is past the spill's threshold (and
    every time after), clearing the tail in place, so a bound ``tail.append`` stays valid.
    """

    __slots__ = ("_file", "_spill", "_written", "code", "tail")

    def __init__(self, spill: Spill, code: str) -> None:
        self._spill = spill
        self.code = code
        self.tail: array[Any] = array(code)
        self._file: BinaryIO | None = None
        self._written = 0

    def __len__(self) -> int:
        return self._written + len(self.tail)

    def flush(self) -> None:
        """Move the tail to the file when the column spills."""
        tail = self.tail
        if self._file is None:
            if not self._spill._spills(len(tail) * tail.itemsize):
                return
            self._file = self._spill._open()
        try:
            self._file.write(memoryview(tail).cast("B"))
        except OSError as exc:
            raise self._spill._failed(exc) from exc
        self._written += len(tail)
        del tail[:]

    def seal(self) -> Col:
        """The whole column: the ``tail`` itself when it never spilled, else a mapped view.
        The column is empty afterwards."""
        if self._file is None:
            whole, self.tail = self.tail, array(self.code)
            return whole
        self.flush()
        file, self._file = self._file, None
        size, self._written = self._written * self.tail.itemsize, 0
        if size == 0:
            file.close()
            return array(self.code)
        return _typed(self._spill._mapped(size, file), self.code)


def _typed(mapped: mmap.mmap, code: str) -> memoryview[Any]:
    """``mapped`` as a ``memoryview`` of ``array`` type ``code``."""
    return memoryview(mapped).cast(code)  # type: ignore[call-overload, no-any-return]
