"""``make demo`` in a home whose vectors an older chatseek stored: it rebuilds them and shows
meaning search, instead of searches that warn it was skipped."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatseek_core import db
from chatseek_gateway import demo
from chatseek_vector.spaces import PASSAGE_FORM, current_space
from tests.stack_helpers import cli, cli_json, settle, stack_env

DEMO_EXPORT = Path(__file__).resolve().parent.parent / "demo" / "export"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    home = tmp_path / "home"
    env = stack_env(home)
    export = tmp_path / "export"
    shutil.copytree(DEMO_EXPORT, export)
    try:
        cli(env, "import", str(export), "--json")
        settle(env)
        yield env
    finally:
        cli(env, "stack", "down", check=False)


def _revision(home: Path) -> str:
    conn = db.connect(home / "data" / "vector.db", vec=True)
    try:
        space = current_space(conn)
        assert space is not None
        return space.identity.revision
    finally:
        conn.close()


def _vector_error(env: dict[str, str]) -> str:
    services = {s["name"]: s for s in cli_json(env, "status", "--json")["services"]}
    return str(services["vector"]["details"].get("last_error") or "")


def test_the_demo_rebuilds_vectors_an_older_chatseek_stored(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = Path(env["CHATSEEK_HOME"])
    revision = _revision(home)
    conn = db.connect(home / "data" / "vector.db", vec=True)
    with db.transaction(conn):
        conn.execute("UPDATE spaces SET revision = ?", (revision.removesuffix(f"+{PASSAGE_FORM}"),))
    conn.close()
    skipped = cli_json(env, "search", "--json", "--", "bank account without a residence permit")
    said = [w["message"] for w in skipped["warnings"] if w["code"] == "DENSE_UNAVAILABLE"]
    assert said and "older chatseek" in said[0] and "chatseek embed --reembed" in said[0], said

    deadline = time.monotonic() + 30
    while "older chatseek" not in _vector_error(env) and time.monotonic() < deadline:
        time.sleep(0.3)  # the vector service's background pass meets the older space too
    assert "older chatseek" in _vector_error(env)

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    demo._vectors_of_this_embedder()
    settle(env)

    assert _revision(home) == revision
    assert _vector_error(env) == ""
    found = cli_json(env, "search", "--json", "--", "bank account without a residence permit")
    assert found["warnings"] == []
    assert any("meaning" in hit["by"] for hit in found["hits"])
