"""The figures of one ``make e2e`` run, gathered in a JSON file and written out as Markdown.

``facts FILE ...`` records what deploy/e2e/run.sh measured (build time, time to healthy, base
image) with the image sizes read from the engine; the end-to-end tests add theirs (search
latency from the host, recovery after a kill) to the same file through ``CHATSEEK_E2E_FACTS``;
``render FILE`` prints the report that run.sh keeps as deploy/e2e/results/latest.md. Figures are
measured, never asserted; each target stands beside its figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SERVICES = ("ingest", "unitize", "lexical", "embed", "vector", "fusion", "gateway")
SIZE_TARGET_MB = 250
HEALTHY_TARGET_S = 60
LATENCY_TARGET_RATIO = 1.2
MB = 1e6
STANDIN_PREFIX = "chatseek-base:"
RESTARTED = "back by restart: unless-stopped"
CRASH_NOTE = (
    "A crash is a SIGKILL of the service's process from the host, as a fault or the OOM killer "
    "delivers it: the engine counts `docker kill` itself as a manual stop, which "
    "`restart: unless-stopped` rightly leaves stopped. The search latencies are medians from the "
    "host over gRPC; the machine is shared, so read the ratio, not the milliseconds."
)


def _run(*args: str) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    return proc.stdout.strip()


def _load(path: Path) -> dict[str, Any]:
    if path.is_file():
        loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return loaded
    return {}


def facts(args: argparse.Namespace) -> int:
    sizes = {}
    for svc in SERVICES:
        size = _run("docker", "image", "inspect", "-f", "{{.Size}}", f"{args.project}-{svc}")
        if size.isdigit():
            sizes[svc] = round(int(size) / MB, 1)
    base = _run("docker", "image", "inspect", "-f", "{{.Size}}", args.base)
    doc = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _run("git", "rev-parse", "--short", "HEAD"),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}",
        "engine": _run("docker", "version", "-f", "{{.Server.Version}}"),
        "compose": _run(os.environ.get("CHATSEEK_COMPOSE", "docker-compose"), "version", "--short"),
        "base_image": args.base,
        "base_mb": round(int(base) / MB, 1) if base.isdigit() else None,
        "embed_model": os.environ.get("CHATSEEK_EMBED_MODEL", ""),
        "cold_build": args.cold == "true",
        "build_cache_before": args.cache_before,
        "base_built_s": float(args.base_built_s) if args.base_built_s else None,
        "build_s": float(args.build_s),
        "healthy_s": float(args.healthy_s),
        "image_mb": sizes,
    }
    path = Path(args.file)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


def _mark(ok: bool) -> str:
    return "within" if ok else "**over**"


def render(args: argparse.Namespace) -> int:
    doc = _load(Path(args.file))
    out = [
        "# make e2e: the container stack, built and run",
        "",
        f"{doc.get('when', '?')}, commit {doc.get('commit', '?')}, {doc.get('machine', '?')}; "
        f"Docker {doc.get('engine', '?')}, Compose {doc.get('compose', '?')}; base image "
        f"`{doc.get('base_image', '?')}` ({doc.get('base_mb', '?')} MB); embed model "
        f"`{doc.get('embed_model') or 'the default'}`. End-to-end tests: "
        + ("passed." if args.tests_rc == 0 else f"**failed** (pytest exit {args.tests_rc})."),
        "",
        "| image | size (MB) | target |",
        "| --- | ---: | --- |",
    ]
    base_s = doc.get("base_built_s")
    if base_s:
        base_row = f"| stand-in base image from Debian packages | {base_s:.0f} | once, reused |"
    elif str(doc.get("base_image", "")).startswith(STANDIN_PREFIX):
        base_row = "| the stand-in base image | 0 | built by an earlier run, reused |"
    else:
        base_row = "| the base image | 0 | pulled or already there |"
    for svc, size in doc.get("image_mb", {}).items():
        target = "none (carries torch)" if svc == "embed" else f"< {SIZE_TARGET_MB}"
        verdict = "" if svc == "embed" else f" ({_mark(size < SIZE_TARGET_MB)})"
        out.append(f"| {svc} | {size:.0f} | {target}{verdict} |")
    healthy = doc.get("healthy_s", float("nan"))
    out += [
        "",
        "| step | seconds | note |",
        "| --- | ---: | --- |",
        f"| build, every image | {doc.get('build_s', float('nan')):.0f} | "
        + (
            "cold: no image of the stack existed"
            if doc.get("cold_build")
            else "images there (layers cached)"
        )
        + f"; build cache before: {doc.get('build_cache_before', '?')} |",
        base_row,
        f"| `up -d --build` to every health check passing | {healthy:.0f} | target < "
        f"{HEALTHY_TARGET_S} s ({_mark(healthy < HEALTHY_TARGET_S)}) |",
    ]
    failed = doc.get("lexical_failed_searches")
    for key, label, note in (
        ("ingest_back_s", "ingest crashed during an import, to healthy again", RESTARTED),
        (
            "lexical_back_s",
            "lexical crashed during searches, to healthy again",
            f"{RESTARTED}; meanwhile {failed} searches refused, the slowest took "
            f"{doc.get('lexical_slowest_search_s', float('nan')):.1f} s (idempotent reads retry)",
        ),
        ("volume_up_s", "`down` then `up -d`, to healthy with the data kept", "same volume"),
    ):
        if key in doc:
            out.append(f"| {label} | {doc[key]:.0f} | {note} |")
    latency = doc.get("latency")
    if latency:
        out += [
            "",
            "Gateway search latency from the host, the same queries on the same data in the same "
            "run, alternating call by call between the two stacks; p50 (ms):",
            "",
            "| search | calls | containers | local stack | ratio (target <= 1.2) |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for kind, row in latency["kinds"].items():
            ratio = row["containers_ms"] / row["local_ms"]
            out.append(
                f"| {kind} | {row.get('runs', '?')} | {row['containers_ms']:.1f} | "
                f"{row['local_ms']:.1f} | {ratio:.2f} ({_mark(ratio <= LATENCY_TARGET_RATIO)}) |"
            )
    out += ["", CRASH_NOTE]
    for note in doc.get("notes", []):
        out += ["", note]
    print("\n".join(out))
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="report.py", description=__doc__)
    sub = parser.add_subparsers(required=True)
    p = sub.add_parser("facts")
    p.add_argument("file")
    p.add_argument("--base", required=True)
    p.add_argument("--cold", choices=["true", "false"], required=True)
    p.add_argument("--build-s", required=True)
    p.add_argument("--healthy-s", required=True)
    p.add_argument("--project", required=True)
    p.add_argument("--cache-before", default="?")
    p.add_argument("--base-built-s", default="")
    p.set_defaults(handler=facts)
    r = sub.add_parser("render")
    r.add_argument("file")
    r.add_argument("--tests-rc", type=int, default=0)
    r.set_defaults(handler=render)
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
