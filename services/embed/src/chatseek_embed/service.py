"""The embed servicer: proto in, backend call off the event loop, proto out."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import grpc
import numpy as np

from chatseek.embed.v1 import embed_service_pb2 as pb
from chatseek.embed.v1 import embed_service_pb2_grpc
from chatseek_core.aio import to_thread
from chatseek_core.errors import InvalidArgument, ModelUnavailable
from chatseek_embed.backends import IdentityLike, check_query, check_texts

if TYPE_CHECKING:
    from chatseek_embed.server import Deps

__all__ = ["EmbedServicer"]

Ctx = grpc.aio.ServicerContext[Any, Any]
# One inference at a time per process: the model is not re-entrant and the CPU is the limit.
MAX_PARALLEL_INFERENCE = 1
ROLES = {pb.ROLE_QUERY: "query", pb.ROLE_PASSAGE: "passage"}


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

    async def Embed(self, request: pb.EmbedRequest, context: Ctx) -> pb.EmbedResponse:
        role = ROLES.get(request.role)
        if role is None:
            raise InvalidArgument(
                "role must be ROLE_QUERY or ROLE_PASSAGE", metadata={"field": "role"}
            )
        texts = check_texts(list(request.texts))
        embedder = self._deps.embedder
        async with self._gate:
            vectors = await to_thread(embedder.embed, texts, role=role)  # type: ignore[arg-type]
        matrix = np.ascontiguousarray(vectors, dtype="<f4")
        return pb.EmbedResponse(
            model=self._identity(embedder.identity),
            vectors=matrix.tobytes(),
            dim=int(matrix.shape[1]) if matrix.ndim == 2 else 0,
        )

    async def Rerank(self, request: pb.RerankRequest, context: Ctx) -> pb.RerankResponse:
        reranker = self._deps.reranker
        if reranker is None:
            raise ModelUnavailable(
                f"no reranker: {self._deps.reranker_error or 'none configured'}",
                hint="set CHATSEEK_RERANK_MODEL to an installed cross-encoder",
            )
        query = check_query(request.query)
        texts = check_texts(list(request.texts))
        async with self._gate:
            scores = await to_thread(reranker.rerank, query, texts)
        return pb.RerankResponse(model=self._identity(reranker.identity), scores=scores)

    async def ListModels(
        self, request: pb.ListModelsRequest, context: Ctx
    ) -> pb.ListModelsResponse:
        response = pb.ListModelsResponse(
            embedder=self._identity(self._deps.embedder.identity),
            reranker_error=self._deps.reranker_error,
        )
        if self._deps.reranker is not None:
            response.reranker.CopyFrom(self._identity(self._deps.reranker.identity))
        return response
