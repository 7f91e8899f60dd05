"""``docs/services.md`` names every gRPC service and RPC of ``proto/``, each with its request,
its response and the messages that response carries, so the map cannot drift from the wire."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "docs" / "services.md"
PACKAGE = re.compile(r"^package ([\w.]+);", re.M)
SERVICE = re.compile(r"^service (\w+) \{(.*?)^\}", re.M | re.S)
MESSAGE = re.compile(r"^message (\w+) \{(\}|.*?^\})", re.M | re.S)
# A top-level field, or a member of a oneof (no proto here nests a message in a message).
FIELD = re.compile(r"^ +(?:repeated |optional )?([\w.]+) \w+ = \d+;", re.M)
RPC = re.compile(r"rpc (\w+)\((stream )?([\w.]+)\) returns \((stream )?([\w.]+)\)")
SCALARS = {"string", "bytes", "bool", "double", "float", "int32", "int64", "uint32", "uint64"}


def _protos() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "proto").rglob("*.proto")):
        text = path.read_text()
        package = PACKAGE.search(text)
        assert package is not None, path
        out.append((package.group(1), text))
    return out


def _carried() -> dict[str, list[str]]:
    """Per message (qualified): the message types of its top-level fields, in order."""
    out: dict[str, list[str]] = {}
    for package, text in _protos():
        for name, body in MESSAGE.findall(text):
            types = [t.split(".")[-1] for t in FIELD.findall(body) if t not in SCALARS]
            out[f"{package}.{name}"] = list(dict.fromkeys(types))
    return out


def expected_rows() -> dict[str, dict[str, str]]:
    """Per service: each RPC's first three cells as the map writes them."""
    carried = _carried()
    out: dict[str, dict[str, str]] = {}
    for package, text in _protos():
        for service, body in SERVICE.findall(text):
            rows = {}
            for rpc, in_stream, request, out_stream, response in RPC.findall(body):
                qualified = response if "." in response else f"{package}.{response}"
                cells = ", ".join(f"`{t}`" for t in carried[qualified]) or "scalars only"
                arrow = f"{'stream ' if in_stream else ''}`{request.split('.')[-1]}` → "
                arrow += f"{'stream ' if out_stream else ''}`{response.split('.')[-1]}`"
                rows[rpc] = f"| `{rpc}` | {arrow} | {cells} |"
            out[f"{package}.{service}"] = rows
    return out


def _sections() -> dict[str, str]:
    parts = re.split(r"^## `([\w.]+)`", MAP.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_map_names_every_service_and_rpc_with_what_it_carries() -> None:
    expected = expected_rows()
    sections = _sections()
    assert set(sections) == set(expected)
    for service, rows in expected.items():
        written = {
            m.group(1): m.group(0)
            for m in re.finditer(r"^\| `(\w+)` \|.*$", sections[service], flags=re.M)
        }
        assert set(written) == set(rows), service
        for rpc, start in rows.items():
            assert written[rpc].startswith(start), (service, rpc, start)
