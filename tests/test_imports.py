"""The import contracts in ``pyproject.toml`` (``[tool.importlinter]``) hold, and they bite.

Imports in every service run one way, ``__main__ → server → service → core``; ``make lint``
runs the same ``lint-imports``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")


def _lint(cwd: Path, *args: str, pythonpath: str = "") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_import_contract_is_kept() -> None:
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "BROKEN" not in proc.stdout


def test_a_service_module_importing_its_server_breaks_the_contracts(tmp_path: Path) -> None:
    package = tmp_path / "chatseek_probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text("from chatseek_probe import server\n")
    (package / "server.py").write_text("from chatseek_probe import service\n")
    # Only under TYPE_CHECKING, the way the Deps import used to run.
    (package / "service.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from chatseek_probe.server import Deps\n"
    )
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = chatseek_probe\n\n"
        "[importlinter:contract:layers]\nname = layers\ntype = layers\n"
        "containers =\n    chatseek_probe\nlayers =\n    __main__\n    server\n    service\n"
    )
    proc = _lint(tmp_path, ".importlinter", pythonpath=str(tmp_path))
    assert proc.returncode != 0
    assert "chatseek_probe.service -> chatseek_probe.server" in proc.stdout
