"""``make bench``: speed, memory and scale, each figure beside a reference measured in the same run.

Sections (``--only`` picks some; each is a module of this package):
* ``units`` — unitize in-process: the full cut of one big chat against reading it back, and
  the median cost of one appended message in a 100k-message chat (``bench.units``).
* ``pipeline`` — generated archives (``bench.generate``) at every scale up to ``--scale``
  through a private local stack, one stage alone at a time with the fake embedder: throughput,
  peak RSS per service, database sizes; then ranked and strict query latency p50/p95/p99
  through gRPC, through the CLI process and in-process (``bench.pipeline``, ``bench.queries``).
* ``embed`` — the packaged all-MiniLM-L6-v2 through the embed service over gRPC against direct
  sentence-transformers calls on the same texts; fp32 against bf16 (``bench.embedding``).
* ``knn`` — exact, quantised and numpy-scan KNN over MiniLM-like and random vectors, with the
  quantised path's recall@10 (``bench.knn``).
* ``load`` — 32 gateway clients (hybrid, strict, thread reads) on an idle stack, then while an
  import of a second archive runs: answers by status and p50/p99 latency, under import over idle
  (``bench.load``).
* ``rival`` — grepogram 0.3.0, installed at run time into a scratch environment, beside
  chatseek on one 100k export: CPU seconds and peak RSS to be searchable by words, runs
  alternating (``bench.rival``); skipped, with the reason, where it cannot be installed.
* ``meaning`` — only when named (``make bench-meaning``): an archive of ``--scale`` messages
  imported on the default model until every unit is embedded, with the ETAs `embed status`
  gave on the way and the cost of importing it again (``bench.meaning``).
Results go to ``bench/results/<stamp>.json`` and ``<stamp>.md`` with PNG charts; ``latest.md``
is a copy of the newest report that ran every default section. Timings are reported as ratios
to their reference; nothing here asserts a timing. A section that fails is recorded as an error
and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from chatseek_unitize.linkahead import keep_grpc_out_of_forks

# As the unitize service does before gRPC is imported: the conversation build measured here, in
# this process, forks a child that uses no gRPC.
keep_grpc_out_of_forks()

from bench.measure import cpu_count, settle  # noqa: E402
from bench.report import OPT_IN_SECTIONS, SECTIONS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
SCALE_ORDER = ("10k", "100k", "1m")
MESSAGES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
# The archive imported while the load clients run, per --scale. The load section asks whether
# any request fails during an import, which 400k messages show as well as 1M; a 1M import under
# 32 clients alone took longer than the whole 1M budget allows.
LOAD_IMPORT = {"10k": 20_000, "100k": 200_000, "1m": 400_000}


def _cpu() -> str:
    """The CPU model, and which bf16 instructions it has: the embedder's speed follows them, so
    reports from different hosts compare only with this in view."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "CPU model unknown"
    fields: dict[str, str] = {}
    for line in lines:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = fields.get("flags", "").split()
    bf16 = ", ".join(flag for flag in ("amx_bf16", "avx512_bf16") if flag in flags)
    model = fields.get("model name", "CPU model unknown")
    return f"{model} ({bf16 or 'no bf16 instructions'})"


def _machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    blas = os.environ.get("OPENBLAS_CORETYPE")
    return (
        f"{platform.machine()}, {cpu_count()} CPUs of {_cpu()}, Python {platform.python_version()},"
        f" load average at start {load}" + (f", OPENBLAS_CORETYPE={blas}" if blas else "")
    )


def _write(results: dict[str, Any], out: Path) -> None:
    (out / f"{results['stamp']}.json").write_text(json.dumps(results, indent=1, ensure_ascii=False))


def _section(
    results: dict[str, Any],
    key: str,
    fn: Callable[[], Any],
    out: Path,
    progress: Callable[[str], None],
) -> Any:
    quiet = settle()
    results.setdefault("settle", {})[key] = quiet
    progress(f"{key}: started after {quiet['waited_s']} s settling (idle {quiet.get('idle', '?')})")
    started = time.perf_counter()
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - one section failing must not lose the others
        progress(f"{key} failed: {exc!r}")
        results.setdefault("errors", {})[key] = traceback.format_exc(limit=8)[-2000:]
        value = None
    results.setdefault("section_s", {})[key] = round(time.perf_counter() - started, 1)
    _write(results, out)
    return value


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; returns the exit code (1 when a section failed)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scale",
        choices=SCALE_ORDER,
        default="100k",
        help="the largest archive (and KNN size, and unitize chat)",
    )
    parser.add_argument(
        "--pipeline-scales",
        default="",
        help="comma-separated pipeline scales (default: every scale up to --scale)",
    )
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections among {', '.join(SECTIONS + OPT_IN_SECTIONS)}"
        f" (default: all but {', '.join(OPT_IN_SECTIONS)})",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where reports go")
    args = parser.parse_args(argv)
    sections = [s for s in args.only.split(",") if s]
    unknown = sorted(set(sections) - set(SECTIONS + OPT_IN_SECTIONS))
    if unknown:
        parser.error(f"unknown sections: {', '.join(unknown)}")
    top = SCALE_ORDER.index(args.scale)
    scales = [s for s in args.pipeline_scales.split(",") if s] or list(SCALE_ORDER[: top + 1])
    bad = sorted(set(scales) - set(SCALE_ORDER))
    if bad:
        parser.error(f"unknown pipeline scales: {', '.join(bad)}")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    results: dict[str, Any] = {
        "stamp": stamp,
        "scale": args.scale,
        "sections": sections,
        "machine": _machine(),
        "argv": sys.argv[1:] if argv is None else argv,
    }

    def progress(line: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {line}", flush=True)

    from bench import embedding, knn, load, meaning, models, pipeline, rival, units

    if "units" in sections:
        results["units"] = _section(
            results,
            "units",
            lambda: units.units_section(MESSAGES[args.scale], progress),
            out,
            progress,
        )
    if "pipeline" in sections:
        results["pipeline"] = {}
        for scale in sorted(scales, key=SCALE_ORDER.index):
            value = _section(
                results,
                f"pipeline_{scale}",
                partial(pipeline.pipeline_section, scale, progress),
                out,
                progress,
            )
            if value is not None:
                results["pipeline"][scale] = value
    if "embed" in sections:
        results["embed"] = _section(
            results, "embed", lambda: embedding.embedding_section(progress), out, progress
        )
    if "models" in sections:
        results["models"] = _section(
            results, "models", lambda: models.models_section(progress), out, progress
        )
    if "knn" in sections:
        results["knn"] = _section(
            results, "knn", lambda: knn.knn_section(args.scale, progress), out, progress
        )
    if "load" in sections:
        results["load"] = _section(
            results,
            "load",
            lambda: load.load_section(LOAD_IMPORT[args.scale], progress),
            out,
            progress,
        )
    if "rival" in sections:
        results["rival"] = _section(
            results, "rival", lambda: rival.rival_section(progress), out, progress
        )
    if "meaning" in sections:
        results["meaning"] = _section(
            results,
            "meaning",
            lambda: meaning.meaning_section(MESSAGES[args.scale], progress),
            out,
            progress,
        )
    results["total_s"] = round(time.perf_counter() - started, 1)
    _write(results, out)
    from bench import report

    images = report.charts(results, out / stamp)
    text = report.markdown(results, images)
    (out / f"{stamp}.md").write_text(text)
    also = ""
    if set(SECTIONS) <= set(sections):
        shutil.copyfile(out / f"{stamp}.md", out / "latest.md")
        also = " (also latest.md)"
    progress(f"report: {out / (stamp + '.md')}{also}; {results['total_s']} s in all")
    return 1 if results.get("errors") else 0


if __name__ == "__main__":
    raise SystemExit(main())
