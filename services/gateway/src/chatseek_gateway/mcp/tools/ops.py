"""The ops tool: the stack's health, from the gateway's ops service."""

from __future__ import annotations

from typing import Any, ClassVar

from chatseek_gateway.mcp.tools.calls import GatewayCalls, tool

__all__ = ["OpsTools"]


class OpsTools:
    """``status``.

    Args:
        calls: the gateway calls.
    """

    TOOLS: ClassVar[tuple[str, ...]] = ("status",)

    def __init__(self, calls: GatewayCalls) -> None:
        self._calls = calls

    @tool
    async def status(self) -> dict[str, Any]:
        """Every service's health, version, schema and feed lag (how far each index trails)."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        return await self._calls.document(lambda g: g.ops.Status, pb.StatusRequest())
