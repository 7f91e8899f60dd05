from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

from chatseek_core.errors import (
    FailedPrecondition,
    InvalidArgument,
    ModelNotFound,
    ModelUnavailable,
)
from chatseek_embed.backends import make_backends
from chatseek_embed.local import (
    LocalEmbedder,
    LocalReranker,
    load_local_embedder,
    load_local_reranker,
    loaded_models,
    plan_batches,
    resolve_device,
)
from chatseek_embed.registry import PACKAGED_MINILM, get_spec, packaged_minilm_path

TINY_VOCAB = (
    "[PAD] [UNK] [CLS] [SEP] [MASK] where rent flat a the in berlin cat dog lost invoice "
    "october pay bike pump borrow weekend"
).split()


@pytest.fixture(autouse=True)
def _offline_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach the network: the HF hub is told it is offline."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def minilm() -> LocalEmbedder:
    return load_local_embedder(PACKAGED_MINILM, device="cpu", precision="fp32")


def _linked_copy(source: Path, target: Path, *, real: tuple[str, ...] = ()) -> Path:
    """A copy of a model directory whose files are symlinks, except ``real`` ones (copied)."""
    for path in source.rglob("*"):
        if path.is_file():
            rel = path.relative_to(source)
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            if rel.as_posix() in real:
                (target / rel).write_bytes(path.read_bytes())
            else:
                (target / rel).symlink_to(path)
    return target


def _tiny_cross_encoder(directory: Path, *, num_labels: int = 1) -> Path:
    """A random one-layer BERT sequence classifier with a 21-word vocabulary, saved to disk."""
    directory.mkdir(parents=True, exist_ok=True)
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(TINY_VOCAB) + "\n")
    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        vocab_size=len(TINY_VOCAB),
        initializer_range=0.5,
    )
    config.num_labels = num_labels
    BertForSequenceClassification(config).save_pretrained(directory)
    BertTokenizer(str(vocab)).save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def tiny_reranker_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tiny_cross_encoder(tmp_path_factory.mktemp("tiny") / "cross-encoder")


# --- embedder ---


def test_packaged_minilm_gives_unit_length_384_float32_vectors(minilm: LocalEmbedder) -> None:
    vectors = minilm.embed(["hello world", "где снять квартиру?"], role="passage")
    assert vectors.shape == (2, 384)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_the_packaged_model_reports_its_pinned_identity(minilm: LocalEmbedder) -> None:
    identity = minilm.identity
    assert identity.name == PACKAGED_MINILM
    assert identity.revision == get_spec(PACKAGED_MINILM).revision  # type: ignore[union-attr]
    assert (identity.dim, identity.max_seq_length, identity.normalized, identity.kind) == (
        384,
        256,
        True,
        "embed",
    )
    assert minilm.prompts == {"query": "", "passage": ""}
    assert minilm.precision.resolved == "fp32"


def test_a_paraphrase_ranks_above_an_unrelated_text(minilm: LocalEmbedder) -> None:
    query = minilm.embed(["where can I rent an apartment?"], role="query")[0]
    passages = minilm.embed(
        [
            "the football match starts at nine tonight",
            "looking for a flat to rent, any landlords here?",
            "my invoice from October is still unpaid",
        ],
        role="passage",
    )
    scores = passages @ query
    assert int(np.argmax(scores)) == 1


def test_an_empty_batch_gives_zero_rows(minilm: LocalEmbedder) -> None:
    assert minilm.embed([], role="query").shape == (0, 384)


def test_batching_preserves_input_order_across_mixed_lengths(minilm: LocalEmbedder) -> None:
    long_tail = "a much longer message that rambles on about bikes, pumps and weekends " * 3
    texts = [
        f"{long_tail} number {i}" if i % 17 == 0 else f"short message {i} about bikes"
        for i in range(70)
    ]
    together = minilm.embed(texts, role="passage")
    picks = [0, 1, 22, 35, 44, 69]
    alone = np.vstack([minilm.embed([texts[i]], role="passage") for i in picks])
    assert np.allclose(together[picks], alone, atol=1e-4)


def test_plan_batches_covers_every_index_once_within_the_budget() -> None:
    lengths = [5, 300, 40, 40, 7, 1000, 12, 300, 1]
    batches = plan_batches(lengths, token_budget=640, max_items=3)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) <= 3
        assert len(batch) == 1 or len(batch) * longest <= 640
        assert min(lengths[i] for i in batch) * 2 >= longest
    assert [5] in batches
    assert [2, 3] in batches


def test_max_seq_length_is_honoured(minilm: LocalEmbedder) -> None:
    short = load_local_embedder(PACKAGED_MINILM, device="cpu", precision="fp32", max_seq_length=16)
    assert short.identity.max_seq_length == 16
    head = "the quick brown fox jumps over the lazy dog near the river bank today and"
    texts = [head + " then goes home", head + " eats an enormous birthday cake with friends"]
    clipped = short.embed(texts, role="passage")
    assert np.allclose(clipped[0], clipped[1], atol=1e-6)
    full = minilm.embed(texts, role="passage")
    assert float(full[0] @ full[1]) < 0.99


@pytest.mark.parametrize("length", [2, 100_000])
def test_max_seq_length_outside_the_model_range_is_refused(length: int) -> None:
    with pytest.raises(InvalidArgument):
        load_local_embedder(PACKAGED_MINILM, device="cpu", precision="fp32", max_seq_length=length)


@pytest.mark.timeout(30)
def test_a_missing_model_is_model_not_found_without_touching_the_network(
    tmp_path: Path,
) -> None:
    with pytest.raises(ModelNotFound) as caught:
        load_local_embedder("someone/never-downloaded", cache_dir=tmp_path)
    assert caught.value.reason == "MODEL_NOT_FOUND"
    assert caught.value.hint == "chatseek models download someone/never-downloaded"


def test_a_directory_that_is_not_a_model_is_model_unavailable(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelUnavailable):
        load_local_embedder(str(tmp_path), device="cpu", precision="fp32")


def test_a_model_loads_once_per_process_even_from_many_threads(tmp_path: Path) -> None:
    copy = _linked_copy(packaged_minilm_path(), tmp_path / "minilm-copy")
    before = set(loaded_models())
    results: list[LocalEmbedder] = []
    errors: list[BaseException] = []

    def load() -> None:
        try:
            results.append(load_local_embedder(str(copy), device="cpu", precision="fp32"))
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(set(loaded_models()) - before) == 1
    assert all(r.precision is results[0].precision for r in results)
    assert results[0].identity.name == str(copy.resolve())


def test_the_model_own_prompts_win_over_the_table(tmp_path: Path) -> None:
    copy = _linked_copy(
        packaged_minilm_path(), tmp_path / "prompted", real=("config_sentence_transformers.json",)
    )
    config_path = copy / "config_sentence_transformers.json"
    config = json.loads(config_path.read_text())
    config["prompts"] = {"query": "search_query: ", "document": "search_document: "}
    config_path.write_text(json.dumps(config))
    embedder = load_local_embedder(str(copy), device="cpu", precision="fp32")
    assert embedder.prompts == {"query": "search_query: ", "passage": "search_document: "}
    as_query = embedder.embed(["bike pump"], role="query")[0]
    as_passage = embedder.embed(["bike pump"], role="passage")[0]
    assert float(as_query @ as_passage) < 0.999


def test_the_device_defaults_to_what_the_machine_has() -> None:
    expected = "mps" if torch.backends.mps.is_available() else "cuda"
    if not (torch.backends.mps.is_available() or torch.cuda.is_available()):
        expected = "cpu"
    assert resolve_device(None) == expected
    assert resolve_device("auto") == expected
    assert resolve_device("CPU") == "cpu"


def test_an_unknown_device_or_precision_is_refused() -> None:
    with pytest.raises(InvalidArgument):
        resolve_device("tpu")
    with pytest.raises(InvalidArgument):
        load_local_embedder(PACKAGED_MINILM, device="cpu", precision="int4")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_asking_for_an_absent_accelerator_is_a_failed_precondition() -> None:
    with pytest.raises(FailedPrecondition):
        resolve_device("cuda")


def test_make_backends_local_without_a_rerank_model_has_no_reranker() -> None:
    embedder, reranker = make_backends(
        "local", embed_model=PACKAGED_MINILM, rerank_model=None, device="cpu", precision="fp32"
    )
    assert isinstance(embedder, LocalEmbedder)
    assert reranker is None


# --- reranker ---


@pytest.fixture(scope="module")
def tiny_reranker(tiny_reranker_dir: Path) -> LocalReranker:
    return load_local_reranker(str(tiny_reranker_dir), device="cpu", precision="fp32")


def test_the_cross_encoder_gives_one_finite_score_per_text_in_input_order(
    tiny_reranker: LocalReranker,
) -> None:
    texts = [
        "rent a flat in berlin",
        "cat lost",
        "invoice october pay",
        "bike pump borrow weekend",
        "dog",
    ]
    scores = tiny_reranker.rerank("where rent flat", texts)
    assert len(scores) == len(texts)
    assert all(np.isfinite(scores))
    assert len({round(s, 6) for s in scores}) > 1
    reversed_scores = tiny_reranker.rerank("where rent flat", texts[::-1])
    assert np.allclose(reversed_scores, scores[::-1], atol=1e-5)


def test_the_cross_encoder_answers_an_empty_batch_and_has_a_rerank_identity(
    tiny_reranker: LocalReranker, tiny_reranker_dir: Path
) -> None:
    assert tiny_reranker.rerank("where rent flat", []) == []
    identity = tiny_reranker.identity
    assert (identity.kind, identity.dim, identity.normalized) == ("rerank", 0, False)
    assert identity.revision.startswith("sha256:")
    assert identity.name == str(tiny_reranker_dir.resolve())


def test_a_multi_label_classifier_is_refused_as_a_reranker(tmp_path: Path) -> None:
    directory = _tiny_cross_encoder(tmp_path / "two-labels", num_labels=2)
    with pytest.raises(InvalidArgument):
        load_local_reranker(str(directory), device="cpu", precision="fp32")


def test_auto_precision_calibrates_on_cpu_and_records_why(tiny_reranker_dir: Path) -> None:
    reranker = load_local_reranker(str(tiny_reranker_dir), device="cpu", precision="auto")
    choice = reranker.precision
    assert choice.requested == "auto"
    assert choice.resolved in ("fp32", "bf16")
    assert choice.reason
    if choice.fp32_per_s is not None:
        assert choice.bf16_per_s is not None and choice.agreement is not None
    assert all(np.isfinite(reranker.rerank("where rent flat", ["rent a flat", "cat"])))
