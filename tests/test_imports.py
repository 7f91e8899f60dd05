"""The import contracts in ``pyproject.toml`` (``[tool.importlinter]``) hold, and they bite.

Imports in every service run one way, ``__main__ → server → service → core``; ``make lint``
runs the same ``lint-imports``.
"""

from __future__ import annotations

import ast
import graphlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")
SOURCE_ROOTS = sorted([*ROOT.glob("services/*/src"), *ROOT.glob("libs/chatseek-*/src")])


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


def _import_cycle(source_roots: list[Path]) -> list[str] | None:
    """One import cycle among the modules under ``source_roots``, or None.

    Stricter than grimp: ``from pkg import sub`` is an edge to ``pkg`` (it runs the package's
    ``__init__``) as well as to ``pkg.sub``, and imports under ``TYPE_CHECKING`` count.
    """
    files: dict[str, Path] = {}
    for source_root in source_roots:
        for path in source_root.glob("*/**/*.py"):
            parts = path.relative_to(source_root).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    head = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*head, base] if base else head)
                targets += [base, *(f"{base}.{alias.name}" for alias in node.names)]
        graph[module] = {t for t in targets if t in files and t != module}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as cycle:
        return list(cycle.args[1])
    return None


def test_no_first_party_modules_import_each_other_in_a_circle() -> None:
    assert _import_cycle(SOURCE_ROOTS) is None


def test_a_submodule_importing_its_package_face_is_a_cycle(tmp_path: Path) -> None:
    package = tmp_path / "chatseek_probe"
    package.mkdir()
    (package / "__init__.py").write_text("from chatseek_probe.run import sync\n")
    (package / "run.py").write_text("from chatseek_probe import writes\n")
    (package / "writes.py").write_text("")
    assert set(_import_cycle([tmp_path]) or []) == {"chatseek_probe", "chatseek_probe.run"}
    (package / "run.py").write_text("import chatseek_probe.writes as writes\n")
    assert _import_cycle([tmp_path]) is None
