"""An export's JSON file read while it is still being written (an upload still arriving).

Invariants:
* A read returns exactly what the same read of the finished file would: it waits until the
  bytes it asks for have arrived, or until the file has ended and is known to be shorter. So a
  file still arriving is never mistaken for one cut mid-write.
* Only bytes the writer has announced are read; the writer announces a size only after those
  bytes are written and flushed.
* A writer that stops before the end (a broken upload) makes every waiting read raise
  ``ArrivalStopped``; nothing is read past what arrived.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import IO, Protocol

__all__ = ["Arrival", "ArrivalStopped", "ArrivingFile", "Growth"]


class ArrivalStopped(Exception):
    """The file stopped arriving before its end (the upload broke off)."""


class Growth(Protocol):
    """How much of a file has arrived, told by whoever writes it."""

    def wait_for(self, size: int | None) -> tuple[int, bool]:
        """Block until the file holds ``size`` bytes (``None``: until it has ended) or has ended.

        Returns:
            ``(bytes it holds now, whether it has ended)``.

        Raises:
            ArrivalStopped: the writer stopped before the end.
        """
        ...


class Arrival:
    """A ``Growth`` that the writing thread updates and any other thread waits on."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._size = 0
        self._ended = False
        self._stopped = False

    def grew(self, size: int) -> None:
        """The file now holds ``size`` bytes, written and flushed."""
        with self._changed:
            self._size = size
            self._changed.notify_all()

    def end(self) -> None:
        """The file is whole; it will not grow again."""
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def stop(self) -> None:
        """The file will never be whole: waiting readers raise ``ArrivalStopped``."""
        with self._changed:
            self._stopped = True
            self._changed.notify_all()

    def wait_for(self, size: int | None) -> tuple[int, bool]:
        with self._changed:
            while not (self._stopped or self._ended or (size is not None and self._size >= size)):
                self._changed.wait()
            if self._stopped and not self._ended:
                raise ArrivalStopped("the upload stopped before the export's end")
            return self._size, self._ended


class ArrivingFile:
    """A binary file opened for reading from its start while it is still arriving.

    Reads as a regular file does (``read(n)`` gives ``n`` bytes unless the end comes first),
    waiting on ``growth`` for bytes not yet written. Seeks go to a position, from the start.
    """

    def __init__(self, path: Path, growth: Growth) -> None:
        self._file: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed by ``close``
        self._growth = growth
        self._pos = 0

    def read(self, size: int = -1, /) -> bytes:
        want = None if size is None or size < 0 else self._pos + size
        have, _ = self._growth.wait_for(want)
        stop = have if want is None else min(want, have)
        if stop <= self._pos:
            return b""
        data = self._file.read(stop - self._pos)
        self._pos += len(data)
        return data

    def seek(self, offset: int, whence: int = 0, /) -> int:
        if whence != 0 or offset < 0:
            raise ValueError("an arriving file seeks only to a position from its start")
        self._pos = self._file.seek(offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> ArrivingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
