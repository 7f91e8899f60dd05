"""The reader commands: ``thread``, ``context`` and ``evidence``."""

from __future__ import annotations

import argparse
from typing import Any

from chatseek_gateway.cli.common import Subparsers, call, emit, gateway

__all__ = ["print_messages", "register"]


def register(sub: Subparsers) -> None:
    """Add the readers to the top-level parser."""
    p = sub.add_parser("thread", help="the whole reply thread of a message, root first")
    p.add_argument("chat", help="one chat: id, @username, t.me link or title (put -- before ids)")
    p.add_argument("msg_id", type=int)
    p.add_argument("--account", default="")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_thread)

    p = sub.add_parser("context", help="the messages around one, within its thread or topic")
    p.add_argument("chat", help="one chat: id, @username, t.me link or title (put -- before ids)")
    p.add_argument("msg_id", type=int)
    p.add_argument("--before", type=int, default=None, help="messages before (default 15)")
    p.add_argument("--after", type=int, default=None, help="messages after (default 15)")
    p.add_argument("--account", default="")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_context)

    p = sub.add_parser("evidence", help="evidence packets for message locators (tg:acct/chat/msg)")
    p.add_argument("locators", nargs="+")
    p.add_argument("--max-chars", type=int, default=0, help="text per message (default 4000)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_evidence)


def print_messages(doc: dict[str, Any]) -> None:
    """One line per message: date, sender, text, then its link."""
    for m in doc.get("messages", []):
        print(f"[{m['date']}] {m['from_name'] or 'unknown'} (#{m['msg_id']}): {m['text']}")
        print(f"    {m['url']}")


def _thread(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import to_json

    doc = to_json(
        call(
            gateway().search.Thread,
            pb.ThreadRequest(account=args.account, chat=args.chat, msg_id=args.msg_id),
        ).result
    )
    if args.json:
        emit(doc, as_json=True)
    else:
        print_messages(doc)
    return 0


def _context(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import to_json

    request = pb.ContextRequest(account=args.account, chat=args.chat, msg_id=args.msg_id)
    if args.before is not None:
        request.before = args.before
    if args.after is not None:
        request.after = args.after
    doc = to_json(call(gateway().search.Context, request).result)
    if args.json:
        emit(doc, as_json=True)
    else:
        print_messages(doc)
    return 0


def _evidence(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import to_json

    doc = to_json(
        call(
            gateway().search.Evidence,
            pb.EvidenceRequest(locators=args.locators, max_chars=args.max_chars),
        ).result
    )
    if args.json:
        emit(doc, as_json=True)
        return 0
    for packet in doc.get("evidence", []):
        chat = packet["chat"]
        print(f"{packet['locator']}  {chat.get('title') or chat.get('id')}  {packet['date']}")
        print(f"    {packet['sender']['name']}: {packet['text']}")
        print(
            f"    {packet['fingerprint']}  truncated={packet['truncated']}  "
            f"history_complete={packet['chat_history_complete']}"
        )
    return 0
