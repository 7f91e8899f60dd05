"""The gateway's ``Status``: a fan-out over every service's health and status."""

from __future__ import annotations

import asyncio
from typing import Any

from google.protobuf import json_format
from grpc_health.v1 import health_pb2

from chatseek.embed.v1 import embed_service_pb2 as embed_pb
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek.ingest.v1 import ingest_service_pb2 as ingest_pb
from chatseek.lexical.v1 import lexical_service_pb2 as lexical_pb
from chatseek.unitize.v1 import unitize_service_pb2 as unitize_pb
from chatseek.vector.v1 import vector_service_pb2 as vector_pb
from chatseek_core.client import call
from chatseek_core.errors import ChatseekError
from chatseek_core.proto_json import document, to_python
from chatseek_core.settings import SERVICES
from chatseek_core.version import VERSION
from chatseek_gateway.facade.base import Ctx, FacadeBase

__all__ = ["StatusFacade"]
STATUS_TIMEOUT_S = 3.0
STATUS_REQUESTS: dict[str, Any] = {
    "ingest": ingest_pb.GetStatusRequest,
    "unitize": unitize_pb.GetStatusRequest,
    "lexical": lexical_pb.GetStatusRequest,
    "vector": vector_pb.GetStatusRequest,
}


class StatusFacade(FacadeBase):
    """``Status``: every service's health, version, schema and feed lag."""

    async def _service_status(self, name: str) -> dict[str, Any]:
        deps = self._deps
        entry: dict[str, Any] = {
            "name": name,
            "address": deps.settings.addr(name),
            "health": "DOWN",
            "version": "",
            "schema_version": 0,
            "feed_lag": {},
            "details": {},
        }
        if name == "gateway":
            entry.update(health="SERVING", version=VERSION)
            return entry
        try:
            health = await call(
                deps.peers.health[name].Check,
                health_pb2.HealthCheckRequest(service=""),
                timeout=STATUS_TIMEOUT_S,
                peer=name,
            )
            entry["health"] = health_pb2.HealthCheckResponse.ServingStatus.Name(health.status)
        except ChatseekError:
            return entry
        if name not in STATUS_REQUESTS and name != "embed":
            entry["version"] = VERSION
            return entry
        stub = getattr(deps.peers, name)
        try:
            if name == "embed":
                models = await call(
                    stub.ListModels, embed_pb.ListModelsRequest(), timeout=STATUS_TIMEOUT_S
                )
                entry["version"] = VERSION
                entry["details"] = to_python(json_format.MessageToDict(models))
                return entry
            response = await call(
                stub.GetStatus, STATUS_REQUESTS[name](), timeout=STATUS_TIMEOUT_S, peer=name
            )
        except ChatseekError as exc:
            entry["error"] = exc.reason
            entry["details"] = {"message": exc.message, "hint": exc.hint}
            return entry
        status = response.status
        entry.update(
            version=status.version,
            schema_version=status.schema_version,
            feed_lag=dict(status.feed_lag),
            details=to_python(json_format.MessageToDict(status.details)),
        )
        return entry

    async def Status(self, request: pb.StatusRequest, context: Ctx) -> pb.StatusResponse:
        entries = await asyncio.gather(*(self._service_status(name) for name in SERVICES))
        return pb.StatusResponse(result=document({"services": list(entries)}))
