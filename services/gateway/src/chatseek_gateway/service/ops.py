"""The gateway's ``OpsService``: status, verify (with repair), backup, and the indexes and
models (embed, embed status, reindex, models).

``Status`` fans out over every service's health and status; ``Verify`` checks the stores and,
with repair, re-cuts, re-indexes or re-embeds what failed; ``Embed`` and ``Reindex`` pass the
downstream operation's progress through.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2

from chatseek.common.v1 import common_pb2
from chatseek.embed.v1 import embed_service_pb2 as embed_pb
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek.gateway.v1 import ops_service_pb2_grpc
from chatseek.ingest.v1 import ingest_service_pb2 as ingest_pb
from chatseek.lexical.v1 import lexical_service_pb2 as lexical_pb
from chatseek.unitize.v1 import unitize_service_pb2 as unitize_pb
from chatseek.vector.v1 import vector_service_pb2 as vector_pb
from chatseek_core.aio import to_thread
from chatseek_core.client import call, decode_error
from chatseek_core.errors import ChatseekError, InvalidArgument
from chatseek_core.operations import operation_progress
from chatseek_core.settings import SERVICES
from chatseek_core.version import VERSION
from chatseek_core.wire_json import from_json
from chatseek_gateway.deps import Deps
from chatseek_gateway.peers import Peers
from chatseek_gateway.service.common import Ctx, account_of, chat_ids, forward_events, reach
from chatseek_gateway.shapes import Evented
from chatseek_gateway.verify import backup, verify_store

__all__ = ["OpsServicer"]

STATUS_TIMEOUT_S = 3.0
EMBED_STATUS_TIMEOUT_S = 30.0
LONG_TIMEOUT_S = 24 * 3600.0
MODELS_TIMEOUT_S = 3600.0
# The services that answer GetStatus with a ServiceStatus of their store.
STORE_OWNERS = ("ingest", "unitize", "lexical", "vector")
UNIT_CHECKS = ("every stored message is in a unit (or announced and pending)",)
WORD_CHECKS = (
    "every unit is in the word index (or pending)",
    "every stored message is in the message word index (or pending)",
)
VECTOR_CHECKS = ("every unit has a vector of the current space (or is queued)",)


async def _drain(stream: AsyncIterable[object], peer: str) -> None:
    try:
        async for _ in stream:
            pass
    except grpc.aio.AioRpcError as err:
        raise decode_error(err, peer) from None


async def _owner_status(peers: Peers, name: str) -> common_pb2.ServiceStatus:
    """The ``GetStatus`` answer of ``name``, one of ``STORE_OWNERS``.

    Raises:
        ChatseekError: the decoded failure of ``name``.
    """
    timeout = STATUS_TIMEOUT_S
    if name == "ingest":
        ingest = await call(
            peers.ingest.GetStatus, ingest_pb.GetStatusRequest(), timeout=timeout, peer=name
        )
        return ingest.status
    if name == "unitize":
        unitize = await call(
            peers.unitize.GetStatus, unitize_pb.GetStatusRequest(), timeout=timeout, peer=name
        )
        return unitize.status
    if name == "lexical":
        lexical = await call(
            peers.lexical.GetStatus, lexical_pb.GetStatusRequest(), timeout=timeout, peer=name
        )
        return lexical.status
    vector = await call(
        peers.vector.GetStatus, vector_pb.GetStatusRequest(), timeout=timeout, peer=name
    )
    return vector.status


async def _service_status(deps: Deps, name: str) -> pb.ServiceReport:
    """One service's health, version, schema and feed lag (``health`` DOWN when unreachable)."""
    entry = pb.ServiceReport(name=name, address=deps.settings.addr(name), health="DOWN")
    entry.none.SetInParent()
    if name == "gateway":
        entry.health, entry.version = "SERVING", VERSION
        return entry
    try:
        health = await call(
            deps.peers.health[name].Check,
            health_pb2.HealthCheckRequest(service=""),
            timeout=STATUS_TIMEOUT_S,
            peer=name,
        )
        entry.health = health_pb2.HealthCheckResponse.ServingStatus.Name(health.status)
    except ChatseekError:
        return entry
    if name not in STORE_OWNERS and name != "embed":
        entry.version = VERSION
        return entry
    try:
        if name == "embed":
            models = await call(
                deps.peers.embed.ListModels, embed_pb.ListModelsRequest(), timeout=STATUS_TIMEOUT_S
            )
            entry.version = VERSION
            entry.embed.embedder.CopyFrom(models.embedder)
            if models.HasField("reranker"):
                entry.embed.reranker.CopyFrom(models.reranker)
            entry.embed.reranker_error = models.reranker_error
            return entry
        status = await _owner_status(deps.peers, name)
    except ChatseekError as exc:
        entry.error = exc.reason
        entry.failure.CopyFrom(pb.ServiceFailure(message=exc.message, hint=exc.hint))
        return entry
    entry.version, entry.schema_version = status.version, status.schema_version
    entry.feed_lag.update(status.feed_lag)
    which = status.WhichOneof("details")
    if which is not None:
        getattr(entry, which).CopyFrom(getattr(status, which))
    return entry


class OpsServicer(ops_service_pb2_grpc.OpsServiceServicer):
    """Operations over the whole stack."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    # --- status, verify, backup ---

    async def Status(
        self, request: pb.StatusRequest, context: Ctx[pb.StatusRequest, pb.StatusResponse]
    ) -> pb.StatusResponse:
        entries = await asyncio.gather(*(_service_status(self._deps, name) for name in SERVICES))
        return pb.StatusResponse(result=pb.StatusResult(services=entries))

    async def Verify(
        self, request: pb.VerifyRequest, context: Ctx[pb.VerifyRequest, pb.VerifyResponse]
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
                    peers.unitize.Recut(unitize_pb.RecutRequest(), timeout=LONG_TIMEOUT_S),
                    "unitize",
                )
                repaired.append("unitize: re-cut every chat")
            if failed & set(WORD_CHECKS) or "no orphan rows in derived tables" in failed:
                yield pb.VerifyResponse(event=operation_progress("repair", 2, 3, "re-indexing"))
                await _drain(
                    peers.lexical.Reindex(lexical_pb.ReindexRequest(), timeout=LONG_TIMEOUT_S),
                    "lexical",
                )
                repaired.append("lexical: rebuilt the word indexes")
            if failed & set(VECTOR_CHECKS) or "no orphan rows in derived tables" in failed:
                yield pb.VerifyResponse(event=operation_progress("repair", 3, 3, "re-embedding"))
                await _drain(
                    peers.vector.IndexUnits(
                        vector_pb.IndexUnitsRequest(confirmed=True), timeout=LONG_TIMEOUT_S
                    ),
                    "vector",
                )
                repaired.append("vector: embedded what was missing")
            report = await to_thread(verify_store, data_dir)
            report["repaired"] = repaired
        typed = from_json(report, common_pb2.VerifyReport())
        yield pb.VerifyResponse(event=common_pb2.OperationEvent(verify=typed))

    async def Backup(
        self, request: pb.BackupRequest, context: Ctx[pb.BackupRequest, pb.BackupResponse]
    ) -> pb.BackupResponse:
        if not request.directory:
            raise InvalidArgument(
                "name a directory to back up into", metadata={"field": "directory"}
            )
        result = await to_thread(backup, self._deps.settings.data_dir, Path(request.directory))
        return pb.BackupResponse(result=from_json(result, pb.BackupResult()))

    # --- indexes and models ---

    async def Embed(
        self, request: pb.EmbedRequest, context: Ctx[pb.EmbedRequest, pb.EmbedResponse]
    ) -> AsyncIterator[pb.EmbedResponse]:
        account = account_of(self._deps, request.account)
        ids = await chat_ids(self._deps, account, list(request.chats))
        await reach(self._deps, "vector")
        stream = self._deps.peers.vector.IndexUnits(
            vector_pb.IndexUnitsRequest(
                account=account, chat_ids=ids, reembed=request.reembed, confirmed=request.yes
            ),
            timeout=LONG_TIMEOUT_S,
        )
        async for event in forward_events(stream, lambda e: pb.EmbedResponse(event=e), "vector"):
            yield event

    async def EmbedStatus(
        self,
        request: pb.EmbedStatusRequest,
        context: Ctx[pb.EmbedStatusRequest, pb.EmbedStatusResponse],
    ) -> pb.EmbedStatusResponse:
        reply = await call(
            self._deps.peers.vector.EmbedStatus,
            vector_pb.EmbedStatusRequest(account=account_of(self._deps, request.account)),
            timeout=EMBED_STATUS_TIMEOUT_S,
            idempotent=True,
            peer="vector",
        )
        return pb.EmbedStatusResponse(result=reply.result)

    async def Reindex(
        self, request: pb.ReindexRequest, context: Ctx[pb.ReindexRequest, pb.ReindexResponse]
    ) -> AsyncIterator[pb.ReindexResponse]:
        if request.target not in ("lexical", "vector"):
            raise InvalidArgument(
                f"reindex target {request.target!r} is not lexical or vector",
                metadata={"field": "target"},
            )
        await reach(self._deps, request.target)
        stream: AsyncIterable[Evented]
        if request.target == "lexical":
            stream = self._deps.peers.lexical.Reindex(
                lexical_pb.ReindexRequest(), timeout=LONG_TIMEOUT_S
            )
        else:
            stream = self._deps.peers.vector.IndexUnits(
                vector_pb.IndexUnitsRequest(reembed=True, confirmed=True), timeout=LONG_TIMEOUT_S
            )
        async for event in forward_events(
            stream, lambda e: pb.ReindexResponse(event=e), request.target
        ):
            yield event

    async def Models(
        self, request: pb.ModelsRequest, context: Ctx[pb.ModelsRequest, pb.ModelsResponse]
    ) -> pb.ModelsResponse:
        embed = self._deps.peers.embed
        if request.action == "list":
            known = await call(
                embed.KnownModels, embed_pb.KnownModelsRequest(), idempotent=True, peer="embed"
            )
            return pb.ModelsResponse(listed=known.result)
        if request.action == "download":
            if len(request.names) != 1:
                raise InvalidArgument("download takes one model name", metadata={"field": "names"})
            downloaded = await call(
                embed.DownloadModel,
                embed_pb.DownloadModelRequest(name=request.names[0]),
                timeout=MODELS_TIMEOUT_S,
                peer="embed",
            )
            return pb.ModelsResponse(downloaded=downloaded.result)
        if request.action == "verify":
            verified = await call(
                embed.VerifyModels,
                embed_pb.VerifyModelsRequest(names=list(request.names)),
                timeout=MODELS_TIMEOUT_S,
                idempotent=True,
                peer="embed",
            )
            return pb.ModelsResponse(verified=verified.result)
        raise InvalidArgument(
            f"models action {request.action!r} is not list, download or verify",
            metadata={"field": "action"},
        )
