from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from chatseek_core.errors import InvalidArgument
from chatseek_core.fakes import FAKE_DIM, MAX_TEXTS, FakeEmbedder, FakeReranker

PROBE = "Кто продаёт велосипед недорого?"


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def test_fake_vectors_are_unit_length_float32_of_the_requested_width() -> None:
    vectors = FakeEmbedder(dim=64).embed(["one text", "another text", "🙂"], role="passage")
    assert vectors.dtype == np.float32
    assert vectors.shape == (3, 64)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_fake_embedder_is_deterministic_across_instances() -> None:
    first = FakeEmbedder().embed([PROBE, "rent a flat"], role="query")
    second = FakeEmbedder().embed([PROBE, "rent a flat"], role="query")
    assert np.array_equal(first, second)


def test_fake_vectors_are_identical_in_a_fresh_process() -> None:
    code = (
        "import json; from chatseek_core.fakes import FakeEmbedder; "
        f"print(json.dumps(FakeEmbedder().embed([{PROBE!r}], role='query')[0].tolist()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    here = FakeEmbedder().embed([PROBE], role="query")[0]
    assert np.allclose(np.asarray(json.loads(out), dtype=np.float32), here)


def test_texts_sharing_stems_rank_above_unrelated_texts() -> None:
    embedder = FakeEmbedder()
    query = embedder.embed(["renting a flat in the centre"], role="query")[0]
    passages = embedder.embed(
        ["who rents flats near the centre?", "my cat refuses to eat", "invoice for october"],
        role="passage",
    )
    scores = passages @ query
    assert int(np.argmax(scores)) == 0
    assert scores[0] > scores[1] + 0.3


def test_russian_inflections_land_close() -> None:
    embedder = FakeEmbedder()
    a, b, unrelated = embedder.embed(
        ["счёт за квартиру", "счета за квартиры", "кот потерялся"], role="passage"
    )
    assert _cos(a, b) > 0.99
    assert _cos(a, unrelated) < 0.3


def test_the_role_is_checked_but_does_not_change_the_vector() -> None:
    embedder = FakeEmbedder()
    assert np.array_equal(
        embedder.embed(["same text"], role="query"), embedder.embed(["same text"], role="passage")
    )


def test_an_empty_batch_gives_zero_rows_of_the_right_width() -> None:
    vectors = FakeEmbedder(dim=32).embed([], role="passage")
    assert vectors.shape == (0, 32)
    assert vectors.dtype == np.float32


@pytest.mark.parametrize(
    "texts",
    [
        pytest.param("a bare string", id="bare-string"),
        pytest.param(["fine", 3], id="non-string-item"),
        pytest.param(["fine", "   "], id="blank-item"),
        pytest.param(["x"] * (MAX_TEXTS + 1), id="too-many"),
    ],
)
def test_fake_embedder_refuses_what_production_refuses(texts: object) -> None:
    with pytest.raises(InvalidArgument) as caught:
        FakeEmbedder().embed(texts, role="passage")  # type: ignore[arg-type]
    assert caught.value.reason == "INVALID_ARGUMENT"


def test_fake_embedder_refuses_an_unknown_role() -> None:
    with pytest.raises(InvalidArgument) as caught:
        FakeEmbedder().embed(["text"], role="document")  # type: ignore[arg-type]
    assert caught.value.metadata["field"] == "role"


def test_fake_reranker_scores_covering_texts_higher_and_keeps_input_order() -> None:
    reranker = FakeReranker()
    texts = ["my cat is lost", "renting a flat: who knows a landlord?", "a flat tyre"]
    scores = reranker.rerank("rent a flat", texts)
    assert len(scores) == 3
    assert scores[1] > scores[2] > scores[0]
    assert reranker.rerank("rent a flat", texts[::-1]) == scores[::-1]


def test_fake_reranker_prefers_the_denser_match_when_coverage_ties() -> None:
    scores = FakeReranker().rerank("flat", ["flat", "flat and many other unrelated words here"])
    assert scores[0] > scores[1]


def test_fake_reranker_answers_an_empty_batch_and_refuses_a_blank_query() -> None:
    reranker = FakeReranker()
    assert reranker.rerank("query", []) == []
    with pytest.raises(InvalidArgument):
        reranker.rerank("  ", ["text"])


def test_fake_identities_have_the_embed_service_shape() -> None:
    embed, rerank = FakeEmbedder().identity, FakeReranker().identity
    assert (embed.kind, embed.dim, embed.normalized) == ("embed", FAKE_DIM, True)
    assert (rerank.kind, rerank.dim) == ("rerank", 0)
