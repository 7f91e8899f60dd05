"""The fusion servicer: proto in, typed core call, proto out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc
from chatseek.fusion.v1 import fusion_service_pb2_grpc

if TYPE_CHECKING:
    from chatseek_fusion.server import Deps

__all__ = ["FusionServicer"]

Ctx = grpc.aio.ServicerContext[Any, Any]


class FusionServicer(fusion_service_pb2_grpc.FusionServiceServicer):
    """Thin adapter over the fusion core functions."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
