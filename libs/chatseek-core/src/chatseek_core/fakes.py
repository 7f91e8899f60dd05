"""Deterministic stand-ins for the embedding and reranking models, for tests and demos.

Owns ``FakeEmbedder`` and ``FakeReranker``. Invariants:
* Same input, same output in every process (blake2b features, never ``hash()``).
* Texts sharing stems (``chatseek_core.text.stems``) are close, so ``счёт``/``счета`` match.
* Fakes refuse what the production backends refuse, with the same errors, and answer an empty
  batch; a parity test in the embed service pins this.
* Never imports the embed service: ``FakeModelIdentity`` mirrors its ``ModelIdentity`` shape.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from chatseek_core.errors import InvalidArgument
from chatseek_core.text import normalise, stems

__all__ = [
    "FAKE_DIM",
    "MAX_TEXTS",
    "FakeEmbedder",
    "FakeModelIdentity",
    "FakeReranker",
]

FAKE_DIM = 384
FAKE_RECIPE = "hashed-stems-v1"
FAKE_MAX_SEQ_LENGTH = 512
MAX_TEXTS = 512
ROLES = ("query", "passage")
FEATURE_DIGEST_BYTES = 8
RERANK_DENSITY_WEIGHT = 0.01


@dataclass(frozen=True)
class FakeModelIdentity:
    """The identity of a fake model, field for field the shape of the embed service's one."""

    name: str
    revision: str
    dim: int
    max_seq_length: int
    normalized: bool
    kind: str


# --- validation (mirrors chatseek_embed.contract) ---


def _check_role(role: object) -> None:
    if role not in ROLES:
        raise InvalidArgument(
            "role must be 'query' or 'passage'",
            hint="embed questions as 'query' and stored texts as 'passage'",
            metadata={"field": "role"},
        )


def _check_texts(texts: object, field: str = "texts") -> list[str]:
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


def _check_query(query: object) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument(
            "query must be a non-blank string",
            metadata={"field": "query"},
        )
    return query


# --- features ---


def _features(text: str) -> Counter[str]:
    """The bag of stems of ``text``; a text without word characters is one feature of itself."""
    bag = Counter(stems(text))
    if not bag:
        bag[normalise(text)] = 1
    return bag


def _slot(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=FEATURE_DIGEST_BYTES).digest()
    value = int.from_bytes(digest, "big")
    sign = 1.0 if value & 1 else -1.0
    return (value >> 1) % dim, sign


class FakeEmbedder:
    """A hashed bag of stems, L2-normalised: similar wording gives similar vectors.

    Args:
        dim: vector width (default 384, the width of the default real models).
        name: the model name reported in ``identity``.
    """

    def __init__(self, dim: int = FAKE_DIM, *, name: str = "chatseek/fake-embedder") -> None:
        if dim < 2:
            raise InvalidArgument(
                "fake embedder dim must be at least 2", metadata={"dim": str(dim)}
            )
        self.identity = FakeModelIdentity(
            name=name,
            revision=FAKE_RECIPE,
            dim=dim,
            max_seq_length=FAKE_MAX_SEQ_LENGTH,
            normalized=True,
            kind="embed",
        )

    def embed(self, texts: Sequence[str], *, role: Literal["query", "passage"]) -> np.ndarray:
        """Embed ``texts``; the role is validated and does not change the vector.

        Returns:
            float32 array of shape ``(len(texts), dim)``, every row of unit length; ``(0, dim)``
            for an empty batch.

        Raises:
            InvalidArgument: as the production backends do (see the module docstring).
        """
        _check_role(role)
        items = _check_texts(texts)
        dim = self.identity.dim
        out = np.zeros((len(items), dim), dtype=np.float32)
        for row, text in enumerate(items):
            for feature, count in _features(text).items():
                col, sign = _slot(feature, dim)
                out[row, col] += sign * (1.0 + math.log(count))
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:
                # Opposite-signed features cancelled out: fall back to the text's own slot.
                col, sign = _slot(normalise(text) or text, dim)
                out[row, col] = sign
                norm = 1.0
            out[row] /= norm
        return out


class FakeReranker:
    """Scores a text by how much of the query's stems it covers; deterministic.

    The score is the share of distinct query stems found in the text, plus a small term for how
    dense those matches are in the text, so full coverage in a short text beats full coverage in
    a long one.
    """

    def __init__(self, *, name: str = "chatseek/fake-reranker") -> None:
        self.identity = FakeModelIdentity(
            name=name,
            revision=FAKE_RECIPE,
            dim=0,
            max_seq_length=FAKE_MAX_SEQ_LENGTH,
            normalized=False,
            kind="rerank",
        )

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in input order; higher means more relevant.

        Returns:
            ``[]`` for an empty ``texts``.

        Raises:
            InvalidArgument: a blank or non-string query, or texts the embedder would refuse.
        """
        wanted = set(_features(_check_query(query)))
        items = _check_texts(texts)
        scores: list[float] = []
        for text in items:
            bag = _features(text)
            matched = wanted & set(bag)
            coverage = len(matched) / len(wanted)
            density = sum(bag[f] for f in matched) / sum(bag.values())
            scores.append(coverage + RERANK_DENSITY_WEIGHT * density)
        return scores
