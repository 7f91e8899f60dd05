"""Pinned JSON: compare a CLI ``--json`` document or an MCP tool result with a committed copy.

The copies under ``tests/wire/`` were captured on main before results became typed messages
(the strict-search ones just before strict search did); ``CHATSEEK_WIRE_CAPTURE=1`` rewrites
them. Only values that change from run to run (timings, ages, page tokens, unit ids) are
masked; every key, every other value and every type must match exactly, except the changes
the README names: main printed a whole double (a score of 1.0) as the integer 1, and
``DOUBLE_KEYS`` now print as floats; ``status`` printed the embed models' identities with
camelCase keys and without their defaults (``MODEL_KEYS``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

__all__ = ["DOUBLE_KEYS", "as_typed_prints", "assert_pinned"]

WIRE_DIR = Path(__file__).resolve().parent / "wire"
CAPTURE_ENV = "CHATSEEK_WIRE_CAPTURE"
# Timings, ages, page tokens (they carry the time of the first page), unit ids (their
# numbering follows how the import's batches were cut), and in the ops reports: ports, clocks,
# rates, counts since the embed worker started, the backup's directory and its file sizes
# (they follow when SQLite checkpointed), whether a hub model is in this machine's cache, and
# when a listed source's chat was last synced (or imported), and a conversation build's
# milliseconds.
VOLATILE = frozenset(
    {
        *("took_ms", "index_age_min", "last_fetched_at", "next_page_token", "unit_id", "unit_ids"),
        "last_sync_at",
        "ms",
        *("address", "checked_at", "last_write_s_ago", "units_per_s", "eta_s", "since_start"),
        *("directory", "bytes", "cached"),
    }
)
MASK = "<volatile>"
# Double fields of the typed results: main's Struct round trip printed 1.0 as 1.
DOUBLE_KEYS = frozenset(
    {"score", "cosine", "confidence", "took_ms", "index_age_min"}
    | {"units_per_s", "eta_s", "last_write_s_ago", "flood_wait_s"}
)
# `status` wrote the embed service's models in protobuf's JSON mapping (camelCase keys, the
# defaults left out); the typed ModelsInUse writes every field of each under its proto name.
MODEL_KEYS = frozenset({"embedder", "reranker"})
MODEL_DEFAULTS: dict[str, Any] = {
    "name": "",
    "revision": "",
    "dim": 0,
    "max_seq_length": 0,
    "normalized": False,
    "kind": "",
    "backend": "",
    "device": "",
}


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: (MASK if k in VOLATILE and v is not None else _mask(v)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value


def as_typed_prints(value: Any) -> Any:
    """A document main printed, with its whole doubles written as the typed results write them."""
    if isinstance(value, dict):
        return {
            k: float(v)
            if k in DOUBLE_KEYS and isinstance(v, int) and not isinstance(v, bool)
            else _model(v)
            if k in MODEL_KEYS and isinstance(v, dict)
            else as_typed_prints(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [as_typed_prints(v) for v in value]
    return value


def _model(value: dict[str, Any]) -> dict[str, Any]:
    """A model identity main's status printed, as the typed ModelsInUse prints it."""
    snake = {re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower(): v for k, v in value.items()}
    return {**MODEL_DEFAULTS, **snake}


def _typed(value: Any) -> Any:
    """``value`` with each number tagged by its JSON type, so 1 and 1.0 differ."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    return f"{type(value).__name__}:{value!r}"


def _first_difference(got: Any, want: Any, path: str = "$") -> str:
    if isinstance(got, dict) and isinstance(want, dict):
        for key in sorted(set(got) | set(want)):
            if key not in got or key not in want:
                return f"{path}.{key}: only in {'the output' if key in got else 'the pinned copy'}"
            if got[key] != want[key]:
                return _first_difference(got[key], want[key], f"{path}.{key}")
    if isinstance(got, list) and isinstance(want, list):
        if len(got) != len(want):
            return f"{path}: {len(got)} items, pinned {len(want)}"
        for n, (a, b) in enumerate(zip(got, want, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{path}[{n}]")
    return f"{path}: {got!r}, pinned {want!r}"


def assert_pinned(name: str, doc: Any) -> None:
    """Assert ``doc`` equals the pinned ``tests/wire/<name>.json`` (or write it when capturing)."""
    path = WIRE_DIR / f"{name}.json"
    masked = _mask(doc)
    if os.environ.get(CAPTURE_ENV) == "1":
        path.write_text(json.dumps(masked, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        return
    pinned = _mask(json.loads(path.read_text(encoding="utf-8")))
    got, want = _typed(masked), _typed(as_typed_prints(pinned))
    assert got == want, f"{name}: {_first_difference(got, want)}"
