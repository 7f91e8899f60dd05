"""The committed ``libs/chatseek-proto`` is what ``make proto`` makes of ``proto/`` today.

A ``.proto`` edited without ``make proto`` leaves stubs whose comments, fields or services say
something else than the contract; the generator runs into a temporary folder and every file
must match the committed one byte for byte.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "libs" / "chatseek-proto" / "src" / "chatseek"


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_the_committed_stubs_are_what_make_proto_generates(tmp_path: Path) -> None:
    subprocess.run(
        ["bash", str(ROOT / "tools" / "gen_proto.sh"), str(tmp_path)],
        check=True,
        cwd=ROOT,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
        capture_output=True,
    )
    fresh, committed = _files(tmp_path / "chatseek"), _files(COMMITTED)
    assert sorted(fresh) == sorted(committed)
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"run make proto: {stale} differ from what proto/ generates"
