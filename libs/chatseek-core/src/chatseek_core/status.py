"""The ``ServiceStatus`` every service returns from ``GetStatus``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chatseek.common.v1 import common_pb2
from chatseek_core.version import VERSION
from chatseek_core.wire_json import from_json

__all__ = ["service_status"]

_MEMBERS = frozenset(
    f.name for f in common_pb2.ServiceStatus.DESCRIPTOR.oneofs_by_name["details"].fields
)


def service_status(
    service: str,
    *,
    schema_version: int = 0,
    feed_lag: Mapping[str, int] | None = None,
    details: Mapping[str, Any] | None = None,
) -> common_pb2.ServiceStatus:
    """Build the status message of ``service``.

    ``details`` fill the ``details`` member named ``service`` (``IngestStatusDetails`` for
    ingest, ...) by the ``wire_json`` rules.

    Raises:
        KeyError: details for a service without a member, or a key its message lacks.
    """
    status = common_pb2.ServiceStatus(
        service=service,
        version=VERSION,
        schema_version=schema_version,
        feed_lag=dict(feed_lag or {}),
    )
    if details is not None:
        if service not in _MEMBERS:
            raise KeyError(f"ServiceStatus has no details for {service!r}")
        member = getattr(status, service)
        member.SetInParent()
        from_json(details, member)
    return status
