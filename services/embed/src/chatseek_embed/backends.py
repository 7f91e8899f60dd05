"""The backend factory: an ``Embedder`` and a ``Reranker`` of the configured kind.

Owns ``make_backends`` (and ``make_embedder`` / ``make_reranker``); the contracts they return
live in ``contract``. Invariants:
* Imports run one way: this factory imports the backends (``local``, ``bundled``, ``tei``),
  they import ``runtime`` and ``contract``, ``runtime`` imports ``contract``; none imports back.
* Nothing here imports torch: the local backend is imported only when asked for.
"""

from __future__ import annotations

import logging
from pathlib import Path

from chatseek_core.errors import InvalidArgument
from chatseek_embed.contract import Embedder, Reranker

__all__ = ["BACKEND_KINDS", "make_backends", "make_embedder", "make_reranker"]

log = logging.getLogger(__name__)

BACKEND_KINDS = ("local", "tei", "fake")


def make_embedder(
    kind: str,
    *,
    model: str,
    device: str | None = None,
    precision: str = "auto",
    max_seq_length: int | None = None,
    tei_url: str | None = None,
    allow_remote: bool = False,
    cache_dir: Path | None = None,
) -> Embedder:
    """Build the embedder of one backend kind.

    Args:
        kind: ``local`` (in this process: the bundled model, or sentence-transformers), ``tei``
            (a text-embeddings-inference server) or ``fake`` (``chatseek_core.fakes``; never
            chosen implicitly).
        model: ``registry.BUNDLED_E5`` (the default), a hub id or a local directory
            (``local`` only).
        device, precision, max_seq_length, cache_dir: see ``local.load_local_embedder``.
        tei_url: the TEI server (``tei`` only).
        allow_remote: permit a TEI server that is not on loopback.

    Raises:
        InvalidArgument: unknown kind, or ``tei`` without a URL.
        ModelNotFound, ModelUnavailable, ConfirmationRequired: from the backend.
    """
    if kind == "fake":
        from chatseek_core.fakes import FakeEmbedder

        return FakeEmbedder()
    if kind == "local":
        from chatseek_embed.registry import BUNDLED_E5

        if model == BUNDLED_E5:
            from chatseek_embed.bundled import load_bundled_embedder

            if max_seq_length is not None:
                raise InvalidArgument(
                    f"{BUNDLED_E5} splits long texts into 512-token windows itself",
                    hint="leave max_seq_length unset for the bundled model",
                    metadata={"field": "max_seq_length"},
                )
            return load_bundled_embedder(device=device, precision=precision)
        from chatseek_embed.local import load_local_embedder

        return load_local_embedder(
            model,
            device=device,
            precision=precision,
            max_seq_length=max_seq_length,
            cache_dir=cache_dir,
        )
    if kind == "tei":
        if not tei_url:
            raise InvalidArgument(
                "the tei backend needs a server URL",
                hint="set the TEI URL, e.g. http://127.0.0.1:8080",
                metadata={"field": "tei_url"},
            )
        from chatseek_embed.tei import TeiEmbedder

        return TeiEmbedder(tei_url, allow_remote=allow_remote)
    raise _unknown_kind(kind)


def make_reranker(
    kind: str,
    *,
    model: str | None,
    device: str | None = None,
    precision: str = "auto",
    max_seq_length: int | None = None,
    tei_rerank_url: str | None = None,
    allow_remote: bool = False,
    cache_dir: Path | None = None,
) -> Reranker | None:
    """Build the reranker of one backend kind, or None when none is configured.

    ``local`` without ``model`` and ``tei`` without ``tei_rerank_url`` give None (fusion then
    keeps the fused order). The arguments mean what they mean for ``make_embedder``.

    Raises:
        InvalidArgument: unknown kind.
        ModelNotFound, ModelUnavailable, ConfirmationRequired: from the backend.
    """
    if kind == "fake":
        from chatseek_core.fakes import FakeReranker

        return FakeReranker()
    if kind == "local":
        if not model:
            return None
        from chatseek_embed.local import load_local_reranker

        return load_local_reranker(
            model,
            device=device,
            precision=precision,
            max_seq_length=max_seq_length,
            cache_dir=cache_dir,
        )
    if kind == "tei":
        if not tei_rerank_url:
            return None
        from chatseek_embed.tei import TeiReranker

        return TeiReranker(tei_rerank_url, allow_remote=allow_remote)
    raise _unknown_kind(kind)


def make_backends(
    kind: str,
    *,
    embed_model: str,
    rerank_model: str | None,
    device: str | None = None,
    precision: str = "auto",
    max_seq_length: int | None = None,
    tei_url: str | None = None,
    tei_rerank_url: str | None = None,
    allow_remote: bool = False,
    cache_dir: Path | None = None,
    rerank_max_seq_length: int | None = None,
) -> tuple[Embedder, Reranker | None]:
    """Build the embedder and the optional reranker for one backend kind.

    A servicer that wants to keep serving embeddings when only the reranker fails to load should
    call ``make_embedder`` and ``make_reranker`` separately; this function raises on either.

    Raises:
        see ``make_embedder`` and ``make_reranker``.
    """
    embedder = make_embedder(
        kind,
        model=embed_model,
        device=device,
        precision=precision,
        max_seq_length=max_seq_length,
        tei_url=tei_url,
        allow_remote=allow_remote,
        cache_dir=cache_dir,
    )
    reranker = make_reranker(
        kind,
        model=rerank_model,
        device=device,
        precision=precision,
        max_seq_length=rerank_max_seq_length,
        tei_rerank_url=tei_rerank_url,
        allow_remote=allow_remote,
        cache_dir=cache_dir,
    )
    log.info(
        "backends ready: kind=%s embed=%s reranker=%s",
        kind,
        embedder.identity.name,
        reranker.identity.name if reranker is not None else "none",
    )
    return embedder, reranker


def _unknown_kind(kind: str) -> InvalidArgument:
    return InvalidArgument(
        f"unknown embedding backend {kind!r}",
        hint="choose one of: " + ", ".join(BACKEND_KINDS),
        metadata={"field": "kind"},
        candidates=list(BACKEND_KINDS),
    )
