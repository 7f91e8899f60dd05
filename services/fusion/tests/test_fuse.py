"""The fusion arithmetic: RRF, the convex combination, normalisation, reactions, dedup, script,
exact tokens."""

from __future__ import annotations

import math

import pytest

from chatseek_fusion.fuse import (
    add_context,
    context_scores,
    convex,
    dedup,
    exact_tokens,
    minmax,
    reaction_bonus,
    rrf,
    script_of,
)


def test_rrf_sums_weighted_reciprocal_ranks() -> None:
    fused = rrf({"words": [1, 2, 3], "meaning": [3, 4]}, {"words": 1.0, "meaning": 0.5}, k=10)
    scores = {f.unit_id: f.score for f in fused}
    assert scores[1] == pytest.approx(1 / 11)
    assert scores[3] == pytest.approx(1 / 13 + 0.5 / 11)
    assert scores[4] == pytest.approx(0.5 / 12)
    assert [f.unit_id for f in fused] == [3, 1, 2, 4]
    by_id = {f.unit_id: f for f in fused}
    assert by_id[3].by == ["words", "meaning"] and by_id[3].ranks == {"words": 3, "meaning": 1}


def test_rrf_ignores_repeats_and_drops_zero_weight_lists() -> None:
    fused = rrf({"words": [5, 5, 6], "messages": [7]}, {"words": 1.0, "messages": 0.0}, k=60)
    assert [f.unit_id for f in fused] == [5, 6]
    assert {f.unit_id: f.ranks["words"] for f in fused} == {5: 1, 6: 2}


def test_rrf_breaks_ties_by_unit_id() -> None:
    fused = rrf({"a": [9], "b": [4]}, k=60)
    assert [f.unit_id for f in fused] == [4, 9]


def test_convex_scales_each_list_and_weighs_them() -> None:
    lists = {
        "words": [(1, 12.0), (2, 8.0), (3, 4.0)],  # scaled 1, 0.5, 0
        "meaning": [(3, 0.9), (1, 0.7), (4, 0.5)],  # scaled 1, 0.5, 0
    }
    fused = convex(lists, {"words": 0.6, "meaning": 0.4})
    scores = {f.unit_id: f.score for f in fused}
    assert scores[1] == pytest.approx(0.6 * 1.0 + 0.4 * 0.5)
    assert scores[2] == pytest.approx(0.6 * 0.5)
    assert scores[3] == pytest.approx(0.4 * 1.0)
    assert scores[4] == pytest.approx(0.0)
    assert [f.unit_id for f in fused] == [1, 3, 2, 4]
    assert {f.unit_id: f.ranks for f in fused}[3] == {"words": 3, "meaning": 1}


def test_a_meaning_only_unit_with_a_strong_cosine_outranks_weak_keyword_matches() -> None:
    """The candidate pool is the union of the lists: a unit no word matched can win."""
    words = [(u, 10.0 - u * 0.01) for u in range(1, 101)]  # 100 near-equal BM25 hits...
    words[0] = (1, 20.0)  # ...and one clear one
    meaning = [(500, 0.92), (1, 0.40), (2, 0.35)]
    fused = convex({"words": words, "meaning": meaning}, {"words": 0.4, "meaning": 0.6})
    order = [f.unit_id for f in fused]
    assert set(order[:2]) == {1, 500}  # found by meaning alone, ahead of 99 keyword hits
    under_rrf = [
        f.unit_id
        for f in rrf(
            {"words": [u for u, _ in words], "meaning": [500]}, {"words": 1, "meaning": 0.25}
        )
    ]
    assert under_rrf.index(500) > 10  # what the old weights did with it


def test_convex_only_pools_the_top_of_each_list() -> None:
    words = [(u, float(100 - u)) for u in range(50)]
    fused = convex({"words": words}, {"words": 1.0}, top=10)
    assert [f.unit_id for f in fused] == list(range(10))


def test_convex_list_without_weight_adds_no_candidates() -> None:
    fused = convex({"words": [(1, 3.0)], "messages": [(2, 9.0)]}, {"words": 1.0})
    assert [f.unit_id for f in fused] == [1]


def test_context_scores_give_each_unit_its_best_scaled_chunk() -> None:
    chunks = [(70, 9.0), (71, 5.0), (72, 1.0), (70, 0.5)]  # scaled 1, 0.5, 0; a repeat ignored
    held = {1: [71], 2: [72, 70], 3: [99], 4: []}
    assert context_scores(chunks, held) == {1: 0.5, 2: 1.0}
    # Only the list's top is scaled: beyond it a chunk counts as unlisted.
    assert context_scores(chunks, held, top=2) == {1: 0.0, 2: 1.0}
    assert context_scores([], held) == {}


def test_conversation_context_lifts_a_unit_whose_conversation_answers() -> None:
    """Two units the lists score alike: the one sitting in the best chunk wins."""
    fused = convex(
        {"words": [(1, 5.0), (2, 5.0), (3, 1.0)], "meaning": [(2, 0.8), (1, 0.8), (3, 0.1)]},
        {"words": 0.6, "meaning": 0.4},
    )
    assert [f.unit_id for f in fused] == [1, 2, 3]
    context = {
        "conversation_meaning": context_scores([(80, 0.9), (81, 0.2)], {1: [81], 2: [80]}),
        "conversation_words": context_scores([(81, 3.0)], {1: [81]}),
    }
    weights = {"conversation_meaning": 0.5, "conversation_words": 0.2}
    lifted = add_context(fused, context, weights)
    assert [f.unit_id for f in lifted] == [2, 1, 3]
    scores = {f.unit_id: f.score for f in lifted}
    assert scores[2] == pytest.approx(1.0 + 0.5 * 1.0)
    assert scores[1] == pytest.approx(1.0 + 0.2 * 1.0)
    assert scores[3] == pytest.approx(0.0)
    # No weight: the order stands (and the input was not changed).
    assert [f.unit_id for f in add_context(fused, context, {})] == [1, 2, 3]


def test_context_never_adds_a_candidate() -> None:
    fused = convex({"words": [(1, 2.0), (2, 1.0)]}, {"words": 1.0})
    lifted = add_context(
        fused, {"conversation_meaning": {9: 1.0, 2: 1.0}}, {"conversation_meaning": 2.0}
    )
    assert [f.unit_id for f in lifted] == [2, 1]


def test_minmax_and_its_edge_cases() -> None:
    assert minmax([]) == []
    assert minmax([3.0, 3.0]) == [1.0, 1.0]
    assert minmax([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]


def test_reaction_bonus_is_bounded_and_saturates() -> None:
    assert reaction_bonus(0, 0.05) == 0.0
    assert reaction_bonus(10, 0.0) == 0.0
    small, large = reaction_bonus(1, 0.05), reaction_bonus(10_000, 0.05)
    assert 0 < small < large < 0.05
    assert reaction_bonus(3, 0.05) == pytest.approx(0.05 * math.log1p(3) / (1 + math.log1p(3)))


def test_dedup_drops_hits_mostly_inside_a_better_hit_of_the_same_chat() -> None:
    ordered = [
        (1, 100, [10, 11, 12, 13]),
        (2, 100, [12, 13, 14]),  # 2 of 3 covered: dropped at 0.5
        (3, 200, [12, 13]),  # another chat: kept
        (4, 100, [20, 21]),
    ]
    assert dedup(ordered, overlap=0.5) == [1, 3, 4]
    assert dedup(ordered, overlap=0.9) == [1, 2, 3, 4]


def test_dedup_drops_a_hit_on_an_album_photo_that_a_better_hit_already_shows() -> None:
    window = (1, 100, [1, 2, 3, 10, 11, 12, 13, 14, 15, 16])  # the album is 10-13
    thread = (2, 100, [10, 11, 12, 13, 20, 21, 22, 23, 24])  # the album and its replies
    elsewhere = (3, 200, [10, 11, 12, 13])
    ordered = [window, thread, elsewhere]
    assert dedup(ordered, overlap=0.5) == [1, 2, 3]
    assert dedup(ordered, overlap=0.5, album_anchors={2: 12, 3: 12}) == [1, 3]
    assert dedup(ordered, overlap=0.5, album_anchors={2: 22}) == [1, 2, 3]


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("где снять квартиру?", "cyrillic"),
        ("where to rent a flat?", "latin"),
        ("ВНЖ for a DNI", "latin"),
        ("Аренда flat", "cyrillic"),
        ("12:30 !!", ""),
    ],
)
def test_script_of_counts_letters(text: str, script: str) -> None:
    assert script_of(text) == script


def test_dedup_counts_what_a_kept_hit_shows_of_another_chat() -> None:
    post, repeat, fresh = 1, 2, 3
    ordered = [(post, 0, [5]), (repeat, 1, [10, 11, 12]), (fresh, 1, [20, 21])]

    assert dedup(ordered, 0.5) == [post, repeat, fresh]
    assert dedup(ordered, 0.5, shows_too={post: [(1, [10, 11, 13])]}) == [post, fresh]


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("кого называют «двадцать два несчастья»?", ["«двадцать два несчастья»"]),
        ('When did she read "nothing is impossible"?', ['"nothing is impossible"']),
        ("Сколько вопросов задавали 30 мая 2018?", ["30", "2018"]),
        ("Какая метка стала основной: chart.js или chartjs?", ["chart.js"]),
        ("вакансии на C++ и C#, поле max_length", ["C++", "C#", "max_length"]),
        ("как продлить ВНЖ, если DNI ещё не выдали", ["ВНЖ", "DNI"]),
        ("Where did Caroline move from 4 years ago?", ["4"]),
        # Ordinary questions name nothing exactly: names, hyphens and slashes are words.
        ("Where is Lopakhin going to spend the winter?", []),
        ("Сколько сосед-помещик просил одолжить?", []),
        ("What musical artists/bands has Melanie seen?", []),
        ("I. A question", []),
        # A question typed in capitals is not a row of acronyms; its numbers still count.
        ("WHERE IS MY PASSPORT", []),
        ("WHO PAID 300 EUR", ["300"]),
        # A search of acronyms alone is not a question typed in capitals.
        ("ВНЖ", ["ВНЖ"]),
        ("DNI CUIT", ["DNI", "CUIT"]),
    ],
)
def test_exact_tokens_are_quotes_numbers_code_and_acronyms(text: str, tokens: list[str]) -> None:
    assert exact_tokens(text) == tokens
