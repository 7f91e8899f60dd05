"""The index commands: ``embed`` (and ``embed status``) and ``reindex``."""

from __future__ import annotations

import argparse
from typing import Any

from chatseek_gateway.cli.common import Subparsers, call, emit, gateway, operation, run_operation

__all__ = ["register"]

# `embed status` adds "no progress for N s" when pending units have waited longer than this.
STALLED_AFTER_S = 30.0


def register(sub: Subparsers) -> None:
    """Add the index commands to the top-level parser."""
    p = sub.add_parser(
        "embed",
        help="embed the units that have no vector yet (`embed status` reports progress)",
    )
    p.add_argument("action", nargs="?", choices=["status"], help="status: what is embedded")
    p.add_argument("-c", "--chat", action="append", default=[], help="restrict to chats")
    p.add_argument("--reembed", action="store_true", help="drop every vector and start over")
    p.add_argument("--yes", action="store_true", help="confirm sending text to a hosted model")
    p.add_argument("--account", default="")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_embed)

    p = sub.add_parser("models", help="the embedding and reranking models chatseek knows")
    p.add_argument("action", choices=["list", "download", "verify"])
    p.add_argument("names", nargs="*", help="download: one hub id; verify: ids or directories")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_models)

    p = sub.add_parser("reindex", help="rebuild a derived index from its sources")
    p.add_argument("target", choices=["lexical", "vector"])
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_reindex)


def _embed(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import to_json

    if args.action == "status":
        doc = to_json(
            call(gateway().ops.EmbedStatus, pb.EmbedStatusRequest(account=args.account)).result
        )
        if args.json:
            emit(doc, as_json=True)
            return 0
        print(
            f"model {doc.get('model')} ({doc.get('dim')}-d); pending {doc.get('total_pending')}"
            + (
                f" (and {doc['not_queued']} changes not queued yet)"
                if doc.get("not_queued")
                else ""
            )
            + "; "
            + _eta_line(doc)
        )
        for chat in doc.get("chats", []):
            print(
                f"  {chat['chat_id']:>16}  embedded {chat['embedded']:>7}  "
                f"pending {chat['pending']:>7}"
            )
        return 0
    request = pb.EmbedRequest(
        account=args.account, chats=args.chat, reembed=args.reembed, yes=args.yes
    )
    report = run_operation(operation(gateway().ops.Embed, request), as_json=args.json)
    if args.json:
        emit(report, as_json=True)
    else:
        print(
            f"embedded {report.get('embedded', 0)}, from cache {report.get('cached', 0)}, "
            f"remaining {report.get('remaining', 0)}"
        )
    return 0


def _eta_line(doc: dict[str, Any]) -> str:
    """``ETA 2m 05s at 350.0 units/s``, or why there is none."""
    if not doc.get("total_pending") and not doc.get("not_queued"):
        return "ETA 0s (every unit embedded)"
    eta, rate = doc.get("eta_s"), doc.get("units_per_s")
    if eta is None or rate is None:
        return "ETA unknown (no embedding measured since vector started)"
    line = f"ETA {_duration(float(eta))} at {float(rate):.1f} units/s"
    ago = doc.get("last_write_s_ago")
    if ago is not None and float(ago) > STALLED_AFTER_S:
        line += f" (no progress for {_duration(float(ago))})"
    return line


def _duration(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def _reindex(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

    report = run_operation(
        operation(gateway().ops.Reindex, pb.ReindexRequest(target=args.target)),
        as_json=args.json,
    )
    if args.json:
        emit(report, as_json=True)
    else:
        print(f"reindexed {args.target}: " + ", ".join(f"{k} {v}" for k, v in report.items()))
    return 0


def _models(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import to_json

    reply = call(
        gateway().ops.Models, pb.ModelsRequest(action=args.action, names=args.names), timeout=3600
    )
    answer = reply.WhichOneof("result")
    doc = {} if answer is None else to_json(getattr(reply, answer))
    if args.json:
        emit(doc, as_json=True)
        return 0
    if args.action == "list":
        for m in doc["models"]:
            flags = ("installed " if m["cached"] else "") + (
                "configured" if m["configured"] else ""
            )
            print(
                f"{m['name']:<42} {m['kind']:<7} {m['dim'] or '':>5} {m['languages']:<13} {flags}"
            )
            if m.get("note"):
                print(f"    {m['note']}")
        return 0
    reports = doc.get("reports") or [doc]
    failed = False
    for report in reports:
        state = "ok" if report["ok"] else "FAILED"
        pinned = "" if report["fully_pinned"] else " (some files unpinned)"
        print(f"{report['name']}: {state}{pinned} — {report['directory']}")
        for f in report["files"]:
            if f["status"] not in ("ok", "extra"):
                print(f"    {f['status']:<9} {f['path']}")
        failed = failed or not report["ok"]
    return 1 if failed else 0
