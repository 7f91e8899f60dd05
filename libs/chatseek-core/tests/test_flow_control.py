"""A stream is held to a fixed receive window: a sender gets only a few MiB past its reader.

An upload (``chatseek import``: CLI → gateway → ingest) arrives at over 100 MB/s while the
receiving service's event loop shares the interpreter with an import. gRPC's default flow
control sizes each connection's window from its bandwidth-delay estimate, which grows while a
reader keeps up; when the reader then fell behind, a 1M-message upload waited in the gateway's
and ingest's memory by the hundred MiB (``bench/PROFILES.md``, "An upload held to its window").
With the house options every server and channel announce ``RECEIVE_WINDOW_BYTES`` and no more.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from typing import Any

from chatseek.common.v1 import common_pb2
from chatseek.ingest.v1 import ingest_service_pb2 as pb
from chatseek.ingest.v1 import ingest_service_pb2_grpc
from chatseek_core.client import RECEIVE_WINDOW_BYTES
from chatseek_core.runner import Running
from chatseek_core.server import build_server
from chatseek_testing.services import serving

CHUNK = 1024 * 1024
CHUNKS = 400
# The reader keeps up for this many chunks, as ingest does while an upload begins, so that the
# default flow control would have grown its window, then stops reading for PAUSE_S.
READ_AT_ONCE = 300
PAUSE_S = 1.5
# Past the receiver's window the sending side holds the message gRPC is writing and the next
# ones it has taken from the generator: with the house window the sender got 3 to 8 chunks past
# the reader. With gRPC's own flow control it got 9 to 36 in about half of such runs (the window
# does not grow on every connection of an idle machine), and hundreds under an import's load.
SLACK_CHUNKS = 6
# The default window is per connection and grows from stream to stream: uploads one after another.
UPLOADS = 3

# The sender runs in a process of its own, as the CLI does, and prints each chunk it hands over.
_SENDER = """
import sys
from chatseek.ingest.v1 import ingest_service_pb2 as pb
from chatseek.ingest.v1 import ingest_service_pb2_grpc
from chatseek_core.client import sync_channel

addr, chunks, size, uploads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = b"x" * size
sent = 0

def requests():
    global sent
    for _ in range(chunks):
        sent += 1
        print(sent, flush=True)
        yield pb.ImportExportRequest(chunk=pb.FileChunk(path="result.json", data=data))

stub = ingest_service_pb2_grpc.IngestServiceStub(sync_channel(addr))
for _ in range(uploads):
    for _ in stub.ImportExport(requests(), timeout=60):
        pass
"""


class _PausingReader(ingest_service_pb2_grpc.IngestServiceServicer):
    """In each upload reads ``READ_AT_ONCE`` chunks, waits ``PAUSE_S``, notes how far the
    sender got, and reads on."""

    def __init__(self, sent: list[int]) -> None:
        self.sent = sent
        self.read = 0
        self.ahead: list[int] = []

    async def ImportExport(
        self, request_iterator: AsyncIterator[pb.ImportExportRequest], context: Any
    ) -> AsyncIterator[pb.ImportExportResponse]:
        read = 0
        async for _ in request_iterator:
            read += 1
            self.read += 1
            if read == READ_AT_ONCE:
                await asyncio.sleep(PAUSE_S)
                self.ahead.append(self.sent[0] - self.read)
        yield pb.ImportExportResponse(event=common_pb2.OperationEvent())


async def test_a_sender_gets_no_further_than_the_window_past_a_reader_that_stops() -> None:
    sent = [0]
    reader = _PausingReader(sent)

    def register(server: Any) -> list[str]:
        ingest_service_pb2_grpc.add_IngestServiceServicer_to_server(reader, server)
        return ["chatseek.ingest.v1.IngestService"]

    handle = build_server(service="ingest", listen="127.0.0.1:0", register=register)
    async with serving(Running(handle=handle)) as addr:
        sender = subprocess.Popen(
            [sys.executable, "-c", _SENDER, addr, str(CHUNKS), str(CHUNK), str(UPLOADS)],
            stdout=subprocess.PIPE,
            text=True,
        )

        def count() -> None:
            assert sender.stdout is not None
            for line in sender.stdout:
                sent[0] = int(line)

        counting = threading.Thread(target=count)
        counting.start()
        code = await asyncio.to_thread(sender.wait, 60)
        await asyncio.to_thread(counting.join)

    assert code == 0
    assert reader.read == UPLOADS * CHUNKS  # every chunk arrived once the reader went on
    assert len(reader.ahead) == UPLOADS
    assert max(reader.ahead) <= RECEIVE_WINDOW_BYTES // CHUNK + SLACK_CHUNKS, (
        f"the sender got {reader.ahead} chunks of 1 MiB past a reader that had stopped"
    )
