"""Repository-wide test fixtures."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
EVAL_DIR = ROOT.parent / "shared" / "eval"

# Tests import with importlib (several services have a test_server.py), so shared test helpers
# (uniquely named modules such as helpers_store.py) are found through these paths.
for _tests_dir in [
    ROOT,
    *sorted(ROOT.glob("services/*/tests")),
    *sorted(ROOT.glob("libs/*/tests")),
]:
    if str(_tests_dir) not in sys.path:
        sys.path.append(str(_tests_dir))


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point CHATSEEK_HOME at a temp dir so no test touches a real store or a running stack,
    and use ports no developer stack uses, so tests never talk to a user's services."""
    home = tmp_path / "home"
    monkeypatch.setenv("CHATSEEK_HOME", str(home))
    monkeypatch.delenv("CHATSEEK_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    yield home


@pytest.fixture
def eval_dir() -> Path:
    """The shared evaluation data; tests that need it skip visibly when it is absent."""
    if not EVAL_DIR.is_dir():
        pytest.skip(f"../shared/eval not found at {EVAL_DIR}: evaluation data is not in this clone")
    return EVAL_DIR
