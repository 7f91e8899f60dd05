"""The local backends: sentence-transformers embedders and cross-encoder rerankers.

Owns the per-process model cache and the sentence-transformers calls; device, precision and
batching come from ``runtime``. Invariants:
* One model object per (kind, directory, device, requested precision) per process, loaded from
  local files only; concurrent loads wait for the first; inference on it is serialised.
* ``precision="auto"`` as ``runtime`` defines it (agreement ``BF16_MIN_COSINE`` for embedders,
  ``RERANK_MIN_AGREEMENT`` for rerankers).
* Inputs run in length-bucketed batches under a padded-token budget and come back in input
  order; non-finite output is an error, never returned.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import torch
from sentence_transformers import CrossEncoder, SentenceTransformer

from chatseek_core.errors import InvalidArgument, ModelUnavailable
from chatseek_embed.contract import (
    ModelIdentity,
    Role,
    check_query,
    check_role,
    check_texts,
    unit_rows,
)
from chatseek_embed.registry import ResolvedModel, resolve_model, role_prompts
from chatseek_embed.runtime import (
    BF16_MIN_COSINE,
    BF16_MIN_SPEEDUP,
    CALIBRATION_TEXTS,
    DTYPES,
    MAX_BATCH_ITEMS,
    PRECISIONS,
    RERANK_MIN_AGREEMENT,
    TOKEN_BUDGET,
    PrecisionChoice,
    plan_batches,
    resolve_device,
)
from chatseek_embed.runtime import check_finite as _check_finite
from chatseek_embed.runtime import check_precision as _check_precision
from chatseek_embed.runtime import choose_cpu_precision as _choose_cpu_precision
from chatseek_embed.runtime import explicit_or_default as _explicit_or_default
from chatseek_embed.runtime import min_cosine as _min_cosine
from chatseek_embed.runtime import score_agreement as _score_agreement

__all__ = [
    "BF16_MIN_COSINE",
    "BF16_MIN_SPEEDUP",
    "CALIBRATION_TEXTS",
    "PRECISIONS",
    "LocalEmbedder",
    "LocalReranker",
    "PrecisionChoice",
    "load_local_embedder",
    "load_local_reranker",
    "loaded_models",
    "plan_batches",
    "resolve_device",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_SEQ_LENGTH = 512
MIN_SEQ_LENGTH = 8
ROBERTA_LIKE = ("roberta", "xlm-roberta", "camembert")
ROBERTA_POSITION_OFFSET = 2

M = TypeVar("M", SentenceTransformer, CrossEncoder)


@dataclass
class _Loaded(Generic[M]):
    key: str
    model: M
    precision: PrecisionChoice
    default_seq: int
    seq_limit: int
    lock: threading.Lock


_cache: dict[str, Any] = {}
_cache_lock = threading.Lock()
_key_locks: dict[str, threading.Lock] = {}


def loaded_models() -> list[str]:
    """Keys of the models loaded in this process: ``kind:directory@device/precision``."""
    with _cache_lock:
        return sorted(_cache)


def _get_or_load(key: str, loader: Callable[[], _Loaded[M]]) -> _Loaded[M]:
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        key_lock = _key_locks.setdefault(key, threading.Lock())
    with key_lock:
        with _cache_lock:
            hit = _cache.get(key)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        loaded = loader()
        with _cache_lock:
            _cache[key] = loaded
        return loaded


# --- device, precision, sequence length ---


def _position_limit(config: Any, fallback: int) -> int:
    positions = getattr(config, "max_position_embeddings", None)
    if not isinstance(positions, int) or positions <= 0:
        return fallback
    if getattr(config, "model_type", "") in ROBERTA_LIKE:
        positions -= ROBERTA_POSITION_OFFSET
    return positions


def _choose_seq_length(requested: int | None, default: int, limit: int) -> int:
    if requested is None:
        return max(MIN_SEQ_LENGTH, min(default, DEFAULT_MAX_SEQ_LENGTH, limit))
    if not MIN_SEQ_LENGTH <= requested <= limit:
        raise InvalidArgument(
            f"max_seq_length must be between {MIN_SEQ_LENGTH} and {limit} for this model",
            metadata={"field": "max_seq_length", "limit": str(limit)},
        )
    return requested


# --- batching ---


def _token_lengths(
    tokenizer: Any, first: list[str], second: list[str] | None, limit: int
) -> list[int]:
    if second is None:
        encoded = tokenizer(first, add_special_tokens=True, truncation=True, max_length=limit)
    else:
        encoded = tokenizer(
            first, second, add_special_tokens=True, truncation=True, max_length=limit
        )
    return [len(ids) for ids in encoded["input_ids"]]


# --- calibration ---


def _load_failure(resolved: ResolvedModel, exc: Exception) -> ModelUnavailable:
    return ModelUnavailable(
        f"model {resolved.name} cannot be loaded from {resolved.directory}",
        hint=f"chatseek models verify {resolved.name}",
        metadata={"model": resolved.name, "error": type(exc).__name__},
    )


# --- embedder ---


def _load_embedder_model(
    resolved: ResolvedModel, device: str, requested: str, key: str
) -> _Loaded[SentenceTransformer]:
    started = time.perf_counter()
    fixed = _explicit_or_default(requested, device)
    dtype = DTYPES[fixed.resolved] if fixed is not None else torch.float32
    try:
        model = SentenceTransformer(
            str(resolved.directory),
            device=device,
            local_files_only=True,
            model_kwargs={"dtype": dtype},
        )
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise _load_failure(resolved, exc) from exc
    default_seq = int(model.max_seq_length or DEFAULT_MAX_SEQ_LENGTH)
    limit = _position_limit(
        getattr(getattr(model[0], "auto_model", None), "config", None), default_seq
    )
    model.max_seq_length = _choose_seq_length(None, default_seq, limit)
    if fixed is None:

        def run(m: SentenceTransformer) -> np.ndarray:
            return np.asarray(
                m.encode(
                    list(CALIBRATION_TEXTS),
                    batch_size=len(CALIBRATION_TEXTS),
                    convert_to_numpy=True,
                    show_progress_bar=False,
                ),
                dtype=np.float32,
            )

        model, precision = _choose_cpu_precision(model, run, _min_cosine, BF16_MIN_COSINE)
    else:
        precision = fixed
    model.eval()
    log.info(
        "loaded embedder %s on %s in %s (%s) in %.1fs",
        resolved.name,
        device,
        precision.resolved,
        precision.reason,
        time.perf_counter() - started,
    )
    return _Loaded(key, model, precision, default_seq, limit, threading.Lock())


class LocalEmbedder:
    """A sentence-transformers model behind the ``Embedder`` contract.

    Build it with ``load_local_embedder``; instances built for the same model share one model
    object and its lock.
    """

    def __init__(
        self,
        loaded: _Loaded[SentenceTransformer],
        identity: ModelIdentity,
        prompts: dict[str, str],
        device: str,
    ) -> None:
        self._loaded = loaded
        self.identity = identity
        self.prompts = dict(prompts)
        self.device = device
        self._budget = TOKEN_BUDGET[device.split(":", 1)[0]]
        self._max_items = MAX_BATCH_ITEMS[device.split(":", 1)[0]]

    @property
    def precision(self) -> PrecisionChoice:
        """The precision the shared model runs in, and why."""
        return self._loaded.precision

    def embed(self, texts: Sequence[str], *, role: Role) -> np.ndarray:
        """Embed ``texts`` with the model's prefix for ``role``.

        Returns:
            float32 ``(len(texts), dim)``, rows of unit length, in input order.

        Raises:
            InvalidArgument: see ``contract.check_texts`` / ``check_role``.
            ModelUnavailable: the model produced non-finite values.
        """
        prefix = self.prompts[check_role(role)]
        items = check_texts(texts)
        dim = self.identity.dim
        out = np.zeros((len(items), dim), dtype=np.float32)
        if not items:
            return out
        seq = self.identity.max_seq_length
        with self._loaded.lock:
            model = self._loaded.model
            model.max_seq_length = seq
            lengths = _token_lengths(model.tokenizer, [prefix + t for t in items], None, seq)
            for batch in plan_batches(lengths, self._budget, self._max_items):
                vectors = model.encode(
                    [items[i] for i in batch],
                    prompt=prefix or None,
                    batch_size=len(batch),
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                out[batch] = np.asarray(vectors, dtype=np.float32)
        _check_finite(out, self.identity, self.precision)
        return unit_rows(out)


def _model_prompts(model: SentenceTransformer, name: str) -> dict[str, str]:
    """The model's own non-empty prompts, falling back to the registry's table per role."""
    own = {k: v for k, v in (getattr(model, "prompts", None) or {}).items() if v}
    table = role_prompts(name)
    return {
        "query": own.get("query") or table["query"],
        "passage": own.get("passage") or own.get("document") or table["passage"],
    }


def load_local_embedder(
    model: str,
    *,
    device: str | None = None,
    precision: str = "auto",
    max_seq_length: int | None = None,
    cache_dir: Path | None = None,
) -> LocalEmbedder:
    """Load (or reuse) a sentence-transformers embedder.

    Args:
        model: hub id (from the local HF cache) or model directory.
        device: ``cpu``, ``cuda[:N]``, ``mps``, or None/``auto`` (mps, else cuda, else cpu).
        precision: ``auto``, ``fp32``, ``bf16`` or ``fp16`` (see the module docstring).
        max_seq_length: tokens kept per text; default ``min(model's own, 512)``.
        cache_dir: HF cache to resolve hub ids in.

    Raises:
        ModelNotFound: the model is not available locally (hint: how to download it).
        ModelUnavailable: its files cannot be loaded.
        InvalidArgument: bad device, precision or max_seq_length.
        FailedPrecondition: the requested accelerator is absent.
    """
    requested = _check_precision(precision)
    dev = resolve_device(device)
    resolved = resolve_model(model, cache_dir=cache_dir)
    key = f"embed:{resolved.directory}@{dev}/{requested}"
    loaded = _get_or_load(key, lambda: _load_embedder_model(resolved, dev, requested, key))
    seq = _choose_seq_length(max_seq_length, loaded.default_seq, loaded.seq_limit)
    dim = loaded.model.get_embedding_dimension()
    if not dim:
        raise _load_failure(resolved, ValueError("no embedding dimension"))
    identity = ModelIdentity(
        name=resolved.name,
        revision=resolved.revision,
        dim=int(dim),
        max_seq_length=seq,
        normalized=True,
        kind="embed",
    )
    return LocalEmbedder(loaded, identity, _model_prompts(loaded.model, resolved.name), dev)


# --- reranker ---


def _load_reranker_model(
    resolved: ResolvedModel, device: str, requested: str, key: str
) -> _Loaded[CrossEncoder]:
    started = time.perf_counter()
    fixed = _explicit_or_default(requested, device)
    dtype = DTYPES[fixed.resolved] if fixed is not None else torch.float32
    try:
        model = CrossEncoder(
            str(resolved.directory),
            device=device,
            local_files_only=True,
            model_kwargs={"dtype": dtype},
            activation_fn=torch.nn.Identity(),
        )
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise _load_failure(resolved, exc) from exc
    if model.num_labels != 1:
        raise InvalidArgument(
            f"model {resolved.name} is not a single-score cross-encoder",
            hint="use a reranker such as BAAI/bge-reranker-v2-m3",
            metadata={"model": resolved.name, "num_labels": str(model.num_labels)},
        )
    limit = _position_limit(model.config, DEFAULT_MAX_SEQ_LENGTH)
    default_seq = min(int(model.max_seq_length or limit), limit)
    model.max_seq_length = _choose_seq_length(None, default_seq, limit)
    if fixed is None:
        query = CALIBRATION_TEXTS[0]
        pairs = [(query, text) for text in CALIBRATION_TEXTS]

        def run(m: CrossEncoder) -> np.ndarray:
            scores = m.predict(
                pairs, batch_size=len(pairs), convert_to_numpy=True, show_progress_bar=False
            )
            return np.asarray(scores, dtype=np.float32).reshape(-1)

        model, precision = _choose_cpu_precision(model, run, _score_agreement, RERANK_MIN_AGREEMENT)
    else:
        precision = fixed
    model.eval()
    log.info(
        "loaded reranker %s on %s in %s (%s) in %.1fs",
        resolved.name,
        device,
        precision.resolved,
        precision.reason,
        time.perf_counter() - started,
    )
    return _Loaded(key, model, precision, default_seq, limit, threading.Lock())


class LocalReranker:
    """A sentence-transformers ``CrossEncoder`` behind the ``Reranker`` contract.

    Scores are the model's raw logits (no sigmoid), so nothing saturates into ties; they are
    comparable only within one call.
    """

    def __init__(self, loaded: _Loaded[CrossEncoder], identity: ModelIdentity, device: str) -> None:
        self._loaded = loaded
        self.identity = identity
        self.device = device
        self._budget = TOKEN_BUDGET[device.split(":", 1)[0]]
        self._max_items = MAX_BATCH_ITEMS[device.split(":", 1)[0]]

    @property
    def precision(self) -> PrecisionChoice:
        """The precision the shared model runs in, and why."""
        return self._loaded.precision

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in input order; higher means more relevant.

        Raises:
            InvalidArgument: see ``contract.check_query`` / ``check_texts``.
            ModelUnavailable: the model produced non-finite scores.
        """
        question = check_query(query)
        items = check_texts(texts)
        if not items:
            return []
        scores = np.zeros(len(items), dtype=np.float32)
        seq = self.identity.max_seq_length
        with self._loaded.lock:
            model = self._loaded.model
            model.max_seq_length = seq
            lengths = _token_lengths(model.tokenizer, [question] * len(items), items, seq)
            for batch in plan_batches(lengths, self._budget, self._max_items):
                result = model.predict(
                    [(question, items[i]) for i in batch],
                    batch_size=len(batch),
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                scores[batch] = np.asarray(result, dtype=np.float32).reshape(-1)
        _check_finite(scores, self.identity, self.precision)
        return [float(s) for s in scores]


def load_local_reranker(
    model: str,
    *,
    device: str | None = None,
    precision: str = "auto",
    max_seq_length: int | None = None,
    cache_dir: Path | None = None,
) -> LocalReranker:
    """Load (or reuse) a cross-encoder reranker.

    Arguments and errors are those of ``load_local_embedder``; ``max_seq_length`` bounds the
    (query, text) pair. A model with more than one output label is refused (InvalidArgument).
    """
    requested = _check_precision(precision)
    dev = resolve_device(device)
    resolved = resolve_model(model, cache_dir=cache_dir)
    key = f"rerank:{resolved.directory}@{dev}/{requested}"
    loaded = _get_or_load(key, lambda: _load_reranker_model(resolved, dev, requested, key))
    seq = _choose_seq_length(max_seq_length, loaded.default_seq, loaded.seq_limit)
    identity = ModelIdentity(
        name=resolved.name,
        revision=resolved.revision,
        dim=0,
        max_seq_length=seq,
        normalized=False,
        kind="rerank",
    )
    return LocalReranker(loaded, identity, dev)
