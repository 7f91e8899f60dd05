"""A full or read-only data directory: a clear error, no corruption, and a clean recovery.

The data directory is a real, size-limited file system: a tmpfs mounted for each test, which
needs root on Linux (elsewhere these tests skip and say so). ``libs/chatseek-core/tests/test_db.py``
covers the same errors on any machine, with SQLite itself reporting a full database
(``PRAGMA max_page_count``) and a read-only file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.generate import generate
from chatseek_core import db
from chatseek_core.settings import SERVICES
from tests.fault_helpers import (
    Stack,
    check_store,
    exported_messages,
    settle,
    start_stack,
    stored_messages,
)
from tests.stack_helpers import cli

ROOT = Path(__file__).resolve().parent.parent
DEMO_EXPORT = ROOT / "demo" / "export"
MIB = 2**20
ROOMY = 256 * MIB
FULL_EXPORT_MESSAGES = 20_000
# Room for the uploaded export (it lands in the data directory first) and a few MiB more:
# the import runs out of space while storing messages.
HEADROOM = 6 * MIB
OWNERS = ("ingest", "unitize", "lexical", "vector")


@dataclass
class Volume:
    """A tmpfs mounted at ``path`` whose size and writability the test changes."""

    path: Path

    def mount(self, size: int) -> None:
        _mount("-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(self.path))

    def resize(self, size: int) -> None:
        _mount("-o", f"remount,size={size}", str(self.path))

    def writable(self, yes: bool) -> None:
        _mount("-o", "remount," + ("rw" if yes else "ro"), str(self.path))

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True, check=False)


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], capture_output=True, text=True, check=True)


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Volume]:
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("a size-limited data directory needs root on Linux to mount a tmpfs")
    vol = Volume(tmp_path / "home" / "data")  # the stack's default data directory
    vol.path.mkdir(parents=True)
    try:
        vol.mount(ROOMY)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc.stderr.strip()}")
    try:
        yield vol
    finally:
        vol.unmount()


def _error(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert proc.returncode != 0, proc.stdout[-2000:]
    doc: dict[str, str] = json.loads(proc.stdout)
    return doc


def _intact(data_dir: Path) -> None:
    """Every database in ``data_dir`` passes SQLite's own integrity check."""
    for owner in OWNERS:
        path = data_dir / f"{owner}.db"
        if not path.exists():
            continue
        conn = db.connect(path, readonly=True)
        try:
            result = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        finally:
            conn.close()
        assert result == ["ok"], (owner, result[:5])


WRITERS = ("ingest", "unitize", "lexical", "vector")


def _open_deps(stack: Stack, owner: str) -> subprocess.CompletedProcess[str]:
    """What ``owner``'s start-up says, opening its stores as its process does."""
    code = (
        "from chatseek_core.settings import load_settings\n"
        f"from chatseek_{owner} import server\n"
        f"server.open_deps(load_settings({owner!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=stack.env, capture_output=True, text=True, check=False
    )


def _on_volume(volume: Volume) -> Stack:
    stack = start_stack(volume.path.parent)
    assert stack.data_dir == volume.path
    return stack


def test_a_full_disk_fails_the_import_clearly_and_a_rerun_with_room_completes(
    tmp_path: Path, volume: Volume
) -> None:
    export = tmp_path / "export"
    generate(export / "result.json", FULL_EXPORT_MESSAGES, seed=5)
    expected = exported_messages(export / "result.json")
    volume.resize((export / "result.json").stat().st_size + HEADROOM)
    stack = _on_volume(volume)
    try:
        failed = _error(cli(stack.env, "import", str(export), "--json", check=False))
        assert failed["reason"] == "STORAGE_ERROR", failed
        assert "cannot be written" in failed["error"]
        assert "free disk space" in failed["hint"]
        assert all(stack.pid(name) is not None for name in SERVICES), "a service died"
        _intact(volume.path)
        partial = sum(len(ids) for ids in stored_messages(volume.path).values())
        assert 0 < partial < sum(len(ids) for ids in expected.values())  # it ran out midway

        volume.resize(ROOMY)
        cli(stack.env, "import", str(export), "--json")
        settle(stack)
        check_store(stack, expected)
    finally:
        stack.down()
    _intact(volume.path)


def test_a_read_only_data_directory_stops_the_stack_with_a_clear_error_and_changes_nothing(
    tmp_path: Path, volume: Volume
) -> None:
    expected = exported_messages(DEMO_EXPORT / "result.json")
    stack = _on_volume(volume)
    try:
        cli(stack.env, "import", str(DEMO_EXPORT), "--json")
        settle(stack)
    finally:
        stack.down()

    volume.writable(False)
    try:
        refused = cli(stack.env, "stack", "up", check=False)
        stack.down()
        # Whichever service the stack hears from first, each writer says the same: one whose
        # ``-wal`` and ``-shm`` files outlived the stop once opened and failed on an ATTACH.
        opened = {owner: _open_deps(stack, owner) for owner in WRITERS}
    finally:
        stack.down()
        volume.writable(True)
    assert refused.returncode != 0
    assert "read-only" in refused.stderr, refused.stderr
    assert "make the data directory writable" in refused.stderr, refused.stderr
    for owner, proc in opened.items():
        assert proc.returncode != 0, owner
        assert f"{volume.path} is read-only" in proc.stderr, (owner, proc.stderr[-800:])

    _intact(volume.path)
    stack.up()
    try:
        settle(stack)
        check_store(stack, expected)
    finally:
        stack.down()
