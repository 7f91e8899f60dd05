from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest

from chatseek_embed.local import (
    BF16_MIN_COSINE,
    BF16_MIN_SPEEDUP,
    LocalEmbedder,
    load_local_embedder,
)
from chatseek_embed.registry import PACKAGED_MINILM

SENTENCES = (
    "where did we discuss renting a flat near the old town?",
    "Кто знает нормального юриста по ВНЖ?",
    "invoice 2024-117 attached, due on the 15th",
    "Счёт за интернет пришёл на старый адрес",
    "ok",
    "да",
    "thanks everyone, found it!",
    "Продаю диван, самовывоз, недорого",
    "The ferry schedule changes in November; the 7:40 boat is cancelled until spring.",
    "Подскажите, можно ли оформить страховку онлайн без местного номера телефона?",
    "[2026-10-03 18:22] Mark: anyone up for volleyball on the beach tomorrow morning?",
    "[2026-10-04 09:01] Ольга: сегодня отключат воду с 10 до 16, набирайте заранее",
    "https://t.me/c/123456/789 — see the pinned message for the rules",
    "password reset code 551203, do not share it",
    "Our landlord refuses to return the deposit, claiming the walls need repainting.",
    "Где купить нормальный кофе в зёрнах, а не эту пыль из супермаркета?",
    "A 1500 character limit means long messages become windows of their own.",
    "Ищу попутчиков в горы на выходные, есть два места в машине",
    "Does the pharmacy on the corner accept foreign prescriptions?",
    "Кот соседей опять сидит у нас на балконе 🙂",
    "📎 [document: lease_agreement_v3.pdf]",
    "meeting moved → Thursday 19:00, same place",
    "Курс евро сегодня упал, меняйте сейчас",
    "The visa office wants originals of every document plus two notarised copies.",
    "Ребята, кто-нибудь сдавал экзамен на права здесь? Сколько попыток ушло?",
)


def _texts() -> list[str]:
    """Fifty texts: the sentences alone, and longer messages stitched from several of them."""
    stitched = [
        " ".join(SENTENCES[(i * 7 + k) % len(SENTENCES)] for k in range(2 + i % 5))
        for i in range(len(SENTENCES))
    ]
    return list(SENTENCES) + stitched


def _throughput(embedder: LocalEmbedder, texts: list[str]) -> tuple[np.ndarray, float]:
    embedder.embed(texts[:8], role="passage")
    started = time.perf_counter()
    vectors = embedder.embed(texts, role="passage")
    return vectors, len(texts) / (time.perf_counter() - started)


def test_bf16_matches_fp32_on_the_packaged_model(
    record_property: Callable[[str, object], None], capsys: pytest.CaptureFixture[str]
) -> None:
    texts = _texts()
    assert len(texts) == 50
    fp32 = load_local_embedder(PACKAGED_MINILM, device="cpu", precision="fp32")
    bf16 = load_local_embedder(PACKAGED_MINILM, device="cpu", precision="bf16")
    reference, fp32_rate = _throughput(fp32, texts)
    candidate, bf16_rate = _throughput(bf16, texts)
    cosines = np.sum(reference * candidate, axis=1)
    record_property("min_cosine", float(cosines.min()))
    record_property("fp32_passages_per_s", fp32_rate)
    record_property("bf16_passages_per_s", bf16_rate)
    with capsys.disabled():
        print(
            f"\nbf16 vs fp32 on {len(texts)} texts: min cosine {cosines.min():.6f}, "
            f"fp32 {fp32_rate:.1f}/s, bf16 {bf16_rate:.1f}/s"
        )
    assert float(cosines.min()) >= BF16_MIN_COSINE


def test_auto_precision_follows_its_own_calibration_numbers() -> None:
    embedder = load_local_embedder(PACKAGED_MINILM, device="cpu", precision="auto")
    choice = embedder.precision
    if choice.fp32_per_s is None:
        assert choice.resolved == "fp32"
        return
    assert choice.bf16_per_s is not None and choice.agreement is not None
    chose_bf16 = (
        choice.agreement >= BF16_MIN_COSINE
        and choice.bf16_per_s / choice.fp32_per_s >= BF16_MIN_SPEEDUP
    )
    assert choice.resolved == ("bf16" if chose_bf16 else "fp32")
