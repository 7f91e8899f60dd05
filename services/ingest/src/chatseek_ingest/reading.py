"""An import's read of the export: in this process, or in a reader process beside it.

Parsing an export and preparing its rows (``store.prepare``: JSON columns) is pure Python
and costs about as much as writing the rows (with each row's content hash, which the writer
computes); in one process they take turns at the interpreter lock. For a big export on a
machine with a core to spare, a reader process (``python -m chatseek_ingest.reading``) parses
and prepares while the importing process writes.

Invariants:
* Both ways yield the same records in the same order: each ``ExportChat`` and ``ExportWarning``
  as read, and the messages between them as lists of ``store.Prepared`` in file order, at most
  ``BATCH`` a list; a list never spans a chat header or a warning.
* A ``MalformedExport`` is raised after every message read before the problem has been
  yielded, with the same message, hint and metadata either way.
* The reader process only reads the export; the importing process does every write. Should the
  reader die, the import stops with ``ReaderFailed``: what is committed stays, and importing
  the export again completes it.
* Memory stays bounded: the reader blocks while the pipe (``pipes.PIPE_BYTES`` where the OS
  allows it) is full, and the pipe is drained into at most ``IN_FLIGHT`` lists. Closing the
  iterator early stops the reader.
* An export still arriving (``ExportSource.growth``) is read as it comes: a thread tells the
  reader process on its stdin how many bytes have arrived (``<size>`` lines, then ``end
  <size>``). Should the upload stop first, the reader's stdin closes without an end, it exits,
  and the import stops with ``ReaderFailed`` as above.
"""

from __future__ import annotations

import contextlib
import json
import logging
import marshal
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Generator
from pathlib import Path
from typing import IO, Any

from chatseek_core import pipes
from chatseek_core.errors import MalformedExport, StorageError
from chatseek_ingest import store
from chatseek_ingest.export import ExportSource, iter_export
from chatseek_ingest.export.arriving import ArrivalStopped, Growth
from chatseek_ingest.model import ExportChat, ExportMessage, ExportWarning

__all__ = [
    "BATCH",
    "PROCESS_MIN_BYTES",
    "ReaderFailed",
    "Record",
    "read_prepared",
    "worth_a_process",
]

log = logging.getLogger(__name__)

BATCH = 1000
IN_FLIGHT = 8
# Below this the reader process's start (about 0.15 s: an interpreter and the export modules)
# costs more than it saves: 16 MiB is about 30,000 messages, 0.4 s of parsing.
PROCESS_MIN_BYTES = 16 * 1024 * 1024

Record = ExportChat | ExportWarning | list[store.Prepared]

_FRAME = struct.Struct("<I")
_MESSAGES, _RECORD, _MALFORMED, _END = "m", "r", "e", "end"
# A frame's first byte: how its item is encoded. Both ends run the same interpreter, so the
# marshal format is the same on both sides of the pipe.
_MARSHALLED, _PICKLED = b"M", b"P"


class ReaderFailed(StorageError):
    """The reader process ended before the export did."""

    reason = "EXPORT_READER_FAILED"


def read_prepared(
    source: ExportSource, *, process: bool | None = None
) -> Generator[Record, None, None]:
    """The export's records, its messages prepared for ``store.store_prepared``.

    Args:
        process: read in a reader process (True), in this one (False), or pick by the
            export's size and the cores this process may use (None).
    """
    if process is None:
        process = worth_a_process(source.size)
    return _from_process(source) if process else _in_process(source)


def worth_a_process(size: int) -> bool:
    """Whether an export of ``size`` bytes is best read in a reader process: one big enough
    to repay the process's start, on a machine with a core to spare."""
    return size >= PROCESS_MIN_BYTES and _cores() >= 2


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _in_process(source: ExportSource) -> Generator[Record, None, None]:
    pending: list[store.Prepared] = []
    try:
        for record in iter_export(source):
            if isinstance(record, ExportMessage):
                pending.append(store.prepare(record))
                if len(pending) >= BATCH:
                    yield pending
                    pending = []
                continue
            if pending:
                yield pending
                pending = []
            yield record
    except MalformedExport:
        if pending:
            yield pending
        raise
    if pending:
        yield pending


def _from_process(source: ExportSource) -> Generator[Record, None, None]:
    spec = json.dumps(
        {
            "json_path": str(source.json_path),
            "root": str(source.root),
            "size": source.size,
            "label": source.label,
            "arriving": source.growth is not None,
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "chatseek_ingest.reading", spec],
        stdin=subprocess.DEVNULL if source.growth is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    # Room for a few frames: with the default 64 KiB the reader waited on every frame for this
    # process's pipe thread, itself waiting for the interpreter lock between the writes
    # (a 1M-message export imported in 21.5 s instead of 24.5).
    pipes.widen(proc.stdout.fileno())
    log.info("reading %s in reader process %d", source.label or source.json_path, proc.pid)
    if source.growth is not None:
        assert proc.stdin is not None
        threading.Thread(
            target=_tell, args=(source.growth, proc.stdin), name="export-arrival", daemon=True
        ).start()
    # A thread drains the pipe while this one writes, or the reader would wait on a full pipe
    # through every commit; it holds at most ``IN_FLIGHT`` frames.
    frames: queue.Queue[bytes | None] = queue.Queue(IN_FLIGHT)
    drain = threading.Thread(
        target=_drain, args=(proc.stdout, frames), name="export-reader-pipe", daemon=True
    )
    drain.start()
    try:
        while True:
            frame = frames.get()
            item = None if frame is None else _decode(frame)
            if item is None:
                code = proc.wait()
                raise ReaderFailed(
                    f"the export reader stopped before the end of the export (exit status {code})",
                    hint="What was read before it is stored; import the export again to finish.",
                    metadata={"exit_status": str(code)},
                )
            tag = item[0]
            if tag == _MESSAGES or tag == _RECORD:
                yield item[1]
            elif tag == _MALFORMED:
                raise MalformedExport(item[1], hint=item[2], metadata=item[3])
            else:
                return
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        while drain.is_alive():  # unblock a drain waiting for room, until it sees the end
            with contextlib.suppress(queue.Empty):
                frames.get(timeout=0.1)
        proc.stdout.close()


def _drain(stream: IO[bytes], frames: queue.Queue[bytes | None]) -> None:
    """Every whole frame of ``stream`` onto ``frames``, then None."""
    while True:
        head = stream.read(_FRAME.size)
        body = b""
        if len(head) == _FRAME.size:
            (size,) = _FRAME.unpack(head)
            body = stream.read(size)
            if len(body) == size:
                frames.put(body)
                continue
        frames.put(None)
        return


def _tell(growth: Growth, stream: IO[bytes]) -> None:
    """Write to the reader's stdin how much of the export has arrived, until it has ended.

    Stops quietly when the upload stops (the stdin closes without an end, and the reader
    exits) or the reader has gone (a broken pipe).
    """
    told = 0
    with contextlib.suppress(ArrivalStopped, BrokenPipeError, ValueError), stream:
        while True:
            size, ended = growth.wait_for(told + 1)
            if ended:
                stream.write(b"end %d\n" % size)
                return
            stream.write(b"%d\n" % size)
            stream.flush()
            told = size


class _Told:
    """The reader process's ``Growth``: the sizes the importing process writes to its stdin."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._size = 0
        self._ended = False

    def wait_for(self, size: int | None) -> tuple[int, bool]:
        while not self._ended and (size is None or self._size < size):
            line = self._stream.readline()
            if not line.endswith(b"\n"):
                raise ArrivalStopped("the upload stopped before the export's end")
            word = line.split()
            self._ended = word[0] == b"end"
            self._size = int(word[-1])
        return self._size, self._ended


def _send(stream: IO[bytes], item: Any) -> None:
    """One frame: its length, then the item, marshalled when it is a list of messages (plain
    values, twice as fast to write as a pickle), pickled otherwise (chats, warnings)."""
    if item[0] == _MESSAGES:
        body = _MARSHALLED + marshal.dumps(item)
    else:
        body = _PICKLED + pickle.dumps(item, pickle.HIGHEST_PROTOCOL)
    stream.write(_FRAME.pack(len(body)))
    stream.write(body)


def _decode(frame: bytes) -> Any:
    body = memoryview(frame)[1:]
    return marshal.loads(body) if frame[:1] == _MARSHALLED else pickle.loads(body)


def _serve(spec: str, out: IO[bytes]) -> None:
    """The reader process: every record of the export onto ``out``, then an end mark."""
    fields = json.loads(spec)
    source = ExportSource(
        Path(fields["json_path"]),
        Path(fields["root"]),
        int(fields["size"]),
        fields["label"],
        _Told(sys.stdin.buffer) if fields["arriving"] else None,
    )
    try:
        for record in _in_process(source):
            _send(out, (_MESSAGES if isinstance(record, list) else _RECORD, record))
    except MalformedExport as error:
        _send(out, (_MALFORMED, error.message, error.hint, error.metadata))
    else:
        _send(out, (_END,))
    out.flush()


if __name__ == "__main__":
    # The records go out on the pipe that stdout was; anything else printed goes to stderr.
    _out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        _serve(sys.argv[1], _out)
    except (BrokenPipeError, ArrivalStopped):
        # The importing process stopped reading, or the upload stopped before the export's
        # end: nothing to tell it.
        os._exit(1)
