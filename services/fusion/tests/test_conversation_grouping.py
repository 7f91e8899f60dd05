"""Conversation search's grouping of hybrid search's ranking: which conversation a unit belongs
to and how ranked units become results with passages."""

from __future__ import annotations

from operator import itemgetter

from chatseek_fusion.conversations import group_passages, main_conversation

AT = itemgetter(1)  # (chat, message id): a message's place in its chat


def test_a_unit_belongs_to_the_conversation_holding_most_of_its_messages() -> None:
    placed = {1: "a", 2: "b", 3: "b", 4: "a", 5: "b"}
    assert main_conversation([1, 2, 3, 4, 5], placed) == "b"


def test_a_tie_goes_to_the_conversation_of_the_earliest_message() -> None:
    placed = {10: "late", 11: "late", 3: "early", 4: "early"}
    assert main_conversation([11, 10, 4, 3], placed) == "early"


def test_messages_outside_every_conversation_do_not_count() -> None:
    assert main_conversation([1, 2, 3], {3: "a"}) == "a"
    assert main_conversation([1, 2], {}) is None


def test_units_ranked_together_share_a_result_and_order_is_kept() -> None:
    ranked = [
        (1, "A", [(0, 1), (0, 2)]),
        (2, "A", [(0, 3)]),
        (3, "B", [(0, 9)]),
        (4, "A", [(0, 5)]),
    ]
    assert group_passages(ranked, k=10, position=AT) == [
        ("A", [(1, [(0, 1), (0, 2)]), (2, [(0, 3)])]),
        ("B", [(3, [(0, 9)])]),
        # A better passage of B separates this one from A's first result: the text a reader
        # walks through follows the ranking.
        ("A", [(4, [(0, 5)])]),
    ]


def test_a_result_holds_at_most_max_evidence_passages() -> None:
    ranked = [(n, "A", [(0, n)]) for n in range(1, 6)]
    groups = group_passages(ranked, k=10, max_evidence=2, position=AT)
    assert [[unit for unit, _ in passages] for _, passages in groups] == [[1, 2], [3, 4], [5]]


def test_a_passage_leaves_out_messages_shown_before_and_a_repeat_is_skipped() -> None:
    ranked = [
        (1, "A", [(0, 1), (0, 2), (0, 3)]),
        (2, "B", [(0, 2), (0, 3), (0, 4)]),  # overlaps unit 1 in another conversation
        (3, "B", [(0, 3), (0, 4)]),  # holds nothing new
        (4, "C", [(7, 3)]),  # the same message id in another chat is another message
    ]
    assert group_passages(ranked, k=10, position=AT) == [
        ("A", [(1, [(0, 1), (0, 2), (0, 3)])]),
        ("B", [(2, [(0, 4)])]),
        ("C", [(4, [(7, 3)])]),
    ]


def test_units_of_no_conversation_are_skipped_and_k_bounds_the_results() -> None:
    ranked = [
        (1, None, [(0, 1)]),
        (2, "A", [(0, 2)]),
        (3, "B", [(0, 3)]),
        (4, "B", [(0, 4)]),  # joins the last result even at k
        (5, "C", [(0, 5)]),
    ]
    groups = group_passages(ranked, k=2, position=AT)
    assert [(c, [u for u, _ in p]) for c, p in groups] == [("A", [2]), ("B", [3, 4])]


def test_a_passage_apart_from_what_its_result_covers_opens_a_result_of_its_own() -> None:
    ranked = [
        (1, "A", [(0, 10), (0, 11), (0, 12)]),
        (2, "A", [(0, 20), (0, 21)]),  # the same conversation further on: another excerpt
        (3, "A", [(0, 22), (0, 23)]),  # adjoins unit 2's stretch (20..21)
        (4, "A", [(0, 12), (0, 13)]),  # overlaps unit 1's, but the last result is 20..23
        (5, "A", [(0, 14)]),  # adjoins unit 4's stretch (12..13)
    ]
    groups = group_passages(ranked, k=10, position=AT)
    assert [[unit for unit, _ in passages] for _, passages in groups] == [[1], [2, 3], [4, 5]]
    # A passage is the messages nothing showed before; the stretch is the whole unit's.
    assert groups[2] == ("A", [(4, [(0, 13)]), (5, [(0, 14)])])
