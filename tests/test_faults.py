"""Fault injection: SIGKILL a service in the middle of an import, a sync, a re-cut, indexing or
embedding — on the clock, or from inside just before (or after) its n-th writing COMMIT —, bring
the stack back with ``chatseek stack up``, re-run what the user would re-run, let it settle, and
require ``chatseek verify`` ok, every source message stored exactly once and every derived index
complete. The long cases (marker ``long``) count the distinct kill points they exercised.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.generate import generate
from chatseek_core import db
from chatseek_testing.faults import FAULT_KILL_ENV, armed_env
from chatseek_unitize.model import RECIPE_VERSION
from tests.fault_helpers import (
    KillPoint,
    Operation,
    Stack,
    check_store,
    exported_messages,
    fake_world_messages,
    kill,
    outstanding,
    settle,
    start_fake_ingest,
    start_stack,
)
from tests.stack_helpers import alive, cli, stack_env

QUICK_MESSAGES = 2_000
LONG_MESSAGES = 10_000
FAULT_WAIT_S = 90.0
QUIET_POLL_S = 0.05
MIN_KILL_POINTS = 20
LONG_TIMEOUT_S = 1800
STAGES = ("unitize", "lexical", "vector")

EXERCISED: set[KillPoint] = set()


@dataclass(frozen=True)
class Kill:
    """Where to kill: ``service`` at its ``commit``-th writing COMMIT, or at ``fraction`` of the
    operation's clean duration on the clock."""

    service: str
    commit: int | None = None
    after: bool = False
    fraction: float | None = None

    @property
    def fault(self) -> str | None:
        if self.commit is None:
            return None
        return f"{self.service}:{self.commit}" + (":after" if self.after else "")

    def point(self, operation: str) -> KillPoint:
        if self.commit is not None:
            how = f"{'after' if self.after else 'before'} commit {self.commit}"
        else:
            how = f"at {self.fraction:.2f} of the run"
        return KillPoint(operation, self.service, how)


def tx(service: str, *commits: int, after: bool = False) -> list[Kill]:
    return [Kill(service, commit=n, after=after) for n in commits]


def clock(service: str, *fractions: float) -> list[Kill]:
    return [Kill(service, fraction=f) for f in fractions]


@pytest.fixture(scope="module", autouse=True)
def _report_kill_points(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print how many distinct kill points the module exercised (the issue asks for the count)."""
    yield
    if not EXERCISED:
        return
    lines = [f"fault injection: {len(EXERCISED)} distinct kill points exercised"]
    lines += [f"  {p.label()}" for p in sorted(EXERCISED, key=lambda p: p.label())]
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print("\n" + "\n".join(lines))


# --- operations: how each one starts, when it is busy, what a user re-runs ---


class Op:
    """One interruptible operation over a stack whose store holds ``expected``."""

    name = ""

    def __init__(self, export: Path, expected: dict[str, list[int]]) -> None:
        self.export = export
        self.expected = expected

    def prepare(self, stack: Stack) -> None:
        """Bring a fresh stack to the state the operation starts from."""

    def begin(self, stack: Stack, where: Kill | None) -> Operation | None:
        """Start the operation, arming ``where.service`` when the kill is a commit count."""
        raise NotImplementedError

    def busy(self, stack: Stack, service: str) -> bool:
        """Whether ``service`` still has work of this operation in front of it."""
        return service in (*STAGES, "embed") and outstanding(stack, service)

    def rerun(self, stack: Stack) -> None:
        """What the user re-runs after the operation's command failed."""
        raise NotImplementedError

    def recover(self, stack: Stack) -> None:
        stack.up()


class Import(Op):
    name = "import"

    def begin(self, stack: Stack, where: Kill | None) -> Operation | None:
        if where is not None and where.fault is not None:
            stack.arm(where.service, where.fault)
        return Operation.start(stack, "import", str(self.export), "--json")

    def rerun(self, stack: Stack) -> None:
        cli(stack.env, "import", str(self.export), "--json")


class Prepared(Op):
    """An operation that starts from a settled, imported store."""

    def prepare(self, stack: Stack) -> None:
        cli(stack.env, "import", str(self.export), "--json")
        settle(stack)


class Build(Prepared):
    name = "conversations build"

    def begin(self, stack: Stack, where: Kill | None) -> Operation | None:
        if where is not None and where.fault is not None:
            stack.arm(where.service, where.fault)
        return Operation.start(stack, "conversations", "build", "--all", "--json")

    def rerun(self, stack: Stack) -> None:
        cli(stack.env, "conversations", "build", "--all", "--json")


class Recut(Prepared):
    """A recipe change: every chat's units were cut by an older recipe and are re-cut in the
    background, one chat per transaction (simulated by lowering the recorded recipe while
    unitize is stopped)."""

    name = "recipe re-cut"

    def begin(self, stack: Stack, where: Kill | None) -> Operation | None:
        stack.stop("unitize")
        conn = db.connect(stack.data_dir / "unitize.db")
        try:
            with db.transaction(conn):
                conn.execute("UPDATE chat_recipes SET recipe = recipe - 1")
        finally:
            conn.close()
        stack.up(fault=where.fault if where is not None and where.service == "unitize" else None)
        return None

    def busy(self, stack: Stack, service: str) -> bool:
        if service == "unitize" and _recut_pending(stack):
            return True
        return super().busy(stack, service)

    def rerun(self, stack: Stack) -> None:
        """Nothing to re-run: the re-cut resumes by itself."""


class Reindex(Prepared):
    name = "reindex lexical"

    def begin(self, stack: Stack, where: Kill | None) -> Operation | None:
        if where is not None and where.fault is not None:
            stack.arm(where.service, where.fault)
        return Operation.start(stack, "reindex", "lexical", "--json")

    def rerun(self, stack: Stack) -> None:
        cli(stack.env, "reindex", "lexical", "--json")


class Embed(Prepared):
    name = "embed --reembed"

    def begin(self, stack: Stack, where: Kill | None) -> Operation | None:
        if where is not None and where.fault is not None:
            stack.arm(where.service, where.fault)
        return Operation.start(stack, "embed", "--reembed", "--yes", "--json")

    def rerun(self, stack: Stack) -> None:
        cli(stack.env, "embed", "--json")


class Sync(Op):
    """A Telegram sync through a real ingest process whose Telegram is the fake world.

    With ``takeout`` every run (the interrupted one and the re-run) is ``sync --takeout``: the
    history comes through a takeout session that a kill leaves unfinished.
    """

    name = "sync"

    def __init__(self, *, takeout: bool = False) -> None:
        super().__init__(Path(), fake_world_messages())
        self.ingest: subprocess.Popen[bytes] | None = None
        self.flags = ("--takeout",) if takeout else ()
        if takeout:
            self.name = "sync --takeout"

    def prepare(self, stack: Stack) -> None:
        cli(stack.env, "sources", "add", "@chan700")
        cli(stack.env, "sources", "add", "@group701")

    def begin(self, stack: Stack, where: Kill | None) -> Operation | None:
        if where is not None and where.fault is not None:
            self._restart_ingest(stack, where.fault)
        return Operation.start(stack, "sync", *self.flags, "--json")

    def _restart_ingest(self, stack: Stack, fault: str | None) -> None:
        if self.ingest is not None and self.ingest.poll() is None:
            self.ingest.send_signal(signal.SIGTERM)
            self.ingest.wait(timeout=30)
        # A CLI that found ingest down while the fake was dead may have started a real one on
        # the fake's address (auto-start); the fake could not bind while it serves.
        stack.stop("ingest")
        self.ingest = start_fake_ingest(stack, fault=fault)

    def recover(self, stack: Stack) -> None:
        fake = self.ingest
        if fake is None or fake.poll() is not None or stack.pid("ingest") != fake.pid:
            self._restart_ingest(stack, None)
        stack.up()

    def rerun(self, stack: Stack) -> None:
        cli(stack.env, "sync", *self.flags, "--json")

    def close(self) -> None:
        if self.ingest is not None and self.ingest.poll() is None:
            self.ingest.kill()
            self.ingest.wait(timeout=30)


def _recut_pending(stack: Stack) -> bool:
    conn = db.connect(stack.data_dir / "unitize.db", readonly=True)
    try:
        row = conn.execute(
            "SELECT COUNT(*) FROM chat_recipes WHERE recipe < ?", (RECIPE_VERSION,)
        ).fetchone()
        return bool(row[0])
    finally:
        conn.close()


# --- one kill point, end to end ---


def _quiet(op: Op, stack: Stack, run: Operation | None) -> bool:
    if run is not None and run.running():
        return False
    return not any(op.busy(stack, s) for s in (*STAGES, "embed"))


def _clean_duration(op: Op, stack: Stack) -> float:
    """Run the operation without a fault: seconds until its command ended and every stage is
    quiet again. Also checks the result."""
    started = time.monotonic()
    run = op.begin(stack, None)
    while not _quiet(op, stack, run):
        time.sleep(QUIET_POLL_S)
    took = time.monotonic() - started
    if run is not None:
        code, _, err = run.finish()
        assert code == 0, err
    settle(stack)
    check_store(stack, op.expected)
    return took


def _interrupt(op: Op, stack: Stack, where: Kill, baseline: float) -> bool:
    """Start the operation, kill as told, recover, re-run, settle and check.

    Returns:
        Whether the kill landed while the operation still had work (the kill point counts).
    """
    run = op.begin(stack, where)
    if where.commit is not None:
        pid = stack.recorded_pid(where.service)
        assert pid is not None, f"{where.service} was not started"
        deadline = time.monotonic() + FAULT_WAIT_S
        while alive(pid) and time.monotonic() < deadline:
            if _quiet(op, stack, run) and not op.busy(stack, where.service):
                time.sleep(0.5)
                break
            time.sleep(QUIET_POLL_S)
        landed = not alive(pid)
    else:
        assert where.fraction is not None
        time.sleep(max(0.0, where.fraction * baseline))
        busy = (run is not None and run.running()) or op.busy(stack, where.service)
        landed = kill(stack, where.service) and busy
    failed = False
    if run is not None:
        code, _, err = run.finish()
        failed = code != 0
        assert landed or not failed, f"{op.name} failed without a fault: {err}"
    op.recover(stack)
    if failed:
        op.rerun(stack)
    settle(stack)
    check_store(stack, op.expected)
    return landed


def _exercise(
    op: Op, make_stack: Iterator[Stack], kills: list[Kill], *, fresh: bool
) -> set[KillPoint]:
    """Run every kill of ``kills`` over ``op``; a fresh stack each time when ``fresh``."""
    exercised: set[KillPoint] = set()
    stack = next(make_stack)
    op.prepare(stack)
    baseline = _clean_duration(op, stack)
    for where in kills:
        if fresh:
            stack.down()
            if isinstance(op, Sync):
                op.close()
            shutil.rmtree(stack.home, ignore_errors=True)
            stack = next(make_stack)
            op.prepare(stack)
        if _interrupt(op, stack, where, baseline):
            exercised.add(where.point(op.name))
    stack.down()
    EXERCISED.update(exercised)
    return exercised


@pytest.fixture
def stacks(tmp_path: Path) -> Iterator[Iterator[Stack]]:
    """Fresh private stacks on demand; every one is torn down at the end."""
    made: list[Stack] = []

    def make() -> Iterator[Stack]:
        n = 0
        while True:
            n += 1
            made.append(start_stack(tmp_path / f"home{n}"))
            yield made[-1]

    try:
        yield make()
    finally:
        for stack in made:
            stack.down()


@pytest.fixture(scope="module")
def long_export(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[int]]]:
    """A generated whole-account export of ``LONG_MESSAGES`` messages and its message ids."""
    folder = tmp_path_factory.mktemp("faults") / "export"
    generate(folder / "result.json", LONG_MESSAGES, seed=11)
    return folder, exported_messages(folder / "result.json")


# --- the hook itself ---


HOOK_SCRIPT = """
import sys
from chatseek_core import db
conn = db.connect(sys.argv[1])
conn.execute("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
for n in range(1, 6):
    with db.transaction(conn):
        conn.execute("SELECT 1").fetchone()
    with db.transaction(conn):
        conn.execute("INSERT INTO t VALUES (?)", (n,))
"""


def _run_hook(path: Path, fault: str) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    proc = subprocess.run(
        [sys.executable, "-c", HOOK_SCRIPT, str(path)],
        env=armed_env(os.environ, fault),
        capture_output=True,
        text=True,
        timeout=60,
    )
    conn = db.connect(path, readonly=True)
    try:
        rows = [int(r[0]) for r in conn.execute("SELECT n FROM t ORDER BY n")]
    finally:
        conn.close()
    return proc, rows


def test_the_kill_hook_dies_before_the_nth_writing_commit_and_loses_only_that_one(
    tmp_path: Path,
) -> None:
    proc, rows = _run_hook(tmp_path / "probe.db", "probe:3")
    assert proc.returncode == -signal.SIGKILL
    assert rows == [1, 2]


def test_the_kill_hook_after_a_commit_keeps_that_commit(tmp_path: Path) -> None:
    proc, rows = _run_hook(tmp_path / "probe.db", "probe:3:after")
    assert proc.returncode == -signal.SIGKILL
    assert rows == [1, 2, 3]


def test_the_kill_hook_ignores_other_owners(tmp_path: Path) -> None:
    proc, rows = _run_hook(tmp_path / "probe.db", "ingest:1")
    assert proc.returncode == 0, proc.stderr
    assert rows == [1, 2, 3, 4, 5]


def test_a_malformed_kill_point_names_its_variable(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import chatseek_core.db"],
        env=armed_env(os.environ, "ingest:zero"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert FAULT_KILL_ENV in proc.stderr


# --- the quick representative case (default suite) ---


def test_an_import_killed_inside_an_ingest_transaction_converges_after_a_reimport(
    tmp_path: Path,
) -> None:
    export = tmp_path / "export"
    generate(export / "result.json", QUICK_MESSAGES, seed=5)
    expected = exported_messages(export / "result.json")
    stack = start_stack(tmp_path / "home")
    try:
        op = Import(export, expected)
        where = Kill("ingest", commit=3)
        assert _interrupt(op, stack, where, baseline=0.0)
    finally:
        stack.down()
    EXERCISED.add(where.point(op.name))


# --- the long runs ---


@pytest.mark.long
@pytest.mark.timeout(LONG_TIMEOUT_S)
def test_an_import_survives_every_service_killed_at_many_points(
    stacks: Iterator[Stack], long_export: tuple[Path, dict[str, list[int]]]
) -> None:
    export, expected = long_export
    kills = [
        *tx("ingest", 1, 2, 4, 6, 8, 10),
        *tx("ingest", 3, 7, after=True),
        *tx("unitize", 1, 3, 5),
        *tx("unitize", 2, after=True),
        *tx("lexical", 1, 3, 5),
        *tx("lexical", 2, after=True),
        *tx("vector", 1, 10, 40),
        *tx("vector", 20, after=True),
        *clock("ingest", 0.1, 0.3),
        *clock("gateway", 0.2),
        *clock("unitize", 0.4, 0.7),
        *clock("lexical", 0.5),
        *clock("vector", 0.6, 0.85),
        *clock("embed", 0.7),
        *clock("fusion", 0.3),
    ]
    exercised = _exercise(Import(export, expected), stacks, kills, fresh=True)
    assert len(exercised) >= 20, sorted(p.label() for p in exercised)


@pytest.mark.long
@pytest.mark.timeout(LONG_TIMEOUT_S)
def test_conversation_builds_and_recipe_recuts_survive_unitize_killed_at_many_points(
    stacks: Iterator[Stack], long_export: tuple[Path, dict[str, list[int]]]
) -> None:
    export, expected = long_export
    build = _exercise(
        Build(export, expected),
        stacks,
        [
            *tx("unitize", 1, 3, 6, 10, 15),
            *tx("unitize", 4, after=True),
            *clock("unitize", 0.3, 0.6),
            *clock("vector", 0.8),
        ],
        fresh=False,
    )
    recut = _exercise(
        Recut(export, expected),
        stacks,
        [*tx("unitize", 1, 3, 5), *tx("unitize", 2, after=True), *clock("unitize", 0.3)],
        fresh=False,
    )
    assert len(build) >= 6, sorted(p.label() for p in build)
    assert len(recut) >= 3, sorted(p.label() for p in recut)


@pytest.mark.long
@pytest.mark.timeout(LONG_TIMEOUT_S)
def test_indexing_and_embedding_survive_their_services_killed_at_many_points(
    stacks: Iterator[Stack], long_export: tuple[Path, dict[str, list[int]]]
) -> None:
    export, expected = long_export
    reindex = _exercise(
        Reindex(export, expected),
        stacks,
        [*tx("lexical", 1), *tx("lexical", 1, after=True), *clock("lexical", 0.3, 0.7)],
        fresh=False,
    )
    embed = _exercise(
        Embed(export, expected),
        stacks,
        [
            *tx("vector", 1, 5, 30, 70),
            *tx("vector", 40, after=True),
            *clock("vector", 0.3, 0.7),
            *clock("embed", 0.5),
        ],
        fresh=False,
    )
    assert len(reindex) >= 2, sorted(p.label() for p in reindex)
    assert len(embed) >= 5, sorted(p.label() for p in embed)


@pytest.mark.long
@pytest.mark.timeout(LONG_TIMEOUT_S)
@pytest.mark.parametrize("takeout", [False, True], ids=["plain", "takeout"])
def test_a_sync_survives_ingest_killed_at_many_points(tmp_path: Path, takeout: bool) -> None:
    op = Sync(takeout=takeout)
    made: list[Stack] = []

    def make() -> Iterator[Stack]:
        n = 0
        while True:
            n += 1
            home = tmp_path / f"sync{n}"
            stack = Stack(home=home, env=stack_env(home))
            made.append(stack)
            op.ingest = start_fake_ingest(stack)
            stack.up()
            yield stack

    try:
        exercised = _exercise(
            op,
            make(),
            [
                *tx("ingest", 1, 2, 4, 6),
                *tx("ingest", 3, after=True),
                *clock("ingest", 0.3, 0.6),
                *clock("unitize", 0.5),
            ],
            fresh=True,
        )
    finally:
        op.close()
        for stack in made:
            stack.down()
            shutil.rmtree(stack.home, ignore_errors=True)
    assert len(exercised) >= 4, sorted(p.label() for p in exercised)


@pytest.mark.long
@pytest.mark.timeout(LONG_TIMEOUT_S)
def test_the_long_runs_exercised_enough_distinct_kill_points() -> None:
    if len({p.operation for p in EXERCISED}) < 3:
        pytest.skip("run the whole module (make test-long) to count its kill points")
    assert len(EXERCISED) >= MIN_KILL_POINTS, sorted(p.label() for p in EXERCISED)
