"""The embedding and reranking contracts, their request validation, and the backend factory.

Owns ``ModelIdentity``, the ``Embedder`` / ``Reranker`` protocols and ``make_backends``.
Invariants:
* ``Embedder.embed`` returns float32 ``(n, dim)`` rows of unit length, in input order; an empty
  batch gives ``(0, dim)``. ``Reranker.rerank`` returns one finite score per text, in input
  order, comparable only within one call (higher = more relevant); an empty batch gives ``[]``.
* Every backend validates with ``check_role`` / ``check_texts`` / ``check_query`` before any
  work, and ``chatseek_core.fakes`` refuses exactly the same inputs (pinned by a parity test).
* Nothing here imports torch: the local backend is imported only when asked for.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

from chatseek_core.errors import InvalidArgument

__all__ = [
    "BACKEND_KINDS",
    "MAX_TEXTS",
    "ROLES",
    "Embedder",
    "IdentityLike",
    "ModelIdentity",
    "Reranker",
    "Role",
    "check_query",
    "check_role",
    "check_texts",
    "make_backends",
    "make_embedder",
    "make_reranker",
    "unit_rows",
]

log = logging.getLogger(__name__)

Role = Literal["query", "passage"]
ROLES: tuple[Role, ...] = ("query", "passage")
MAX_TEXTS = 512
BACKEND_KINDS = ("local", "tei", "fake")


class IdentityLike(Protocol):
    """Anything shaped like ``ModelIdentity`` (the fakes in chatseek_core have their own class)."""

    @property
    def name(self) -> str: ...
    @property
    def revision(self) -> str: ...
    @property
    def dim(self) -> int: ...
    @property
    def max_seq_length(self) -> int: ...
    @property
    def normalized(self) -> bool: ...
    @property
    def kind(self) -> str: ...


@dataclass(frozen=True)
class ModelIdentity:
    """What a model is, as far as stored vectors are concerned.

    Attributes:
        name: hub id (``intfloat/multilingual-e5-small``) or, for a directory that is not a
            known model, its path.
        revision: hub commit, or ``sha256:<hex>`` over the directory's files.
        dim: vector width; 0 for rerankers.
        max_seq_length: tokens kept per input; longer inputs are truncated.
        normalized: whether vectors are L2-normalised (always true for embedders here).
        kind: ``"embed"`` or ``"rerank"``.
    """

    name: str
    revision: str
    dim: int
    max_seq_length: int
    normalized: bool
    kind: str

    @classmethod
    def of(cls, identity: IdentityLike) -> ModelIdentity:
        """Copy any identity-shaped object (e.g. a fake's) into a ``ModelIdentity``."""
        return cls(
            name=identity.name,
            revision=identity.revision,
            dim=identity.dim,
            max_seq_length=identity.max_seq_length,
            normalized=identity.normalized,
            kind=identity.kind,
        )


class Embedder(Protocol):
    """Turns texts into unit vectors; see the module docstring for the contract."""

    @property
    def identity(self) -> IdentityLike: ...

    def embed(self, texts: Sequence[str], *, role: Role) -> np.ndarray: ...


class Reranker(Protocol):
    """Scores (query, text) pairs; see the module docstring for the contract."""

    @property
    def identity(self) -> IdentityLike: ...

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]: ...


# --- validation ---


def check_role(role: object) -> Role:
    """Return ``role`` if it is ``"query"`` or ``"passage"``.

    Raises:
        InvalidArgument: any other value.
    """
    if role == "query":
        return "query"
    if role == "passage":
        return "passage"
    raise InvalidArgument(
        "role must be 'query' or 'passage'",
        hint="embed questions as 'query' and stored texts as 'passage'",
        metadata={"field": "role"},
    )


def check_texts(texts: object, field: str = "texts") -> list[str]:
    """Return ``texts`` as a list after checking every item.

    Raises:
        InvalidArgument: ``texts`` is a bare string or not a sequence, holds more than
            ``MAX_TEXTS`` items, or an item is not a string or is blank (metadata ``index``).
    """
    if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
        raise InvalidArgument(
            f"{field} must be a list of strings",
            hint="wrap a single text in a list",
            metadata={"field": field},
        )
    if len(texts) > MAX_TEXTS:
        raise InvalidArgument(
            f"too many texts in one call ({len(texts)} > {MAX_TEXTS})",
            hint=f"send at most {MAX_TEXTS} texts per call",
            metadata={"field": field, "limit": str(MAX_TEXTS)},
        )
    out: list[str] = []
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidArgument(
                f"{field}[{index}] is not a string",
                metadata={"field": field, "index": str(index)},
            )
        if not text.strip():
            raise InvalidArgument(
                f"{field}[{index}] is blank",
                hint="drop empty texts before embedding or reranking",
                metadata={"field": field, "index": str(index)},
            )
        out.append(text)
    return out


def check_query(query: object) -> str:
    """Return ``query`` if it is a non-blank string.

    Raises:
        InvalidArgument: anything else.
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("query must be a non-blank string", metadata={"field": "query"})
    return query


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as float32 with every row rescaled to unit length (zero rows stay zero)."""
    out = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


# --- factory ---


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
