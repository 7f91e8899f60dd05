"""The ``ServiceStatus`` every service returns from ``GetStatus``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2

from chatseek.common.v1 import common_pb2
from chatseek_core.version import VERSION

__all__ = ["service_status"]


def service_status(
    service: str,
    *,
    schema_version: int = 0,
    feed_lag: Mapping[str, int] | None = None,
    details: Mapping[str, Any] | None = None,
) -> common_pb2.ServiceStatus:
    """Build the status message of ``service``."""
    struct = struct_pb2.Struct()
    if details:
        struct.update(dict(details))
    return common_pb2.ServiceStatus(
        service=service,
        version=VERSION,
        schema_version=schema_version,
        feed_lag=dict(feed_lag or {}),
        details=struct,
    )
