"""Repository-wide test fixtures."""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chatseek_unitize.linkahead import keep_grpc_out_of_forks

# As the unitize service does before gRPC starts: tests build conversations in processes that
# also serve gRPC, and a big build forks a child that uses none.
keep_grpc_out_of_forks()

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


# --- blocking calls on the event loop (STYLE rule 14) ---

_SCANNED = (
    "chatseek_core",
    "chatseek_ingest",
    "chatseek_unitize",
    "chatseek_lexical",
    "chatseek_embed",
    "chatseek_vector",
    "chatseek_fusion",
    "chatseek_gateway",
)
# Start-up and shut-down run on the loop before the server serves or after it stopped: opening
# the databases, reading the config and loading the models there blocks no request.
_STARTUP = {"open_deps", "load_models", "create_server", "start", "close", "build_server"}
# A log record is written by the logging handler where it is made, loop or not (the standard
# library's own choice); a slow log stream is not a blocking call of ours.
_LOGGING = ("logging/__init__.py", {"emit", "flush", "handle"})
_ASYNC_FLAGS = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
_SQLEAN_METHODS = {
    "Connection": ("execute", "executemany", "executescript", "commit", "rollback"),
    "Cursor": ("execute", "executemany", "executescript", "fetchone", "fetchmany", "fetchall"),
}


def _or_a_test(own: Callable[..., bool], *args: Any, **kwargs: Any) -> bool:
    return own(*args, **kwargs) or _called_by_a_test()


def _is_test_code(filename: str) -> bool:
    # chatseek_testing's fakes stand in for Telegram itself, whose client writes downloads as
    # it likes; what ingest does with them is still watched.
    return any(part in filename for part in ("/tests/", "/chatseek_testing/")) or filename.endswith(
        "/conftest.py"
    )


def _called_by_a_test() -> bool:
    """Whether the blocking call under check is made by a test's coroutine, not a service's.

    What blocks the loop is the coroutine that makes the call, through however many plain
    functions: the nearest ``async def`` frame out from the call decides. A test (or its
    helper) that sets up a store with ``db.connect`` blocks its own loop; a servicer, a tool or
    a consumer's task that does the same blocks every request, and fails the test.
    """
    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code.co_flags & _ASYNC_FLAGS:
            return _is_test_code(frame.f_code.co_filename)
        frame = frame.f_back
    return False


def _blockbuster() -> Any:
    import sqlean
    from blockbuster import BlockBuster, BlockBusterFunction

    excluded = ["chatseek_testing.services"]
    buster = BlockBuster(list(_SCANNED), excluded_modules=excluded)
    scanned = [importlib.import_module(name) for name in _SCANNED]
    for type_name, methods in _SQLEAN_METHODS.items():
        owner = getattr(sqlean, type_name)
        for method in methods:
            buster.functions[f"sqlean.{type_name}.{method}"] = BlockBusterFunction(
                owner, method, scanned_modules=scanned, excluded_modules=excluded
            )
    for function in buster.functions.values():
        own = function.can_block_predicate
        function.can_block_predicate = functools.partial(_or_a_test, own)
        for name in _SCANNED:
            function.can_block_in(f"{name}/server.py", _STARTUP)
        function.can_block_in("chatseek_gateway/mcp/server.py", _STARTUP)
        function.can_block_in(*_LOGGING)
    return buster


@pytest.fixture(autouse=True)
def _no_blocking_on_the_loop(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail an async test whose service code blocks the event loop (STYLE rule 14).

    blockbuster raises ``BlockingError`` at a blocking call (SQLite, file I/O, sleep, a
    blocking socket) made on the loop's thread from a chatseek package's code, so in-process
    servers and async core code must move such work to ``chatseek_core.aio.to_thread``. Sync
    tests have no loop and are not watched.
    """
    if not inspect.iscoroutinefunction(request.function):
        yield
        return
    buster = _blockbuster()
    buster.activate()
    try:
        yield
    finally:
        buster.deactivate()
