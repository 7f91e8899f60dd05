"""The gateway's readers: thread, context and evidence, forwarded to fusion."""

from __future__ import annotations

from chatseek.fusion.v1 import fusion_service_pb2 as fusion_pb
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek_core.client import call
from chatseek_gateway.facade.base import Ctx, FacadeBase

__all__ = ["ReadersFacade"]

READ_TIMEOUT_S = 30.0


class ReadersFacade(FacadeBase):
    """``Thread``, ``Context`` and ``Evidence``."""

    async def Thread(self, request: pb.ThreadRequest, context: Ctx) -> pb.ThreadResponse:
        reply = await call(
            self._deps.peers.fusion.Thread,
            fusion_pb.ThreadRequest(
                account=request.account, chat=request.chat, msg_id=request.msg_id
            ),
            timeout=READ_TIMEOUT_S,
            idempotent=True,
            peer="fusion",
        )
        return pb.ThreadResponse(result=reply.result)

    async def Context(self, request: pb.ContextRequest, context: Ctx) -> pb.ContextResponse:
        forward = fusion_pb.ContextRequest(
            account=request.account, chat=request.chat, msg_id=request.msg_id
        )
        if request.HasField("before"):
            forward.before = request.before
        if request.HasField("after"):
            forward.after = request.after
        reply = await call(
            self._deps.peers.fusion.Context,
            forward,
            timeout=READ_TIMEOUT_S,
            idempotent=True,
            peer="fusion",
        )
        return pb.ContextResponse(result=reply.result)

    async def Evidence(self, request: pb.EvidenceRequest, context: Ctx) -> pb.EvidenceResponse:
        reply = await call(
            self._deps.peers.fusion.Evidence,
            fusion_pb.EvidenceRequest(locators=list(request.locators), max_chars=request.max_chars),
            timeout=READ_TIMEOUT_S,
            idempotent=True,
            peer="fusion",
        )
        return pb.EvidenceResponse(result=reply.result)
