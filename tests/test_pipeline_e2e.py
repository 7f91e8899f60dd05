"""The whole stack end to end on the project's sample export: import → units → indexes →
vectors → every kind of search, the readers, verify and backup, and degradation when embed dies.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.stack_helpers import alive, cli, cli_json, settle, stack_env

ROOT = Path(__file__).resolve().parent.parent
DEMO_EXPORT = ROOT / "demo" / "export"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A private stack with the sample export imported, indexed, embedded and built."""
    home = tmp_path_factory.mktemp("e2e") / "home"
    env = stack_env(home)
    export = tmp_path_factory.mktemp("export") / "export"
    shutil.copytree(DEMO_EXPORT, export)
    try:
        report = cli_json(env, "import", str(export), "--json")
        status = settle(env)
        cli(env, "conversations", "build", "--all")
        yield {"env": env, "report": report, "status": status, "home": home}
    finally:
        cli(env, "stack", "down", check=False)


def test_the_import_report_lists_every_chat_with_its_type(stack: dict[str, Any]) -> None:
    types = {c["type"] for c in stack["report"]["chats"]}
    assert {"supergroup", "forum", "channel", "private", "group"} <= types
    assert stack["report"]["messages_imported"] > 300
    assert stack["report"]["media_text"].get("read", 0) >= 1


def test_hybrid_search_finds_the_bank_account_discussion(stack: dict[str, Any]) -> None:
    doc = cli_json(
        stack["env"], "search", "--json", "--", "open a bank account without residence permit"
    )
    assert doc["hits"], doc
    top = doc["hits"][0]
    assert {
        "rank",
        "score",
        "by",
        "kind",
        "chat",
        "date_range",
        "link",
        "snippet",
        "msg_ids",
    } <= set(top)
    text = " ".join(h["snippet"] for h in doc["hits"][:3]).lower()
    assert "bank" in text or "банк" in text


@pytest.mark.parametrize("mode", ["hybrid", "lexical", "dense"])
def test_a_channel_post_and_its_discussion_copy_are_one_hit(
    stack: dict[str, Any], mode: str
) -> None:
    doc = cli_json(
        stack["env"],
        "search",
        "--mode",
        mode,
        "--full",
        "--json",
        "--",
        "digital nomad visa: remote work, income, UGE",
    )
    heads = [h["text"].splitlines()[0].split(": ", 1)[1] for h in doc["hits"]]
    assert len(heads) == len(set(heads)), heads
    post = next(h for h in doc["hits"] if "Digital nomad visa" in h["text"].splitlines()[0])
    assert post["kind"] == "post"
    assert post["chat"]["type"] == "channel"
    group = next(c for c in stack["report"]["chats"] if c["title"].endswith("— Chat"))
    comments = post["comments"]
    assert comments["chat_id"] == int(group["id"])
    assert {9, 10, 13} <= set(comments["msg_ids"]), comments
    assert 6 not in comments["msg_ids"]  # Telegram's copy of the post is the post itself
    assert "ИП в Грузии" in post["text"]


@pytest.mark.parametrize(
    "query",
    [
        "SIM card in the mountains",
        "digital nomad visa: remote work, income, UGE",
        "deposit two months",
        "аренда квартиры залог",
    ],
)
def test_no_two_hits_open_on_the_same_message(stack: dict[str, Any], query: str) -> None:
    doc = cli_json(stack["env"], "search", "--json", "--", query)
    opened = [(h["chat"]["id"], h["anchor_msg_id"]) for h in doc["hits"] if h["anchor_msg_id"]]
    assert opened and len(opened) == len(set(opened)), opened
    for later, hit in enumerate(doc["hits"]):
        for better in doc["hits"][:later]:
            if better["chat"]["id"] == hit["chat"]["id"] and hit["anchor_msg_id"]:
                assert hit["anchor_msg_id"] not in better["msg_ids"], (better, hit)


def test_each_mode_answers_and_says_which_lists_found_a_hit(stack: dict[str, Any]) -> None:
    for mode, expected in (("lexical", {"words"}), ("dense", {"meaning"})):
        doc = cli_json(stack["env"], "search", "--mode", mode, "--json", "--", "аренда квартиры")
        assert doc["hits"]
        assert all(set(h["by"]) <= expected for h in doc["hits"])


def test_strict_search_returns_only_messages_that_satisfy_the_query(stack: dict[str, Any]) -> None:
    doc = cli_json(
        stack["env"], "messages", "search", "--json", "--limit", "50", "--", "банк* OR bank*"
    )
    assert doc["items"]
    for item in doc["items"]:
        seen = (item["text"] + " " + ((item.get("media") or {}).get("text") or "")).lower()
        assert "банк" in seen or "bank" in seen
    assert {"page", "limit", "has_more", "query", "words_ready", "coverage"} <= set(doc)


def test_a_bad_query_exits_with_invalid_argument_and_a_caret(stack: dict[str, Any]) -> None:
    proc = cli(stack["env"], "messages", "search", "--", "bank AND (", check=False)
    assert proc.returncode == 2
    assert "SYNTAX_ERROR" in proc.stderr
    assert "^" in proc.stderr


def test_jsonl_streams_one_item_per_line(stack: dict[str, Any]) -> None:
    proc = cli(stack["env"], "messages", "search", "--jsonl", "--limit", "3", "--", "квартира")
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 3
    assert all("locator" in line for line in lines)


def test_conversation_search_answers_with_built_conversations(stack: dict[str, Any]) -> None:
    doc = cli_json(
        stack["env"], "conversations", "search", "--json", "--", "SIM card in the mountains"
    )
    assert doc["results"]
    first = doc["results"][0]
    assert first["conversation"]["message_count"] >= 1
    assert set(first["by"]) <= {"meaning", "words"}
    evidence = {i for chunk in first["evidence"] for i in chunk["msg_ids"]}
    assert evidence & {48261, 48265, 48274}, first  # the SIM card answers
    assert "msg_ids" not in first["conversation"]  # evidence, not the whole conversation
    seen: set[tuple[int, int]] = set()
    for result in doc["results"]:
        assert 1 <= len(result["evidence"]) <= 3
        for chunk in result["evidence"]:
            assert chunk["text"].count("\n") + 1 == len(chunk["msg_ids"])
            assert chunk["msg_ids"] == sorted(chunk["msg_ids"])
            ids = {(result["read"]["chat"], i) for i in chunk["msg_ids"]}
            assert not ids & seen, "a message shown twice"
            seen |= ids
    shown = cli_json(
        stack["env"],
        "conversations",
        "show",
        str(first["read"]["conversation_id"]),
        "--chat",
        str(first["read"]["chat"]),
        "--json",
    )
    assert len(shown["messages"]) == first["conversation"]["message_count"]
    # The best passage is a unit of that conversation (the one holding most of its messages).
    members = {m["msg_id"] for m in shown["messages"]}
    assert set(first["evidence"][0]["msg_ids"]) & members


def test_hybrid_search_weighs_the_conversation_each_unit_sits_in(stack: dict[str, Any]) -> None:
    """With conversations built, hybrid search ranks the current chunks by words and by meaning
    and maps them onto the units that share their messages; the single-list modes do not."""
    from chatseek_core import db
    from chatseek_fusion.store import chunks_holding

    env = stack["env"]
    doc = cli_json(env, "search", "--json", "--", "SIM card in the mountains")
    assert doc["lists"]["conversation_words"] > 0, doc["lists"]
    assert doc["lists"]["conversation_meaning"] > 0, doc["lists"]
    lexical = cli_json(env, "search", "--mode", "lexical", "--json", "--", "SIM card")
    # Words alone run the unit list; anchors come from the hits' own messages, not a list.
    assert set(lexical["lists"]) == {"words"}

    conn = db.connect(":memory:")
    db.attach_readonly(conn, stack["home"] / "data" / "unitize.db", "unitize")
    rows = conn.execute(
        "SELECT u.unit_id, u.msg_ids, u.chat_id, u.kind FROM unitize.units u"
        " LEFT JOIN unitize.current_builds b ON b.account = u.account AND b.chat_id = u.chat_id"
        " WHERE u.kind != 'conversation' OR u.build_id = b.build_id"
    ).fetchall()
    chunks = {r[0]: (r[2], set(json.loads(r[1]))) for r in rows if r[3] == "conversation"}
    units = {r[0]: (r[2], set(json.loads(r[1]))) for r in rows if r[3] != "conversation"}
    assert chunks and units
    held = chunks_holding(conn, sorted(units), sorted(chunks))
    expected = {
        u: sorted(c for c, (chat, ids) in chunks.items() if chat == uchat and ids & uids)
        for u, (uchat, uids) in units.items()
    }
    kinds = {r[0]: r[3] for r in rows}
    for unit_id, chunk_ids in expected.items():
        found = sorted(held.get(unit_id, []))
        if kinds[unit_id] == "post":  # a post's comments (another chat) are members too
            assert set(chunk_ids) <= set(found), unit_id
        else:
            assert found == chunk_ids, unit_id
    assert any(held.values())
    conn.close()


def test_readers_follow_a_hit_to_its_thread_context_and_evidence(stack: dict[str, Any]) -> None:
    env = stack["env"]
    hit = cli_json(env, "search", "--json", "--", "deposit two months")["hits"][0]
    chat, msg = str(hit["chat"]["id"]), str(hit["anchor_msg_id"])
    thread = cli_json(env, "thread", "--json", "--", chat, msg)
    assert any(m["msg_id"] == int(msg) for m in thread["messages"])
    context = cli_json(env, "context", "--before", "2", "--after", "2", "--json", "--", chat, msg)
    assert len(context["messages"]) <= 5
    evidence = cli_json(env, "evidence", "--json", hit["locators"][0])
    packet = evidence["evidence"][0]
    assert packet["fingerprint"].startswith("sha256:")
    assert packet["chat_history_complete"] is True


def test_verify_passes_and_backup_copies_every_file(stack: dict[str, Any], tmp_path: Path) -> None:
    report = cli_json(stack["env"], "verify", "--json")
    assert report["ok"], report
    copy = cli_json(stack["env"], "backup", str(tmp_path / "backup"), "--json")
    assert {f["file"] for f in copy["files"]} == {
        "ingest.db",
        "unitize.db",
        "lexical.db",
        "vector.db",
    }


def test_tags_mark_a_chat_for_strict_search(stack: dict[str, Any]) -> None:
    env = stack["env"]
    cli(env, "tags", "add", "family", "--chat", "Лена Ковалёва")
    assert any(t["tag"] == "family" for t in cli_json(env, "tags", "ls", "--json")["tags"])
    doc = cli_json(env, "messages", "search", "--json", "--", "tag:family")
    assert doc["items"]
    assert {i["chat"]["title"] for i in doc["items"]} == {"Лена Ковалёва"}


def _kill(env: dict[str, str], service: str) -> None:
    """SIGKILL one service of the stack and wait until it is gone."""
    pid = int((Path(env["CHATSEEK_HOME"]) / "run" / f"{service}.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)


def test_search_degrades_to_words_when_embed_dies(stack: dict[str, Any]) -> None:
    env = stack["env"]
    _kill(env, "embed")
    doc = cli_json(env, "search", "--json", "--", "bank account")
    assert doc["hits"]
    assert any(w["code"] == "DENSE_UNAVAILABLE" for w in doc["warnings"])
    cli(env, "stack", "up")


def test_hybrid_search_answers_by_meaning_when_the_word_index_is_down(
    stack: dict[str, Any],
) -> None:
    env = stack["env"]
    _kill(env, "lexical")
    try:
        doc = cli_json(env, "search", "--json", "--", "SIM card in the mountains")
        assert doc["hits"]
        assert all(hit["by"] == ["meaning"] for hit in doc["hits"]), doc["hits"]
        assert any(w["code"] == "WORDS_UNAVAILABLE" for w in doc["warnings"]), doc["warnings"]
        # Words alone have nothing to fall back on: that search fails and says why.
        failed = cli(env, "search", "--mode", "lexical", "--", "SIM card", check=False)
        assert failed.returncode != 0
    finally:
        cli(env, "stack", "up")


def _one_chat_export(folder: Path) -> Path:
    folder.mkdir(parents=True)
    messages = [
        {
            "id": i,
            "type": "message",
            "date": f"2024-10-01T10:{i:02d}:00",
            "date_unixtime": str(1727776800 + 60 * i),
            "from": "Zoe Park",
            "from_id": "user990001",
            "text": f"ferry timetable question number {i} for the island trip",
            "text_entities": [],
        }
        for i in range(1, 41)
    ]
    chat = {"name": "Island trips", "type": "private_group", "id": 7700001, "messages": messages}
    (folder / "result.json").write_text(
        json.dumps({"about": "", "chats": {"list": [chat]}}), encoding="utf-8"
    )
    return folder


def test_embed_status_shows_an_eta_from_the_recent_rate(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    env = stack["env"]
    cli(env, "stack", "up")
    done = cli_json(env, "embed", "status", "--json")
    assert done["total_pending"] == 0 and done["eta_s"] == 0
    assert done["units_per_s"] > 0
    assert "ETA 0s" in cli(env, "embed", "status").stdout
    _kill(env, "embed")
    cli(env, "import", str(_one_chat_export(tmp_path / "island")), "--json")
    deadline = time.monotonic() + 60
    waiting = cli_json(env, "embed", "status", "--json")
    while not waiting["total_pending"] and time.monotonic() < deadline:
        time.sleep(0.3)
        waiting = cli_json(env, "embed", "status", "--json")
    assert waiting["total_pending"] > 0
    # The queue's text at the recent characters per second (services/vector's tests pin the
    # arithmetic; the fake embedder's wait may round to 0 s): a wait shows one.
    assert waiting["eta_s"] is not None and waiting["eta_s"] >= 0
    line = cli(env, "embed", "status").stdout
    assert "ETA " in line and "every unit embedded" not in line
    cli(env, "stack", "up")
    settle(env)
    assert cli_json(env, "embed", "status", "--json")["eta_s"] == 0


def test_the_bench_readiness_probe_reads_each_settled_service_as_done(
    stack: dict[str, Any],
) -> None:
    # make bench waits on this probe; when it misread the typed status it waited forever.
    from bench.pipeline import stage_done
    from chatseek_core.settings import load_settings

    settings = load_settings(env=stack["env"])
    assert {stage: stage_done(settings, stage) for stage in ("unitize", "lexical", "vector")} == {
        "unitize": True,
        "lexical": True,
        "vector": True,
    }
