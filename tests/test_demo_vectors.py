"""``make demo`` in a home whose vectors an older chatseek stored: it rebuilds them and shows
meaning search, instead of searches that warn it was skipped."""

from __future__ import annotations

import shutil
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
    assert any("older chatseek" in w["message"] for w in skipped["warnings"]), skipped["warnings"]

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    demo._vectors_of_this_embedder()
    settle(env)

    assert _revision(home) == revision
    found = cli_json(env, "search", "--json", "--", "bank account without a residence permit")
    assert found["warnings"] == []
    assert any("meaning" in hit["by"] for hit in found["hits"])
