"""What the vector servicer is given: ``vector.db`` (a pool of connections that write and one
that only answers queries), the embedding worker, the embed channel."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from chatseek_core import db
from chatseek_core.settings import Settings
from chatseek_vector.worker import Worker

__all__ = ["Deps"]


@dataclass
class Deps:
    """What the vector servicer needs.

    ``pool`` writes, on the worker's own threads; ``reads`` answers queries, read-only, with a
    small page cache on each query thread.
    """

    settings: Settings
    pool: db.ThreadConnections
    reads: db.ThreadConnections
    worker: Worker
    channel: grpc.aio.Channel
