"""The gateway's store operations: ``Verify`` (with repair) and ``Backup``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc

from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek.lexical.v1 import lexical_service_pb2 as lexical_pb
from chatseek.unitize.v1 import unitize_service_pb2 as unitize_pb
from chatseek.vector.v1 import vector_service_pb2 as vector_pb
from chatseek_core.aio import to_thread
from chatseek_core.client import decode_error
from chatseek_core.errors import InvalidArgument
from chatseek_core.proto_json import document, operation_progress, operation_result
from chatseek_gateway.facade.base import Ctx, FacadeBase
from chatseek_gateway.verify import backup, verify_store

__all__ = ["OpsFacade"]

REPAIR_TIMEOUT_S = 24 * 3600.0
UNIT_CHECKS = ("every stored message is in a unit (or announced and pending)",)
WORD_CHECKS = (
    "every unit is in the word index (or pending)",
    "every stored message is in the message word index (or pending)",
)
VECTOR_CHECKS = ("every unit has a vector of the current space (or is queued)",)


async def _drain(stream: Any, peer: str) -> None:
    try:
        async for _ in stream:
            pass
    except grpc.aio.AioRpcError as err:
        raise decode_error(err, peer) from None


class OpsFacade(FacadeBase):
    """``Verify`` and ``Backup``."""

    async def Verify(
        self, request: pb.VerifyRequest, context: Ctx
    ) -> AsyncIterator[pb.VerifyResponse]:
        data_dir = self._deps.settings.data_dir
        yield pb.VerifyResponse(event=operation_progress("verify", 0, 0, "checking"))
        report = await to_thread(verify_store, data_dir)
        if request.repair and not report["ok"]:
            failed = {f["check"] for f in report["findings"] if not f["ok"]}
            peers = self._deps.peers
            repaired: list[str] = []
            if failed & set(UNIT_CHECKS) or "no orphan rows in derived tables" in failed:
                yield pb.VerifyResponse(event=operation_progress("repair", 1, 3, "re-cutting"))
                await _drain(
                    peers.unitize.Recut(unitize_pb.RecutRequest(), timeout=REPAIR_TIMEOUT_S),
                    "unitize",
                )
                repaired.append("unitize: re-cut every chat")
            if failed & set(WORD_CHECKS) or "no orphan rows in derived tables" in failed:
                yield pb.VerifyResponse(event=operation_progress("repair", 2, 3, "re-indexing"))
                await _drain(
                    peers.lexical.Reindex(lexical_pb.ReindexRequest(), timeout=REPAIR_TIMEOUT_S),
                    "lexical",
                )
                repaired.append("lexical: rebuilt the word indexes")
            if failed & set(VECTOR_CHECKS) or "no orphan rows in derived tables" in failed:
                yield pb.VerifyResponse(event=operation_progress("repair", 3, 3, "re-embedding"))
                await _drain(
                    peers.vector.IndexUnits(
                        vector_pb.IndexUnitsRequest(confirmed=True), timeout=REPAIR_TIMEOUT_S
                    ),
                    "vector",
                )
                repaired.append("vector: embedded what was missing")
            report = await to_thread(verify_store, data_dir)
            report["repaired"] = repaired
        yield pb.VerifyResponse(event=operation_result(report))

    async def Backup(self, request: pb.BackupRequest, context: Ctx) -> pb.BackupResponse:
        if not request.directory:
            raise InvalidArgument(
                "name a directory to back up into", metadata={"field": "directory"}
            )
        result = await to_thread(backup, self._deps.settings.data_dir, Path(request.directory))
        return pb.BackupResponse(result=document(result))
