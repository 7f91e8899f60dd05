"""Each list's weight in a hybrid search: the configured ones, and words first for a question
that names an exact token (a quoted phrase, a number, code, an acronym)."""

from __future__ import annotations

from dataclasses import replace

from chatseek_core.config import SearchConfig
from chatseek_fusion.hybrid import fusion_weights

DEFAULTS = SearchConfig()


def test_an_ordinary_question_gets_the_configured_weights() -> None:
    weights = fusion_weights("how do I open a bank account in Georgia?", "hybrid", DEFAULTS)
    assert weights == {
        "words": DEFAULTS.words_weight,
        "messages": DEFAULTS.messages_weight,
        "meaning": DEFAULTS.meaning_weight,
        "conversation_words": DEFAULTS.conversation_words_weight,
        "conversation_meaning": DEFAULTS.conversation_meaning_weight,
    }


def test_a_question_naming_an_exact_token_weighs_words_more() -> None:
    for question in ("как продлить ВНЖ в Испании", "what did we pay in 2023", "chart.js tags"):
        weights = fusion_weights(question, "hybrid", DEFAULTS)
        assert (weights["words"], weights["meaning"]) == (
            DEFAULTS.exact_words_weight,
            DEFAULTS.exact_meaning_weight,
        ), question
        assert weights["words"] > DEFAULTS.words_weight
        assert weights["conversation_words"] == DEFAULTS.conversation_words_weight


def test_the_exact_weights_come_from_the_config() -> None:
    config = replace(DEFAULTS, exact_words_weight=0.7, exact_meaning_weight=0.3)
    weights = fusion_weights("ВНЖ", "hybrid", config)
    assert (weights["words"], weights["meaning"]) == (0.7, 0.3)


def test_rrf_and_the_single_list_modes_keep_their_weights() -> None:
    rrf = fusion_weights("ВНЖ", "hybrid", replace(DEFAULTS, fusion="rrf"))
    assert (rrf["words"], rrf["meaning"]) == (DEFAULTS.words_weight, DEFAULTS.meaning_weight)
    for mode in ("lexical", "dense"):
        weights = fusion_weights("ВНЖ", mode, DEFAULTS)
        assert (weights["words"], weights["meaning"]) == (
            DEFAULTS.words_weight,
            DEFAULTS.meaning_weight,
        )
        assert weights["messages"] == 0.0
