from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

from chatseek_core import fakes
from chatseek_core.errors import ChatseekError, InvalidArgument
from chatseek_core.fakes import FakeEmbedder, FakeReranker
from chatseek_embed.backends import make_backends, make_embedder, make_reranker
from chatseek_embed.contract import (
    MAX_TEXTS,
    ModelIdentity,
    check_query,
    check_role,
    check_texts,
    unit_rows,
)
from chatseek_embed.local import load_local_embedder, load_local_reranker
from chatseek_embed.registry import PACKAGED_MINILM

BAD_EMBED_CALLS: list[tuple[str, object, object]] = [
    ("bare-string", "just one text", "passage"),
    ("bytes", b"raw bytes", "passage"),
    ("not-a-sequence", 42, "passage"),
    ("non-string-item", ["fine", None], "passage"),
    ("empty-item", ["fine", ""], "passage"),
    ("blank-item", ["fine", " \n\t"], "passage"),
    ("too-many", ["x"] * (MAX_TEXTS + 1), "passage"),
    ("unknown-role", ["fine"], "document"),
]
BAD_RERANK_CALLS: list[tuple[str, object, object]] = [
    ("blank-query", "   ", ["text"]),
    ("non-string-query", 7, ["text"]),
    ("bare-string-texts", "query", "one text"),
    ("non-string-item", "query", ["fine", 3.5]),
    ("blank-item", "query", ["fine", ""]),
    ("too-many", "query", ["x"] * (MAX_TEXTS + 1)),
]


@pytest.fixture(autouse=True)
def _offline_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach the network: the HF hub is told it is offline."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_reranker_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tiny-ce")
    words = "[PAD] [UNK] [CLS] [SEP] [MASK] query text fine x".split()
    (directory / "vocab.txt").write_text("\n".join(words) + "\n")
    torch.manual_seed(1)
    config = BertConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        vocab_size=len(words),
    )
    config.num_labels = 1
    BertForSequenceClassification(config).save_pretrained(directory)
    BertTokenizer(str(directory / "vocab.txt")).save_pretrained(directory)
    return directory


def _error_of(call: Callable[[], object]) -> tuple[type[ChatseekError], dict[str, str]]:
    with pytest.raises(ChatseekError) as caught:
        call()
    return type(caught.value), caught.value.metadata


@pytest.mark.parametrize(
    ("case", "texts", "role"), BAD_EMBED_CALLS, ids=[c[0] for c in BAD_EMBED_CALLS]
)
def test_the_fake_embedder_refuses_exactly_what_the_local_one_refuses(
    case: str, texts: object, role: object
) -> None:
    local = load_local_embedder(PACKAGED_MINILM, device="cpu", precision="fp32")
    fake = FakeEmbedder()
    expected = _error_of(lambda: local.embed(texts, role=role))  # type: ignore[arg-type]
    assert expected[0] is InvalidArgument
    assert _error_of(lambda: fake.embed(texts, role=role)) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("case", "query", "texts"), BAD_RERANK_CALLS, ids=[c[0] for c in BAD_RERANK_CALLS]
)
def test_the_fake_reranker_refuses_exactly_what_the_local_one_refuses(
    case: str, query: object, texts: object, tiny_reranker_dir: Path
) -> None:
    local = load_local_reranker(str(tiny_reranker_dir), device="cpu", precision="fp32")
    fake = FakeReranker()
    expected = _error_of(lambda: local.rerank(query, texts))  # type: ignore[arg-type]
    assert expected[0] is InvalidArgument
    assert _error_of(lambda: fake.rerank(query, texts)) == expected  # type: ignore[arg-type]


def test_empty_batches_are_answered_alike_by_fake_and_local(tiny_reranker_dir: Path) -> None:
    local = load_local_embedder(PACKAGED_MINILM, device="cpu", precision="fp32")
    fake = FakeEmbedder()
    for embedder in (local, fake):
        empty = embedder.embed([], role="query")
        assert empty.shape == (0, 384)
        assert empty.dtype == np.float32
    reranker = load_local_reranker(str(tiny_reranker_dir), device="cpu", precision="fp32")
    assert reranker.rerank("query", []) == FakeReranker().rerank("query", []) == []


def test_the_fakes_share_the_production_batch_limit() -> None:
    assert fakes.MAX_TEXTS == MAX_TEXTS


def test_check_texts_returns_a_list_and_names_the_bad_index() -> None:
    assert check_texts(("a", "b")) == ["a", "b"]
    with pytest.raises(InvalidArgument) as caught:
        check_texts(["a", "b", 3])
    assert caught.value.metadata == {"field": "texts", "index": "2"}


def test_check_role_and_check_query_accept_only_the_contract() -> None:
    assert check_role("query") == "query"
    assert check_role("passage") == "passage"
    assert check_query("where?") == "where?"
    with pytest.raises(InvalidArgument):
        check_role("QUERY")
    with pytest.raises(InvalidArgument):
        check_query("")


def test_unit_rows_rescales_rows_and_leaves_zero_rows_alone() -> None:
    rows = unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]], dtype=np.float64))
    assert rows.dtype == np.float32
    assert np.allclose(rows, [[0.6, 0.8], [0.0, 0.0]])


def test_the_fake_kind_is_chosen_only_by_name() -> None:
    embedder, reranker = make_backends("fake", embed_model="anything", rerank_model=None)
    assert isinstance(embedder, FakeEmbedder)
    assert isinstance(reranker, FakeReranker)


def test_an_unknown_backend_kind_is_refused_with_the_choices() -> None:
    with pytest.raises(InvalidArgument) as caught:
        make_embedder("onnx", model="x")
    assert caught.value.candidates == ["local", "tei", "fake"]
    with pytest.raises(InvalidArgument):
        make_reranker("onnx", model="x")


def test_the_tei_kind_needs_a_url() -> None:
    with pytest.raises(InvalidArgument):
        make_embedder("tei", model="x")
    assert make_reranker("tei", model="x") is None


def test_model_identity_copies_any_identity_shaped_object() -> None:
    identity = ModelIdentity.of(FakeEmbedder(dim=8).identity)
    assert identity == ModelIdentity(
        name="chatseek/fake-embedder",
        revision="hashed-stems-v1",
        dim=8,
        max_seq_length=512,
        normalized=True,
        kind="embed",
    )
