"""The embed servicer: proto in, backend call off the event loop, proto out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import grpc
import numpy as np

from chatseek.embed.v1 import embed_service_pb2 as pb
from chatseek.embed.v1 import embed_service_pb2_grpc
from chatseek_core import memory
from chatseek_core.aio import run_in, to_thread
from chatseek_core.errors import ChatseekError, InvalidArgument, ModelUnavailable
from chatseek_core.wire_json import from_json
from chatseek_embed import registry
from chatseek_embed.contract import Embedder, IdentityLike, check_query, check_texts
from chatseek_embed.deps import Deps

__all__ = ["EmbedServicer"]

Ctx = grpc.aio.ServicerContext
T = TypeVar("T")
# One inference at a time per process: the model is not re-entrant and the CPU is the limit.
MAX_PARALLEL_INFERENCE = 1
ROLES = {pb.ROLE_QUERY: "query", pb.ROLE_PASSAGE: "passage"}
IDLE_RELEASE_S = 5.0
"""After this long without an inference the heap's free pages go back to the OS: the process
keeps glibc's sliding thresholds (``__main__``), so a burst of batches leaves its activations
in the heap, 250-300 MiB more than the model after 128 unit texts. Giving them back takes 7 ms;
the first batch after it faults them in again."""


def _device(backend: str) -> str:
    if backend == "tei":
        return "remote"
    if backend == "fake":
        return "cpu"
    import torch

    if torch.backends.mps.is_available():
        return "mps"
    return "cuda" if torch.cuda.is_available() else "cpu"


class EmbedServicer(embed_service_pb2_grpc.EmbedServiceServicer):
    """Thin adapter over the configured backends."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._gate = asyncio.Semaphore(MAX_PARALLEL_INFERENCE)
        self._device = _device(deps.backend)
        self._busy = 0
        self._idle: asyncio.TimerHandle | None = None
        self._release: asyncio.Task[None] | None = None

    async def _infer(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``func`` on the inference thread, one call at a time; once none has run for
        ``IDLE_RELEASE_S``, the memory it freed goes back to the OS."""
        self._busy += 1
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        try:
            async with self._gate:
                return await run_in(self._deps.inference, func, *args, **kwargs)
        finally:
            self._busy -= 1
            if not self._busy:
                loop = asyncio.get_running_loop()
                self._idle = loop.call_later(IDLE_RELEASE_S, self._give_back)

    def _give_back(self) -> None:
        self._idle = None
        self._release = asyncio.create_task(to_thread(memory.release, collect=False))

    def _identity(self, identity: IdentityLike) -> pb.ModelIdentity:
        return pb.ModelIdentity(
            name=identity.name,
            revision=identity.revision,
            dim=identity.dim,
            max_seq_length=identity.max_seq_length,
            normalized=identity.normalized,
            kind=identity.kind,
            backend=self._deps.backend,
            device=self._device,
        )

    def _embedder(self) -> Embedder:
        """The loaded embedder, or the error that kept it from loading."""
        embedder = self._deps.embedder
        if embedder is not None:
            return embedder
        cause = self._deps.embedder_error
        if cause is None:
            raise ModelUnavailable("no embedder is configured")
        raise type(cause)(
            f"no embedder: {cause.message}",
            hint=cause.hint,
            metadata=cause.metadata,
            candidates=cause.candidates,
        )

    async def Embed(
        self, request: pb.EmbedRequest, context: Ctx[pb.EmbedRequest, pb.EmbedResponse]
    ) -> pb.EmbedResponse:
        embedder = self._embedder()
        role = ROLES.get(request.role)
        if role is None:
            raise InvalidArgument(
                "role must be ROLE_QUERY or ROLE_PASSAGE", metadata={"field": "role"}
            )
        texts = check_texts(list(request.texts))
        vectors = await self._infer(embedder.embed, texts, role=role)
        matrix = np.ascontiguousarray(vectors, dtype="<f4")
        return pb.EmbedResponse(
            model=self._identity(embedder.identity),
            vectors=matrix.tobytes(),
            dim=int(matrix.shape[1]) if matrix.ndim == 2 else 0,
        )

    async def Rerank(
        self, request: pb.RerankRequest, context: Ctx[pb.RerankRequest, pb.RerankResponse]
    ) -> pb.RerankResponse:
        reranker = self._deps.reranker
        if reranker is None:
            configured = bool(self._deps.reranker_error)
            raise ModelUnavailable(
                f"no reranker: {self._deps.reranker_error or 'none configured'}",
                hint="set CHATSEEK_RERANK_MODEL to an installed cross-encoder",
                metadata={"configured": "true" if configured else "false"},
            )
        query = check_query(request.query)
        texts = check_texts(list(request.texts))
        scores = await self._infer(reranker.rerank, query, texts)
        return pb.RerankResponse(model=self._identity(reranker.identity), scores=scores)

    async def ListModels(
        self,
        request: pb.ListModelsRequest,
        context: Ctx[pb.ListModelsRequest, pb.ListModelsResponse],
    ) -> pb.ListModelsResponse:
        response = pb.ListModelsResponse(
            embedder=self._identity(self._embedder().identity),
            reranker_error=self._deps.reranker_error,
        )
        if self._deps.reranker is not None:
            response.reranker.CopyFrom(self._identity(self._deps.reranker.identity))
        return response

    async def KnownModels(
        self,
        request: pb.KnownModelsRequest,
        context: Ctx[pb.KnownModelsRequest, pb.KnownModelsResponse],
    ) -> pb.KnownModelsResponse:
        def read() -> dict[str, Any]:
            defaults = {self._deps.settings.embed_model, self._deps.settings.rerank_model}
            models = []
            for spec in registry.list_models():
                try:
                    registry.resolve_model(spec.name)
                    cached = True
                except ChatseekError:
                    cached = False
                models.append(
                    {
                        "name": spec.name,
                        "kind": spec.kind,
                        "source": spec.source,
                        "revision": spec.revision,
                        "dim": spec.dim,
                        "max_seq_length": spec.max_seq_length,
                        "languages": spec.languages,
                        "note": spec.note,
                        "cached": cached,
                        "configured": spec.name in defaults,
                    }
                )
            return {"models": models}

        return pb.KnownModelsResponse(
            result=from_json(await to_thread(read), pb.KnownModelsResult())
        )

    async def DownloadModel(
        self,
        request: pb.DownloadModelRequest,
        context: Ctx[pb.DownloadModelRequest, pb.DownloadModelResponse],
    ) -> pb.DownloadModelResponse:
        if not request.name:
            raise InvalidArgument("name a model to download", metadata={"field": "name"})
        report = await to_thread(registry.download, request.name)
        return pb.DownloadModelResponse(result=from_json(_report(report), pb.ModelReport()))

    async def VerifyModels(
        self,
        request: pb.VerifyModelsRequest,
        context: Ctx[pb.VerifyModelsRequest, pb.VerifyModelsResponse],
    ) -> pb.VerifyModelsResponse:
        def run() -> dict[str, Any]:
            names = list(request.names)
            if not names:
                for spec in registry.list_models():
                    try:
                        registry.resolve_model(spec.name)
                    except ChatseekError:
                        continue
                    names.append(spec.name)
            return {"reports": [_report(registry.verify(name)) for name in names]}

        return pb.VerifyModelsResponse(
            result=from_json(await to_thread(run), pb.VerifyModelsResult())
        )


def _report(report: registry.VerifyReport) -> dict[str, Any]:
    return {
        "name": report.name,
        "directory": str(report.directory),
        "revision": report.revision,
        "identity": report.identity,
        "ok": report.ok,
        "fully_pinned": report.fully_pinned,
        "files": [{"path": f.path, "status": f.status} for f in report.files],
    }
