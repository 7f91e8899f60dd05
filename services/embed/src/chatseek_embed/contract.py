"""The embedding and reranking contracts and their request validation.

Owns ``ModelIdentity`` and the ``Embedder`` / ``Reranker`` protocols. Invariants:
* ``Embedder.embed`` returns float32 ``(n, dim)`` rows of unit length, in input order; an empty
  batch gives ``(0, dim)``. ``Reranker.rerank`` returns one finite score per text, in input
  order, comparable only within one call (higher = more relevant); an empty batch gives ``[]``.
* Every backend validates with ``check_role`` / ``check_texts`` / ``check_query`` before any
  work, and ``chatseek_core.fakes`` refuses exactly the same inputs (pinned by a parity test).
* The bottom of the embed package: it imports no other module of it, and every backend
  (``local``, ``bundled``, ``tei``), ``runtime`` and the ``backends`` factory import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from chatseek_core.errors import InvalidArgument

__all__ = [
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
    "unit_rows",
]

Role = Literal["query", "passage"]
ROLES: tuple[Role, ...] = ("query", "passage")
MAX_TEXTS = 512


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
