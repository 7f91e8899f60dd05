"""The ``conversations`` CLI commands against a private local stack of all seven services."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.stack_helpers import cli, cli_json, stack_env

BASE = 1_767_258_000  # 2026-01-01T09:00:00Z
TITLE = "Neighbours"
LINES = [
    (1, 0, "Ann", "who has a ladder I could borrow?", None),
    (2, 1, "Ben", "me, come by after six", 1),
    (3, 2, "Cat", "is the tram running today?", None),
    (4, 3, "Dan", "Cat: no, strike until monday", None),
    (5, 4, "Ann", "thanks Ben, see you then", 2),
    (6, 400, "Eve", "lost keys near the park, anyone?", None),
]


def _export(folder: Path) -> Path:
    messages: list[dict[str, Any]] = []
    for msg_id, minute, sender, text, reply in LINES:
        when = BASE + minute * 60
        item: dict[str, Any] = {
            "id": msg_id,
            "type": "message",
            "date": f"2026-01-01T{9 + minute // 60:02d}:{minute % 60:02d}:00",
            "date_unixtime": str(when),
            "from": sender,
            "from_id": f"user{ord(sender[0])}",
            "text": text,
            "text_entities": [{"type": "plain", "text": text}],
        }
        if reply is not None:
            item["reply_to_message_id"] = reply
        messages.append(item)
    folder.mkdir(parents=True)
    doc = {"name": TITLE, "type": "private_supergroup", "id": 4242, "messages": messages}
    (folder / "result.json").write_text(json.dumps(doc), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A private stack with one small imported chat; always torn down."""
    root = tmp_path_factory.mktemp("conversations_cli")
    env = stack_env(root / "home")
    try:
        cli(env, "import", str(_export(root / "export")), "--json")
        yield env
    finally:
        cli(env, "stack", "down", check=False)


def test_build_list_show_and_links_through_the_cli(stack: dict[str, str]) -> None:
    built = cli_json(stack, "conversations", "build", "--chat", TITLE, "--json")
    report = built["chats"][0]
    assert report["messages"] == 6 and report["reasons"]["reply"] == 2

    listed = cli_json(stack, "conversations", "list", "--chat", TITLE, "--json")
    assert sum(c["message_count"] for c in listed["conversations"]) == 6
    assert "change" in listed["note"]
    first = next(c for c in listed["conversations"] if c["first_msg_id"] == 1)
    since = cli_json(
        stack, "conversations", "list", "--chat", TITLE, "--since", "2026-01-01T12:00:00Z", "--json"
    )
    assert any(c["last_msg_id"] == 6 for c in since["conversations"])
    assert all(c["end"] >= "2026-01-01T12:00:00Z" for c in since["conversations"])
    assert len(since["conversations"]) < len(listed["conversations"])

    shown = cli_json(
        stack, "conversations", "show", str(first["conversation_id"]), "--chat", TITLE, "--json"
    )
    assert [m["msg_id"] for m in shown["messages"] if m["msg_id"] in (1, 2, 5)] == [1, 2, 5]
    assert shown["messages"][0]["date"] == "2026-01-01T09:00:00Z"
    assert shown["messages"][0]["locator"].endswith("/1")

    raw = cli(stack, "conversations", "links", "--chat", TITLE, "--json").stdout
    assert raw.count("\n") == 1
    links = json.loads(raw)
    assert set(links) == {str(i) for i, *_ in LINES}
    assert links["1"] is None and links["2"] == 1 and links["5"] == 2

    chain = cli_json(stack, "messages", "links", TITLE, "5", "--json")
    assert [(c["msg_id"], c["parent_id"]) for c in chain["chain"]] == [(5, 2), (2, 1), (1, None)]
    assert "reply" in cli(stack, "messages", "links", TITLE, "5").stdout

    found = cli_json(stack, "conversations", "search", "ladder", "--chat", TITLE, "--json")
    assert isinstance(found["results"], list) and "change" in found["note"]

    human = cli(stack, "conversations", "list", "--chat", TITLE).stdout
    assert f"#{first['conversation_id']}" in human
    assert (
        "Ben"
        in cli(
            stack, "conversations", "show", str(first["conversation_id"]), "--chat", TITLE
        ).stdout
    )


def test_agent_batches_through_the_cli(stack: dict[str, str], tmp_path: Path) -> None:
    cli(stack, "conversations", "build", "--chat", TITLE)
    status = cli_json(stack, "conversations", "batches", "status", "--chat", TITLE, "--json")
    assert status["messages"] == 6 and status["stale_answers"] == 0
    batch = cli_json(
        stack, "conversations", "batches", "get", "--chat", TITLE, "--size", "2", "--json"
    )
    assert len(batch["messages"]) == 2
    answer = tmp_path / "answer.json"
    answer.write_text(
        json.dumps({"answers": [{"msg_id": 4, "parent": 3}, {"msg_id": 6, "parent": 99}]})
    )
    stored = cli_json(
        stack,
        "conversations",
        "batches",
        "answer",
        "--chat",
        TITLE,
        "--file",
        str(answer),
        "--json",
    )
    assert stored["stored"] == 1
    assert [r["reason"] for r in stored["rejected"]] == ["PARENT_NOT_FOUND"]

    rebuilt = cli_json(stack, "conversations", "build", "--chat", TITLE, "--json")
    assert rebuilt["chats"][0]["answers_applied"] == 1
    links = json.loads(cli(stack, "conversations", "links", "--chat", TITLE, "--json").stdout)
    assert links["4"] == 3


def test_cli_errors_exit_with_the_reason(stack: dict[str, str]) -> None:
    missing = cli(stack, "conversations", "list", "--chat", "Nobody here", check=False)
    assert missing.returncode == 3
    assert "CHAT_NOT_FOUND" in missing.stderr
    bad_date = cli(
        stack, "conversations", "list", "--chat", TITLE, "--since", "soonish", check=False
    )
    assert bad_date.returncode == 2
    assert "INVALID_VALUE" in bad_date.stderr
