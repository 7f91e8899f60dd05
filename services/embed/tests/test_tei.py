from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from chatseek_core.errors import (
    ChatseekError,
    ConfirmationRequired,
    FailedPrecondition,
    InvalidArgument,
    ModelUnavailable,
)
from chatseek_core.fakes import FakeEmbedder, FakeReranker
from chatseek_embed.backends import make_backends
from chatseek_embed.contract import MAX_TEXTS
from chatseek_embed.tei import TeiEmbedder, TeiReranker, is_remote_url

SERVER_BATCH = 4
POLL_S = 0.02
FAST = {"connect_timeout_s": 1.0, "read_timeout_s": 2.0, "retries": 2}


class FakeTei:
    """A text-embeddings-inference look-alike on 127.0.0.1:0 with TEI's JSON shapes.

    ``fail[path]`` holds statuses to answer before the next success; ``delay_s[path]`` delays
    every answer on that path; ``requests`` records (path, body) in arrival order.
    """

    def __init__(self, *, model_id: str = "chatseek/fake-embedder", kind: str = "embed") -> None:
        self.model_id = model_id
        self.kind = kind
        self.requests: list[tuple[str, Any]] = []
        self.fail: dict[str, list[int]] = {}
        self.delay_s: dict[str, float] = {}
        self.wrong_count = False
        self._embedder = FakeEmbedder()
        self._reranker = FakeReranker()
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def calls(self, path: str) -> int:
        with self._lock:
            return sum(1 for p, _ in self.requests if p == path)

    def bodies(self, path: str) -> list[Any]:
        with self._lock:
            return [b for p, b in self.requests if p == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _info(self) -> dict[str, Any]:
        model_type: dict[str, Any] = (
            {"embedding": {"pooling": "mean"}}
            if self.kind == "embed"
            else {"reranker": {"id2label": {"0": "LABEL_0"}}}
        )
        return {
            "model_id": self.model_id,
            "model_sha": "0123abcd",
            "model_dtype": "float16",
            "model_type": model_type,
            "max_concurrent_requests": 512,
            "max_input_length": 512,
            "max_batch_tokens": 16384,
            "max_client_batch_size": SERVER_BATCH,
            "version": "1.5.0",
        }

    def _answer(self, path: str, body: Any) -> tuple[int, Any]:
        with self._lock:
            self.requests.append((path, body))
            pending = self.fail.get(path)
            status = pending.pop(0) if pending else None
        if path in self.delay_s:
            time.sleep(self.delay_s[path])
        if status is not None:
            kind = "Validation" if status in (413, 422) else "Overloaded"
            return status, {"error": "scripted failure", "error_type": kind}
        if path == "/info":
            return 200, self._info()
        if path == "/embed":
            inputs = body["inputs"]
            if len(inputs) > SERVER_BATCH:
                return 413, {"error": "batch size too large", "error_type": "Validation"}
            if any(not text for text in inputs):
                return 422, {"error": "`inputs` cannot be empty", "error_type": "Validation"}
            vectors = self._embedder.embed(inputs, role="passage").tolist()
            return 200, vectors[:-1] if self.wrong_count else vectors
        if path == "/rerank":
            texts = body["texts"]
            if len(texts) > SERVER_BATCH:
                return 413, {"error": "batch size too large", "error_type": "Validation"}
            scores = self._reranker.rerank(body["query"], texts)
            ranked = sorted(enumerate(scores), key=lambda pair: -pair[1])
            return 200, [{"index": i, "score": s} for i, s in ranked]
        return 404, {"error": "not found", "error_type": "NotFound"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, path: str, body: Any) -> None:
                status, payload = fake._answer(path, body)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            def do_GET(self) -> None:
                self._reply(self.path, None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._reply(self.path, json.loads(self.rfile.read(length) or b"null"))

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@pytest.fixture
def tei() -> Iterator[FakeTei]:
    server = FakeTei()
    yield server
    server.close()


@pytest.fixture
def embedder(tei: FakeTei) -> Iterator[TeiEmbedder]:
    client = TeiEmbedder(tei.url, **FAST)  # type: ignore[arg-type]
    yield client
    client.close()


def test_tei_embeds_in_server_sized_chunks_and_keeps_input_order(
    tei: FakeTei, embedder: TeiEmbedder
) -> None:
    texts = [f"message number {i} about renting flat {i % 3}" for i in range(10)]
    vectors = embedder.embed(texts, role="passage")
    assert vectors.shape == (10, 384)
    assert vectors.dtype == np.float32
    assert np.allclose(vectors, FakeEmbedder().embed(texts, role="passage"), atol=1e-6)
    assert [len(b["inputs"]) for b in tei.bodies("/embed")[1:]] == [4, 4, 2]


def test_tei_requests_normalised_truncated_vectors(tei: FakeTei, embedder: TeiEmbedder) -> None:
    embedder.embed(["hello"], role="query")
    body = tei.bodies("/embed")[-1]
    assert body == {"inputs": ["hello"], "normalize": True, "truncate": True}


def test_tei_identity_comes_from_info_and_the_probe(embedder: TeiEmbedder) -> None:
    identity = embedder.identity
    assert (identity.name, identity.revision, identity.dim) == (
        "chatseek/fake-embedder",
        "0123abcd",
        384,
    )
    assert (identity.max_seq_length, identity.kind, identity.normalized) == (512, "embed", True)
    assert embedder.is_remote is False


def test_tei_adds_e5_prefixes_for_an_e5_model() -> None:
    server = FakeTei(model_id="intfloat/multilingual-e5-small")
    try:
        client = TeiEmbedder(server.url, **FAST)  # type: ignore[arg-type]
        client.embed(["где снять квартиру"], role="query")
        client.embed(["сдаю квартиру"], role="passage")
        client.close()
        sent = [b["inputs"][0] for b in server.bodies("/embed")[1:]]
        assert sent == ["query: где снять квартиру", "passage: сдаю квартиру"]
    finally:
        server.close()


def test_tei_retries_after_one_503(tei: FakeTei, embedder: TeiEmbedder) -> None:
    tei.fail["/embed"] = [503]
    before = tei.calls("/embed")
    vectors = embedder.embed(["still answered"], role="passage")
    assert vectors.shape == (1, 384)
    assert tei.calls("/embed") - before == 2


def test_tei_gives_up_after_bounded_retries(tei: FakeTei, embedder: TeiEmbedder) -> None:
    tei.fail["/embed"] = [503] * 10
    before = tei.calls("/embed")
    with pytest.raises(ModelUnavailable) as caught:
        embedder.embed(["never answered"], role="passage")
    assert caught.value.reason == "MODEL_UNAVAILABLE"
    assert tei.calls("/embed") - before == FAST["retries"] + 1


def test_tei_timeout_becomes_model_unavailable(tei: FakeTei) -> None:
    client = TeiEmbedder(tei.url, connect_timeout_s=1.0, read_timeout_s=0.2, retries=1)
    tei.delay_s["/embed"] = 1.0
    try:
        with pytest.raises(ModelUnavailable) as caught:
            client.embed(["slow"], role="passage")
        assert caught.value.metadata["error"] == "timeout"
    finally:
        client.close()


def test_tei_refused_input_is_invalid_argument_and_not_retried(
    tei: FakeTei, embedder: TeiEmbedder
) -> None:
    tei.fail["/embed"] = [422]
    before = tei.calls("/embed")
    with pytest.raises(InvalidArgument) as caught:
        embedder.embed(["refused"], role="passage")
    assert caught.value.metadata["status"] == "422"
    assert tei.calls("/embed") - before == 1


def test_tei_malformed_answer_is_model_unavailable(tei: FakeTei, embedder: TeiEmbedder) -> None:
    tei.wrong_count = True
    with pytest.raises(ModelUnavailable):
        embedder.embed(["a", "b"], role="passage")


def test_unreachable_tei_is_model_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ModelUnavailable):
        TeiEmbedder(f"http://127.0.0.1:{port}", connect_timeout_s=0.5, retries=1)


def test_tei_rerank_returns_raw_scores_in_input_order() -> None:
    server = FakeTei(model_id="BAAI/bge-reranker-v2-m3", kind="rerank")
    try:
        reranker = TeiReranker(server.url, **FAST)  # type: ignore[arg-type]
        texts = ["my cat", "renting a flat", "flat tyre", "rent", "a flat to rent now", "nothing"]
        scores = reranker.rerank("rent a flat", texts)
        reranker.close()
        assert scores == pytest.approx(FakeReranker().rerank("rent a flat", texts))
        bodies = server.bodies("/rerank")
        assert [len(b["texts"]) for b in bodies] == [4, 2]
        assert all(b["raw_scores"] is True for b in bodies)
        assert reranker.identity.kind == "rerank"
    finally:
        server.close()


def test_tei_rerank_retries_after_one_503() -> None:
    server = FakeTei(kind="rerank")
    try:
        reranker = TeiReranker(server.url, **FAST)  # type: ignore[arg-type]
        server.fail["/rerank"] = [503]
        assert len(reranker.rerank("q", ["q text"])) == 1
        reranker.close()
        assert server.calls("/rerank") == 2
    finally:
        server.close()


def test_an_embed_url_that_serves_a_reranker_is_refused() -> None:
    server = FakeTei(kind="rerank")
    try:
        with pytest.raises(InvalidArgument):
            TeiEmbedder(server.url, **FAST)  # type: ignore[arg-type]
    finally:
        server.close()


def test_a_remote_tei_is_refused_without_opt_in_before_any_request() -> None:
    with pytest.raises(ConfirmationRequired) as caught:
        TeiEmbedder("http://192.0.2.7:8080")
    assert isinstance(caught.value, FailedPrecondition)
    assert caught.value.reason == "CONFIRMATION_REQUIRED"
    with pytest.raises(ConfirmationRequired):
        make_backends(
            "tei",
            embed_model="ignored",
            rerank_model=None,
            tei_url="https://tei.example.com",
        )


@pytest.mark.parametrize(
    ("url", "remote"),
    [
        ("http://127.0.0.1:8080", False),
        ("http://127.8.9.1", False),
        ("http://localhost:80", False),
        ("http://embed.localhost:80", False),
        ("http://[::1]:8080", False),
        ("http://192.168.1.10:8080", True),
        ("http://host.docker.internal:8080", True),
        ("https://api.example.com", True),
    ],
)
def test_is_remote_url_means_not_loopback(url: str, remote: bool) -> None:
    assert is_remote_url(url) is remote


def test_make_backends_builds_tei_embedder_and_reranker(tei: FakeTei) -> None:
    reranker_server = FakeTei(kind="rerank")
    try:
        embedder, reranker = make_backends(
            "tei",
            embed_model="ignored",
            rerank_model=None,
            tei_url=tei.url,
            tei_rerank_url=reranker_server.url,
        )
        assert isinstance(embedder, TeiEmbedder) and isinstance(reranker, TeiReranker)
        embedder.close()
        reranker.close()
    finally:
        reranker_server.close()


BAD_CALLS: list[tuple[str, object, object]] = [
    ("bare-string", "just one text", "passage"),
    ("non-string-item", ["fine", None], "passage"),
    ("blank-item", ["fine", " "], "passage"),
    ("too-many", ["x"] * (MAX_TEXTS + 1), "passage"),
    ("unknown-role", ["fine"], "document"),
]


@pytest.mark.parametrize(("case", "texts", "role"), BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_the_fake_embedder_refuses_exactly_what_tei_refuses_before_sending(
    case: str, texts: object, role: object, tei: FakeTei, embedder: TeiEmbedder
) -> None:
    sent = tei.calls("/embed")
    with pytest.raises(ChatseekError) as from_tei:
        embedder.embed(texts, role=role)  # type: ignore[arg-type]
    with pytest.raises(ChatseekError) as from_fake:
        FakeEmbedder().embed(texts, role=role)  # type: ignore[arg-type]
    assert type(from_tei.value) is type(from_fake.value) is InvalidArgument
    assert from_tei.value.metadata == from_fake.value.metadata
    assert tei.calls("/embed") == sent


def test_tei_answers_empty_batches_without_a_request(tei: FakeTei, embedder: TeiEmbedder) -> None:
    sent = tei.calls("/embed")
    assert embedder.embed([], role="query").shape == (0, 384)
    assert tei.calls("/embed") == sent
