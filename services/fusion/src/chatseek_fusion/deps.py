"""What the fusion servicer is given: read-only views of the stores and stubs to its peers."""

from __future__ import annotations

from dataclasses import dataclass

from chatseek.ingest.v1 import ingest_service_pb2_grpc
from chatseek_core import config as config_file
from chatseek_core import db
from chatseek_core.settings import Settings
from chatseek_fusion.signals import GrpcSignals

__all__ = ["Deps"]


@dataclass
class Deps:
    """What the fusion servicer needs: read-only views of the stores."""

    settings: Settings
    pool: db.ThreadConnections
    signals: GrpcSignals
    ingest: ingest_service_pb2_grpc.IngestServiceAsyncStub
    config: config_file.SearchConfig
