"""What the vector servicer is given: ``vector.db``, the embedding worker, the embed channel."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from chatseek_core import db
from chatseek_core.settings import Settings
from chatseek_vector.worker import Worker

__all__ = ["Deps"]


@dataclass
class Deps:
    """What the vector servicer needs."""

    settings: Settings
    pool: db.ThreadConnections
    worker: Worker
    channel: grpc.aio.Channel
