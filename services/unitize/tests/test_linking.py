"""Conversation linking: precedence, rules, the learned scorer and IRC quality."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from chatseek_core.errors import InvalidValue
from chatseek_unitize.linking import (
    NEW_FEATURES,
    PAIR_FEATURES,
    WEIGHTS_PATH,
    LearnedScorer,
    Link,
    RuleScorer,
    build_links,
    conversations,
)
from chatseek_unitize.model import Msg

T0 = 1_767_225_600  # 2026-01-01 00:00 UTC
IRC_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "eval" / "irc"
FIRST_ANNOTATED_ID = 1001
MIN_IRC_LINK_F1 = 0.65
PEOPLE = {1: "Ann", 2: "Bob", 3: "Carla", 4: "Иван Петров", 5: "Dmitri"}


def msg(msg_id: int, sender: int, text: str, seconds: int | None = None, **kw: Any) -> Msg:
    date = T0 + (seconds if seconds is not None else 20 * msg_id)
    return Msg(
        msg_id=msg_id, date=date, sender_id=sender, sender_name=PEOPLE[sender], text=text, **kw
    )


def by_id(links: list[Link]) -> dict[int, Link]:
    return {link.msg_id: link for link in links}


# --- precedence ---


def test_an_explicit_reply_wins_over_agent_answers_and_rules() -> None:
    msgs = [msg(1, 1, "anyone know a notary?"), msg(2, 2, "Ann, no"), msg(3, 3, "yes", reply_to=1)]
    links = by_id(build_links(msgs, agent_answers={3: 2}, scorer=RuleScorer()))
    assert (links[3].parent_id, links[3].reason, links[3].confidence) == (1, "reply", 1.0)


def test_a_stored_agent_answer_wins_over_the_rules() -> None:
    msgs = [msg(1, 1, "visa question"), msg(2, 2, "Ann: which visa?"), msg(3, 2, "tourist?")]
    links = by_id(build_links(msgs, agent_answers={2: None, 3: 1}, scorer=RuleScorer()))
    assert (links[2].parent_id, links[2].reason) == (None, "agent")
    assert (links[3].parent_id, links[3].reason) == (1, "agent")


def test_an_agent_answer_naming_a_missing_or_later_message_is_ignored() -> None:
    msgs = [msg(1, 1, "hello"), msg(2, 2, "Ann: hi"), msg(3, 3, "bye")]
    links = by_id(build_links(msgs, agent_answers={2: 999, 1: 3}, scorer=RuleScorer()))
    assert (links[2].parent_id, links[2].reason) == (1, "mention")
    assert (links[1].parent_id, links[1].reason) == (None, "new")


def test_a_reply_to_a_missing_message_falls_through_to_the_scorer() -> None:
    msgs = [msg(5, 1, "question"), msg(6, 2, "Ann, answer", reply_to=2)]
    links = by_id(build_links(msgs, agent_answers={}, scorer=RuleScorer()))
    assert (links[6].parent_id, links[6].reason) == (5, "mention")


def test_topics_constrain_replies_agent_answers_and_rules() -> None:
    msgs = [
        msg(1, 1, "in topic A", topic_id=10),
        msg(2, 2, "Ann: replying from topic B", topic_id=20),
        msg(3, 2, "explicit reply across topics", topic_id=20, reply_to=1),
        msg(4, 3, "agent says topic A", topic_id=20),
    ]
    for scorer in (RuleScorer(), LearnedScorer()):
        links = by_id(build_links(msgs, agent_answers={4: 1}, scorer=scorer))
        assert links[2].parent_id is None
        assert links[3].parent_id in (None, 2)
        assert links[4].parent_id in (None, 2, 3)


def test_service_and_empty_messages_get_no_link_and_are_never_parents() -> None:
    msgs = [
        msg(1, 1, "Ann joined", is_service=True),
        msg(2, 2, "Ann: welcome", reply_to=1),
        msg(3, 3, "   "),
    ]
    links = build_links(msgs, agent_answers={3: 1}, scorer=RuleScorer())
    assert [(link.msg_id, link.parent_id) for link in links] == [(2, None)]


# --- the baseline rules ---


def test_rules_link_a_mention_to_the_senders_latest_message_within_fifty() -> None:
    msgs = [msg(1, 1, "my first"), msg(2, 1, "my second")]
    msgs += [msg(i, 3, f"noise {i}") for i in range(3, 40)]
    msgs.append(msg(40, 2, "Ann: try the consulate"))
    links = by_id(build_links(msgs, agent_answers={}, scorer=RuleScorer()))
    assert (links[40].parent_id, links[40].reason) == (2, "mention")


def test_rules_ignore_a_mention_older_than_fifty_messages() -> None:
    msgs = [msg(1, 1, "old")] + [msg(i, 3, f"noise {i}") for i in range(2, 60)]
    msgs.append(msg(60, 2, "Ann: late answer"))
    assert by_id(build_links(msgs, agent_answers={}, scorer=RuleScorer()))[60].reason == "new"


def test_rules_continue_the_same_author_within_ten_messages_and_five_minutes() -> None:
    msgs = [msg(1, 1, "one", 0), msg(2, 2, "other", 60), msg(3, 1, "two", 290)]
    msgs += [msg(4, 1, "three", 700)]
    links = by_id(build_links(msgs, agent_answers={}, scorer=RuleScorer()))
    assert (links[3].parent_id, links[3].reason) == (1, "same_author")
    assert (links[4].parent_id, links[4].reason) == (None, "new")


def test_rules_match_russian_names_also_when_inflected() -> None:
    msgs = [msg(1, 4, "кто знает хорошего нотариуса?"), msg(2, 5, "Ивану лучше спросить в чате")]
    links = by_id(build_links(msgs, agent_answers={}, scorer=RuleScorer()))
    assert (links[2].parent_id, links[2].reason) == (1, "mention")


# --- the learned scorer ---


def test_the_learned_scorer_follows_addressing_to_the_right_person() -> None:
    msgs = [
        msg(1, 1, "how do I renew a residence permit?"),
        msg(2, 3, "anyone selling a bike?"),
        msg(3, 2, "Ann: book an appointment at the immigration office first"),
        msg(4, 5, "Carla, I have one, what size?"),
    ]
    links = by_id(build_links(msgs, agent_answers={}, scorer=LearnedScorer()))
    assert (links[3].parent_id, links[3].reason) == (1, "scored")
    assert links[4].parent_id == 2
    assert links[1].parent_id is None and links[1].reason == "new"


def test_learned_links_are_chronological_confident_and_list_rejected_candidates() -> None:
    msgs = [msg(i, 1 + i % 3, f"message number {i} about flats") for i in range(1, 30)]
    links = build_links(msgs, agent_answers={}, scorer=LearnedScorer())
    assert [link.msg_id for link in links] == list(range(1, 30))
    for link in links:
        assert 0.0 <= link.confidence <= 1.0
        assert link.parent_id is None or link.parent_id < link.msg_id
        scores = [s for _, s in link.rejected]
        assert scores == sorted(scores, reverse=True)
        assert all(s <= link.confidence for s in scores)


def test_the_learned_scorer_refuses_weights_for_other_features() -> None:
    doc = json.loads(WEIGHTS_PATH.read_text("utf-8"))
    assert doc["pair_features"] == list(PAIR_FEATURES)
    assert doc["new_features"] == list(NEW_FEATURES)
    doc["pair_features"] = doc["pair_features"][:-1]
    with pytest.raises(InvalidValue):
        LearnedScorer(doc)


def test_an_embedding_function_needs_a_similarity_model() -> None:
    doc = json.loads(WEIGHTS_PATH.read_text("utf-8"))
    doc["models"].pop("similarity", None)
    with pytest.raises(InvalidValue):
        LearnedScorer(doc, embed=lambda texts: np.ones((len(texts), 4)) / 2)


def test_the_similarity_model_uses_the_injected_embeddings() -> None:
    topics = [("visa", "consulate"), ("bike",), ("flat",)]

    def embed(texts: Sequence[str]) -> np.ndarray:
        rows = np.array([[float(any(w in t for w in ws)) for ws in topics] + [0.1] for t in texts])
        norms: np.ndarray = np.linalg.norm(rows, axis=1, keepdims=True)
        return np.asarray(rows / norms, dtype=float)

    msgs = [msg(i, 1 + i % 4, t) for i, t in enumerate(["visa?", "bike?", "flat?"] * 4, 1)]
    msgs.append(msg(20, 5, "the consulate opens at nine"))
    link = by_id(build_links(msgs, agent_answers={}, scorer=LearnedScorer(embed=embed)))[20]
    ranked = [link.parent_id] + [cand for cand, _ in link.rejected]
    best = next(cand for cand in ranked if cand is not None and cand != -1)
    assert msgs[best - 1].text == "visa?"


# --- conversations ---


def test_conversations_are_the_connected_components_in_order() -> None:
    links = [
        Link(1, None, "new", 1.0),
        Link(2, None, "new", 1.0),
        Link(3, 1, "reply", 1.0),
        Link(4, 3, "scored", 0.7),
        Link(5, 2, "mention", 0.8),
        Link(6, 99, "agent", 1.0),
    ]
    assert conversations(links) == [[1, 3, 4], [2, 5], [6]]
    assert sorted(map(sorted, conversations(reversed(links)))) == [[1, 3, 4], [2, 5], [6]]


# --- IRC quality ---


def _link_f1(files: list[Any], scorer: Any) -> float:
    matched = predicted = gold_total = 0
    for f in files:
        pred = {m.msg_id: m.msg_id for m in f.msgs}
        for link in build_links(f.msgs, agent_answers={}, scorer=scorer):
            pred[link.msg_id] = link.parent_id if link.parent_id is not None else link.msg_id
        for child, parents in f.gold.items():
            if child < FIRST_ANNOTATED_ID:
                continue
            gold_total += len(parents)
            predicted += 1
            matched += pred[child] in parents
    precision, recall = matched / predicted, matched / gold_total
    return 2 * precision * recall / (precision + recall)


def test_the_shipped_weights_reach_the_irc_link_f1_floor() -> None:
    if not IRC_DIR.is_dir():
        pytest.skip(f"IRC eval data not found at {IRC_DIR}")
    from irc_tuning import load_irc

    files = load_irc(IRC_DIR)
    learned = _link_f1(files, LearnedScorer())
    rules = _link_f1(files, RuleScorer())
    assert learned >= MIN_IRC_LINK_F1
    assert learned > rules
