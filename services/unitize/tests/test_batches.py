"""Agent link batches: status, batches of uncertain messages, validated and stored answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers_unitize import ACCOUNT, GROUP, Stores, make_stores, msg

from chatseek_core.errors import IndexNotReady, InvalidValue
from chatseek_unitize.batches import answer_batch, batch_status, get_batch, valid_answers
from chatseek_unitize.builds import build_chat
from chatseek_unitize.linking import RuleScorer


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    """A small forum chat (topics 1 and 9) with a reply, a mention and a service message."""
    s = make_stores(tmp_path / "data")
    s.chat(GROUP, kind="forum")
    s.put(
        [
            msg(1, 0, "who has a ladder?", sender=1, topic=1),
            msg(2, 1, "me, come by", sender=2, topic=1, reply_to=1),
            msg(3, 2, "thanks", sender=1, topic=1),
            msg(4, 3, "User2 what floor are you on?", sender=3, topic=1),
            msg(5, 4, "elections tomorrow", sender=4, topic=9),
            msg(6, 5, "", sender=4, topic=9, service=True),
            msg(7, 90, "did anyone vote yet", sender=5, topic=9),
        ]
    )
    s.drain()
    build_chat(s.unitize, ACCOUNT, GROUP, RuleScorer())
    try:
        yield s
    finally:
        s.close()


def _answer(s: Stores, answers: list[Any]) -> dict[str, Any]:
    return answer_batch(s.unitize, ACCOUNT, GROUP, json.dumps({"answers": answers}))


def test_status_counts_messages_uncertain_ones_and_answers(stores: Stores) -> None:
    status = batch_status(stores.unitize, ACCOUNT, GROUP)
    assert status["messages"] == 6
    assert status["unanswered_uncertain"] == 5
    assert status["answered"] == 0 and status["stale_answers"] == 0

    _answer(stores, [{"msg_id": 3, "parent": 2}])

    status = batch_status(stores.unitize, ACCOUNT, GROUP)
    assert status["answered"] == 1 and status["unanswered_uncertain"] == 4


def test_a_batch_holds_the_least_confident_unanswered_decisions_with_candidates(
    stores: Stores,
) -> None:
    batch = get_batch(stores.unitize, ACCOUNT, GROUP, size=3)

    picked = [m["msg_id"] for m in batch["messages"]]
    confidences = [m["current"]["confidence"] for m in batch["messages"]]
    assert confidences == sorted(confidences)
    assert 2 not in picked
    assert len(picked) == 3
    by_id = {m["msg_id"]: m for m in batch["messages"]}
    if 3 in by_id:
        candidates = [c["msg_id"] for c in by_id[3]["candidates"]]
        assert candidates and set(candidates) <= {1, 2}
    for m in batch["messages"]:
        assert all(c["msg_id"] != m["msg_id"] for c in m["candidates"])
    assert batch["answer_format"]["answers"][0]["parent"] == "int | 'new'"

    _answer(stores, [{"msg_id": m, "parent": "new"} for m in picked])
    again = get_batch(stores.unitize, ACCOUNT, GROUP, size=10)
    assert not set(picked) & {m["msg_id"] for m in again["messages"]}


def test_answers_are_checked_one_by_one_and_the_valid_ones_stored(stores: Stores) -> None:
    result = _answer(
        stores,
        [
            {"msg_id": 3, "parent": 2},
            {"msg_id": 3, "parent": 1},
            {"msg_id": 4, "parent": "new"},
            {"msg_id": 99, "parent": 1},
            {"msg_id": 1, "parent": 3},
            {"msg_id": 7, "parent": 4},
            {"msg_id": 7, "parent": 6},
            {"msg_id": 6, "parent": 5},
            {"msg_id": 7, "parent": 98},
            {"msg_id": "7", "parent": 5},
            {"msg_id": 7, "parent": True},
            ["not", "an", "object"],
        ],
    )

    assert result["stored"] == 2
    reasons = [(r["msg_id"], r["reason"]) for r in result["rejected"]]
    assert reasons == [
        (3, "DUPLICATE"),
        (99, "MESSAGE_NOT_FOUND"),
        (1, "PARENT_NOT_EARLIER"),
        (7, "PARENT_IN_OTHER_TOPIC"),
        (7, "PARENT_NOT_LINKABLE"),
        (6, "NOT_LINKABLE"),
        (7, "PARENT_NOT_FOUND"),
        ("7", "INVALID_ENTRY"),
        (7, "INVALID_ENTRY"),
        (None, "INVALID_ENTRY"),
    ]
    assert valid_answers(stores.unitize, ACCOUNT, GROUP).valid == {3: 2, 4: None}


def test_a_new_answer_replaces_the_previous_one(stores: Stores) -> None:
    _answer(stores, [{"msg_id": 3, "parent": 2}])
    _answer(stores, [{"msg_id": 3, "parent": "new"}])
    assert valid_answers(stores.unitize, ACCOUNT, GROUP).valid == {3: None}


def test_a_document_that_is_not_an_answer_list_is_refused_whole(stores: Stores) -> None:
    for text in ("not json", '{"answer": []}', "[1, 2]"):
        with pytest.raises(InvalidValue) as caught:
            answer_batch(stores.unitize, ACCOUNT, GROUP, text)
        assert caught.value.reason == "INVALID_VALUE"
    assert valid_answers(stores.unitize, ACCOUNT, GROUP).valid == {}


def test_batch_size_must_be_in_range_and_unbuilt_chats_have_no_batches(stores: Stores) -> None:
    with pytest.raises(InvalidValue):
        get_batch(stores.unitize, ACCOUNT, GROUP, size=0)
    stores.chat(GROUP + 1)
    with pytest.raises(IndexNotReady) as caught:
        batch_status(stores.unitize, ACCOUNT, GROUP + 1)
    assert caught.value.reason == "INDEX_NOT_READY"
