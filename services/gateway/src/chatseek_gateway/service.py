"""The gateway servicer: the CLI's facade over the downstream services, one mixin per area."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatseek.gateway.v1 import gateway_service_pb2_grpc
from chatseek_gateway.facade.archive import ArchiveFacade
from chatseek_gateway.facade.conversations import ConversationsFacade
from chatseek_gateway.facade.indexes import IndexesFacade
from chatseek_gateway.facade.messages import MessagesFacade
from chatseek_gateway.facade.ops import OpsFacade
from chatseek_gateway.facade.readers import ReadersFacade
from chatseek_gateway.facade.search import SearchFacade
from chatseek_gateway.facade.status import StatusFacade

if TYPE_CHECKING:
    from chatseek_gateway.server import Deps

__all__ = ["GatewayServicer"]


class GatewayServicer(
    StatusFacade,
    ArchiveFacade,
    SearchFacade,
    MessagesFacade,
    OpsFacade,
    ReadersFacade,
    IndexesFacade,
    ConversationsFacade,
    gateway_service_pb2_grpc.GatewayServiceServicer,
):
    """Thin adapter: gateway request in, downstream call(s), JSON document out."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
