"""Static checks of the container stack: no Docker engine runs on the build machines."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILES = sorted(ROOT.glob("services/*/Dockerfile"))


def _compose() -> dict[str, object]:
    import yaml

    loaded = yaml.safe_load((ROOT / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_compose_yaml_validates_against_the_compose_spec() -> None:
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "check-jsonschema"),
            "--builtin-schema",
            "vendor.compose-spec",
            str(ROOT / "compose.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_service_has_a_dockerfile() -> None:
    assert {p.parent.name for p in DOCKERFILES} == {
        "ingest",
        "unitize",
        "lexical",
        "embed",
        "vector",
        "fusion",
        "gateway",
    }


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_every_dockerfile_copies_sources_that_exist_and_runs_as_non_root(
    dockerfile: Path,
) -> None:
    text = dockerfile.read_text()
    for match in re.finditer(r"^COPY\s+(\S+)\s+\S+", text, flags=re.M):
        assert (ROOT / match.group(1)).exists(), f"{dockerfile}: COPY {match.group(1)} is missing"
    assert re.search(r"^USER\s+(?!root)\S+", text, flags=re.M)
    assert "torch" not in text or dockerfile.parent.name == "embed"


def test_only_the_embed_package_depends_on_torch() -> None:
    for pyproject in ROOT.glob("*/*/pyproject.toml"):
        heavy = "torch" in pyproject.read_text() or "sentence-transformers" in pyproject.read_text()
        assert heavy == (pyproject.parent.name == "embed"), pyproject


def test_every_container_command_names_an_importable_module() -> None:
    services = _compose()["services"]
    assert isinstance(services, dict)
    for name, spec in services.items():
        command = spec["command"]
        assert command[:2] == ["python", "-m"]
        assert importlib.util.find_spec(command[2]) is not None, name
        assert importlib.util.find_spec(f"{command[2]}.__main__") is not None, name


def test_only_the_gateway_is_published_and_only_on_loopback() -> None:
    services = _compose()["services"]
    assert isinstance(services, dict)
    for name, spec in services.items():
        ports = spec.get("ports", [])
        if name != "gateway":
            assert not ports, name
        for port in ports:
            assert str(port).startswith("127.0.0.1:"), port


def test_generated_protobuf_code_is_up_to_date() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        protos = sorted(
            str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto").rglob("*.proto")
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                "-I",
                str(ROOT / "proto"),
                f"--python_out={out}",
                f"--grpc_python_out={out}",
                *protos,
            ],
            check=True,
            capture_output=True,
            cwd=ROOT / "proto",
        )
        committed = ROOT / "libs" / "chatseek-proto" / "src"
        for generated in out.rglob("*.py"):
            twin = committed / generated.relative_to(out)
            assert twin.exists(), f"{twin} is missing: run make proto"
            assert twin.read_text() == generated.read_text(), f"{twin} is stale: run make proto"
