"""The text-embeddings-inference backend: a TEI server behind the Embedder / Reranker contracts.

Owns ``TeiEmbedder``, ``TeiReranker`` and ``is_remote_url``. Invariants:
* Text reaches a non-loopback host only with ``allow_remote=True``; otherwise construction
  fails with ``ConfirmationRequired`` before any request.
* ``/embed`` goes through text-embeddings-inference-client, ``/rerank`` through its httpx client,
  in chunks of the server's ``max_client_batch_size``; answers are checked before use.
* Every request has a timeout; timeouts, transport errors, 429 and 502-504 are retried at most
  ``retries`` times, then become ``ModelUnavailable``; 413/422 are ``InvalidArgument``.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

import httpx
import numpy as np
from text_embeddings_inference_client import Client
from text_embeddings_inference_client.api.text_embeddings_inference import embed, get_model_info
from text_embeddings_inference_client.models import EmbedRequest

from chatseek_core.errors import ConfirmationRequired, InvalidArgument, ModelUnavailable
from chatseek_embed.contract import (
    ModelIdentity,
    Role,
    check_query,
    check_role,
    check_texts,
    unit_rows,
)
from chatseek_embed.registry import role_prompts

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_READ_TIMEOUT_S",
    "DEFAULT_RETRIES",
    "TeiEmbedder",
    "TeiReranker",
    "is_remote_url",
]

log = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT_S = 2.0
DEFAULT_READ_TIMEOUT_S = 30.0
DEFAULT_RETRIES = 2
BACKOFF_BASE_S = 0.2
BACKOFF_MAX_S = 2.0
RETRY_STATUSES = (429, 502, 503, 504)
REFUSED_STATUSES = (413, 422)
DEFAULT_CLIENT_BATCH = 32
PROBE_TEXT = "chatseek dimension probe"
LOOPBACK_NAMES = ("localhost",)


class _HttpAnswer(Protocol):
    """What ``refuse_or_fail`` reads of an answer: an ``httpx.Response`` or the TEI client's."""

    @property
    def status_code(self) -> int: ...
    @property
    def content(self) -> bytes: ...


class _HasStatus(Protocol):
    @property
    def status_code(self) -> int: ...


R = TypeVar("R", bound=_HasStatus)


def is_remote_url(url: str) -> bool:
    """True unless the URL's host is loopback (``localhost``, ``*.localhost``, 127/8, ``::1``).

    Names are not resolved: a name other than localhost counts as remote, so the answer never
    depends on DNS.
    """
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


class _TeiConnection:
    """One TEI server: its client, its ``/info``, and the retry policy."""

    def __init__(
        self,
        url: str,
        *,
        allow_remote: bool,
        connect_timeout_s: float,
        read_timeout_s: float,
        retries: int,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidArgument(
                f"not an http(s) URL: {url!r}",
                hint="use e.g. http://127.0.0.1:8080",
                metadata={"field": "tei_url"},
            )
        self.url = url.rstrip("/")
        self.host = parts.hostname
        self.is_remote = is_remote_url(url)
        if self.is_remote and not allow_remote:
            raise ConfirmationRequired(
                f"TEI server {self.host} is not on this machine; texts would leave it",
                hint="allow remote embedding explicitly (CHATSEEK_EMBED_ALLOW_REMOTE=1) or run "
                "TEI on loopback",
                metadata={"host": self.host},
            )
        if self.is_remote:
            log.info("TEI server %s is remote; chat text will be sent to it", self.host)
        self.retries = max(0, retries)
        timeout = httpx.Timeout(read_timeout_s, connect=connect_timeout_s)
        self.client = Client(base_url=self.url, timeout=timeout, raise_on_unexpected_status=False)
        try:
            self.info = self._fetch_info()
        except Exception:
            self.close()
            raise
        batch = self.info.get("max_client_batch_size")
        self.batch_size = batch if isinstance(batch, int) and batch > 0 else DEFAULT_CLIENT_BATCH

    def close(self) -> None:
        self.client.get_httpx_client().close()

    def call(self, op: str, send: Callable[[], R]) -> R:
        """Run ``send`` with bounded retries; return the first non-retryable response.

        Raises:
            ModelUnavailable: every attempt timed out, failed in transport or got a retryable
                status.
        """
        attempts = self.retries + 1
        failure = ""
        for attempt in range(attempts):
            if attempt:
                time.sleep(min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (attempt - 1)))
            try:
                response = send()
            except httpx.TimeoutException:
                failure = "timeout"
            except httpx.TransportError as exc:
                failure = type(exc).__name__
            else:
                if response.status_code not in RETRY_STATUSES:
                    return response
                failure = f"HTTP {response.status_code}"
            log.info(
                "TEI %s %s attempt %d/%d failed: %s", self.host, op, attempt + 1, attempts, failure
            )
        raise ModelUnavailable(
            f"TEI server {self.host} did not answer {op}",
            hint="check that the text-embeddings-inference server is running and reachable",
            metadata={"host": self.host, "op": op, "attempts": str(attempts), "error": failure},
        )

    def refuse_or_fail(self, op: str, response: _HttpAnswer) -> Exception:
        """The error for a non-200 answer that was not retried."""
        status = int(response.status_code)
        detail = _error_detail(response.content)
        if status in REFUSED_STATUSES:
            return InvalidArgument(
                f"TEI server refused the {op} input (HTTP {status})",
                hint="send fewer or shorter texts",
                metadata={"host": self.host, "op": op, "status": str(status), "detail": detail},
            )
        return ModelUnavailable(
            f"TEI server {self.host} failed {op} (HTTP {status})",
            hint="see the text-embeddings-inference server's log",
            metadata={"host": self.host, "op": op, "status": str(status), "detail": detail},
        )

    def _fetch_info(self) -> dict[str, Any]:
        response = self.call("info", lambda: get_model_info.sync_detailed(client=self.client))
        if response.status_code != 200:
            raise self.refuse_or_fail("info", response)
        try:
            info = json.loads(response.content)
        except ValueError as exc:
            raise self.malformed("info") from exc
        if not isinstance(info, dict):
            raise self.malformed("info")
        return info

    def model_kind(self) -> str | None:
        """``embed`` / ``rerank`` from ``/info``'s ``model_type``, or None if it does not say."""
        model_type = self.info.get("model_type")
        if isinstance(model_type, dict):
            if "embedding" in model_type:
                return "embed"
            if "reranker" in model_type:
                return "rerank"
        return None

    def require_kind(self, kind: str) -> None:
        found = self.model_kind()
        if found is not None and found != kind:
            raise InvalidArgument(
                f"TEI server {self.host} serves a {found} model, not an {kind} model",
                hint="point the embed URL at an embedding server and the rerank URL at a "
                "reranker server",
                metadata={"host": self.host, "kind": found},
            )

    def identity(self, kind: str, dim: int) -> ModelIdentity:
        max_input = self.info.get("max_input_length")
        return ModelIdentity(
            name=str(self.info.get("model_id") or self.url),
            revision=str(self.info.get("model_sha") or "unknown"),
            dim=dim,
            max_seq_length=max_input if isinstance(max_input, int) else 0,
            normalized=kind == "embed",
            kind=kind,
        )

    def malformed(self, op: str) -> ModelUnavailable:
        return ModelUnavailable(
            f"TEI server {self.host} sent a malformed {op} response",
            hint="check that the URL points at a text-embeddings-inference server",
            metadata={"host": self.host, "op": op},
        )


def _error_detail(content: bytes) -> str:
    try:
        body = json.loads(content)
    except ValueError:
        return ""
    if isinstance(body, dict):
        return str(body.get("error_type") or body.get("error") or "")[:200]
    return ""


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class TeiEmbedder:
    """Embeddings from a TEI server.

    Construction reads ``/info`` and embeds one fixed probe text to learn the width.

    Args:
        url: the server, e.g. ``http://127.0.0.1:8080``.
        allow_remote: permit a host that is not loopback (texts leave the machine).
        connect_timeout_s, read_timeout_s: per request.
        retries: extra attempts after a retryable failure.

    Raises:
        ConfirmationRequired: remote host without ``allow_remote``.
        InvalidArgument: not an http(s) URL, or the server serves a reranker.
        ModelUnavailable: the server cannot be reached or answers nonsense.
    """

    def __init__(
        self,
        url: str,
        *,
        allow_remote: bool = False,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
    ) -> None:
        self._tei = _TeiConnection(
            url,
            allow_remote=allow_remote,
            connect_timeout_s=connect_timeout_s,
            read_timeout_s=read_timeout_s,
            retries=retries,
        )
        self.is_remote = self._tei.is_remote
        self.prompts = role_prompts(str(self._tei.info.get("model_id") or ""))
        try:
            self._tei.require_kind("embed")
            probe = self._embed_chunk([PROBE_TEXT], expected_dim=None)
        except Exception:
            self._tei.close()
            raise
        self.identity = self._tei.identity("embed", int(probe.shape[1]))
        log.info(
            "TEI embedder %s at %s: dim=%d", self.identity.name, self._tei.host, self.identity.dim
        )

    def close(self) -> None:
        """Close the HTTP connections."""
        self._tei.close()

    def embed(self, texts: Sequence[str], *, role: Role) -> np.ndarray:
        """Embed ``texts`` with the model's prefix for ``role`` (see ``registry.role_prompts``).

        Returns:
            float32 ``(len(texts), dim)``, rows of unit length, in input order.

        Raises:
            InvalidArgument: bad input (as every backend), or the server refused it.
            ModelUnavailable: the server failed, timed out or answered malformed data.
        """
        prefix = self.prompts[check_role(role)]
        items = check_texts(texts)
        dim = self.identity.dim
        if not items:
            return np.zeros((0, dim), dtype=np.float32)
        parts = [
            self._embed_chunk([prefix + t for t in chunk], expected_dim=dim)
            for chunk in _chunks(items, self._tei.batch_size)
        ]
        return np.concatenate(parts, axis=0)

    def _embed_chunk(self, inputs: list[str], *, expected_dim: int | None) -> np.ndarray:
        request = EmbedRequest(inputs=inputs, truncate=True)
        request["normalize"] = True
        client = self._tei.client
        try:
            response = self._tei.call(
                "embed", lambda: embed.sync_detailed(client=client, json_body=request)
            )
        except (KeyError, TypeError, ValueError) as exc:
            # The generated client parses 4xx bodies itself and raises on unexpected shapes.
            raise self._tei.malformed("embed") from exc
        if response.status_code != 200:
            raise self._tei.refuse_or_fail("embed", response)
        try:
            vectors = np.asarray(response.parsed, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise self._tei.malformed("embed") from exc
        width = (
            expected_dim
            if expected_dim is not None
            else (vectors.shape[-1] if vectors.ndim == 2 else 0)
        )
        if vectors.ndim != 2 or vectors.shape != (len(inputs), width) or width == 0:
            raise self._tei.malformed("embed")
        if not np.isfinite(vectors).all():
            raise self._tei.malformed("embed")
        return unit_rows(vectors)


class TeiReranker:
    """Rerank scores from a TEI reranker server (``POST /rerank`` with raw scores).

    Arguments and construction errors are those of ``TeiEmbedder`` (a server that serves an
    embedding model is refused).
    """

    def __init__(
        self,
        url: str,
        *,
        allow_remote: bool = False,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
    ) -> None:
        self._tei = _TeiConnection(
            url,
            allow_remote=allow_remote,
            connect_timeout_s=connect_timeout_s,
            read_timeout_s=read_timeout_s,
            retries=retries,
        )
        self.is_remote = self._tei.is_remote
        try:
            self._tei.require_kind("rerank")
        except Exception:
            self._tei.close()
            raise
        self.identity = self._tei.identity("rerank", 0)

    def close(self) -> None:
        """Close the HTTP connections."""
        self._tei.close()

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One raw score per text, in input order; higher means more relevant.

        Raises:
            InvalidArgument: bad input (as every backend), or the server refused it.
            ModelUnavailable: the server failed, timed out or answered malformed data.
        """
        question = check_query(query)
        items = check_texts(texts)
        scores: list[float] = []
        for chunk in _chunks(items, self._tei.batch_size):
            scores.extend(self._rerank_chunk(question, chunk))
        return scores

    def _rerank_chunk(self, query: str, texts: list[str]) -> list[float]:
        body = {"query": query, "texts": texts, "raw_scores": True, "truncate": True}
        http = self._tei.client.get_httpx_client()
        response = self._tei.call("rerank", lambda: http.post("/rerank", json=body))
        if response.status_code != 200:
            raise self._tei.refuse_or_fail("rerank", response)
        try:
            ranked = response.json()
            by_index = {int(item["index"]): float(item["score"]) for item in ranked}
        except (ValueError, TypeError, KeyError) as exc:
            raise self._tei.malformed("rerank") from exc
        if sorted(by_index) != list(range(len(texts))) or len(ranked) != len(texts):
            raise self._tei.malformed("rerank")
        scores = [by_index[i] for i in range(len(texts))]
        if not all(np.isfinite(scores)):
            raise self._tei.malformed("rerank")
        return scores
