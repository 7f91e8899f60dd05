"""Operations commands: ``stack``, ``status``, ``config``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from chatseek_gateway.cli.common import Subparsers, call, emit, gateway, settings

if TYPE_CHECKING:
    from chatseek_gateway import stack

__all__ = ["register"]


def register(sub: Subparsers) -> None:
    """Add the operations commands to the top-level parser."""
    p_stack = sub.add_parser("stack", help="run every service as a local process")
    stack_sub = p_stack.add_subparsers(dest="stack_command", metavar="ACTION")
    stack_sub.required = True
    p = stack_sub.add_parser("up", help="start the local stack and wait until it serves")
    p.add_argument("--json", action="store_true", help="print the status document")
    p.set_defaults(handler=_stack_up)
    p = stack_sub.add_parser("status", help="health of every service of the local stack")
    p.add_argument("--json", action="store_true", help="print the status document")
    p.set_defaults(handler=_stack_status)
    p = stack_sub.add_parser("logs", help="the recent log of one service")
    p.add_argument("service", help="ingest, unitize, lexical, embed, vector, fusion or gateway")
    p.add_argument("-n", "--lines", type=int, default=200, help="lines to show (default 200)")
    p.set_defaults(handler=_stack_logs)
    p = stack_sub.add_parser("down", help="stop every service of the local stack")
    p.add_argument("--json", action="store_true", help="print what was stopped")
    p.set_defaults(handler=_stack_down)

    p = sub.add_parser("status", help="per service: address, health, version, schema, feed lag")
    p.add_argument("--json", action="store_true", help="print the status document")
    p.set_defaults(handler=_status)

    p = sub.add_parser("verify", help="check every derived store against its sources")
    p.add_argument("--repair", action="store_true", help="replay from the feeds what is missing")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=_verify)

    p = sub.add_parser("backup", help="write a consistent copy of every database file")
    p.add_argument("directory", help="an empty directory (created if missing)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_backup)

    p_cfg = sub.add_parser("config", help="the user config file")
    cfg_sub = p_cfg.add_subparsers(dest="config_command", metavar="ACTION")
    cfg_sub.required = True
    p = cfg_sub.add_parser("path", help="print where config, data, logs and run files live")
    p.add_argument("--json", action="store_true", help="print the paths as JSON")
    p.set_defaults(handler=_config_path)
    p = cfg_sub.add_parser("init", help="write the annotated config template (mode 0600)")
    p.set_defaults(handler=_config_init)


def _print_states(states: list[stack.ServiceState], as_json: bool) -> None:
    if as_json:
        emit({"services": [s.to_dict() for s in states]}, as_json=True)
        return
    for s in states:
        pid = str(s.pid) if s.pid else "-"
        print(f"{s.name:<8} {s.address:<22} pid {pid:<8} {s.health}")


def _stack_up(args: argparse.Namespace) -> int:
    from chatseek_core.errors import Unavailable
    from chatseek_gateway import stack

    def progress(line: str) -> None:
        print(f"  {line}", file=sys.stderr)

    try:
        states = stack.up(settings(), on_progress=progress)
    except stack.StackError as exc:
        raise Unavailable(str(exc), hint="see `chatseek stack logs SERVICE`") from exc
    _print_states(states, args.json)
    return 0


def _stack_status(args: argparse.Namespace) -> int:
    from chatseek_gateway import stack

    states = stack.status(settings())
    _print_states(states, args.json)
    return 0 if all(s.health == "SERVING" for s in states) else 1


def _stack_logs(args: argparse.Namespace) -> int:
    from chatseek_gateway import stack

    try:
        print(stack.logs(settings(), args.service, args.lines))
    except stack.StackError as exc:
        from chatseek_core.errors import InvalidArgument

        raise InvalidArgument(str(exc)) from exc
    return 0


def _stack_down(args: argparse.Namespace) -> int:
    from chatseek_gateway import stack

    stopped = stack.down(settings())
    if args.json:
        emit({"stopped": stopped}, as_json=True)
    else:
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0


def _status(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import to_json

    doc = to_json(call(gateway().ops.Status, pb.StatusRequest()).result)
    if args.json:
        emit(doc, as_json=True)
        return 0
    for svc in doc.get("services", []):
        lag = svc.get("feed_lag") or {}
        lag_text = ", ".join(f"{k} {v}" for k, v in lag.items()) if lag else "-"
        print(
            f"{svc['name']:<8} {svc['address']:<22} {svc['health']:<12} "
            f"v{svc.get('version', '?'):<7} schema {svc.get('schema_version', 0):<3} lag {lag_text}"
        )
        if svc.get("error"):
            details = svc.get("details") or {}
            hint = f" ({details['hint']})" if details.get("hint") else ""
            print(f"         ! {svc['error']}: {details.get('message', '')}{hint}")
    return 0


def _config_path(args: argparse.Namespace) -> int:
    cfg = settings()
    paths = {
        "home": str(cfg.home),
        "config": str(cfg.config_path),
        "data": str(cfg.data_dir),
        "logs": str(cfg.log_dir),
        "run": str(cfg.run_dir),
        "session_dir": str(cfg.home / "sessions"),
    }
    if args.json:
        print(json.dumps(paths, indent=2))
    else:
        for key, value in paths.items():
            print(f"{key:<12} {value}")
    return 0


def _config_init(args: argparse.Namespace) -> int:
    from chatseek_core import config as config_file
    from chatseek_core.errors import AlreadyExists

    cfg = settings()
    try:
        path = config_file.write_template(cfg.config_path)
    except FileExistsError:
        raise AlreadyExists(
            f"{cfg.config_path} already exists",
            hint="edit it, or move it away to write a fresh template",
        ) from None
    print(f"wrote {path} (mode 0600); set [telegram] api_id and api_hash there")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_gateway.cli.common import operation, run_operation

    report = run_operation(
        operation(gateway().ops.Verify, pb.VerifyRequest(repair=args.repair)),
        as_json=args.json,
    )
    if args.json:
        emit(report, as_json=True)
    else:
        for finding in report.get("findings", []):
            mark = "ok  " if finding["ok"] else "FAIL"
            print(
                f"{mark} {finding['check']}"
                + (f" ({finding['problems']})" if finding["problems"] else "")
            )
            for example in finding["examples"]:
                print(f"       {example}")
        for line in report.get("repaired", []):
            print(f"repaired: {line}")
    return 0 if report.get("ok") else 1


def _backup(args: argparse.Namespace) -> int:
    from pathlib import Path

    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import to_json

    directory = str(Path(args.directory).expanduser().resolve())
    doc = to_json(
        call(gateway().ops.Backup, pb.BackupRequest(directory=directory), timeout=3600).result
    )
    if args.json:
        emit(doc, as_json=True)
    else:
        for f in doc["files"]:
            print(f"{f['file']:<12} {f['bytes']:>12} bytes")
        print(f"backup written to {doc['directory']}")
    return 0
