"""The ``messages`` commands: strict Lucene ``search``, ``parse``, ``stats`` (and ``links``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from chatseek_gateway.cli.common import SOURCE_HELP, Subparsers, at_least_one, call, emit, gateway

if TYPE_CHECKING:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.errors import ChatseekError

__all__ = ["register"]

STATS_BY = ("chat", "sender", "day", "hour")


def _search_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", default="active", help=SOURCE_HELP)
    p.add_argument("--account", default="", help="account scope (default: active)")
    p.add_argument("--chat", action="append", default=[], help="restrict to a chat (repeatable)")
    p.add_argument("--timezone", default="", help="IANA timezone for calendar days")


def register(sub: Subparsers) -> None:
    """Add ``messages`` to the top-level parser."""
    from chatseek_gateway.cli.conversations import register_message_links

    top = sub.add_parser(
        "messages",
        help="strict Lucene search over single messages",
        description="Options come before the query; `--` ends them.",
    )
    actions = top.add_subparsers(dest="messages_command", metavar="ACTION")
    actions.required = True

    p = actions.add_parser("search", help="every message that satisfies a Lucene query")
    p.add_argument("query", nargs="+", help="e.g. invoice AND has:file AND date:[2026-10-01 TO *]")
    _search_options(p)
    p.add_argument("--limit", type=int, default=20, help="items per page (1-1000)")
    p.add_argument("--page", default="", help="the page token a previous result returned")
    p.add_argument("--newest", action="store_true", help="newest first")
    p.add_argument("--context", type=int, default=0, help="neighbours of each hit, each way")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the whole envelope")
    out.add_argument("--jsonl", action="store_true", help="print one item per line")
    p.set_defaults(handler=_search)

    p = actions.add_parser("parse", help="the versioned syntax tree of a query (or its error)")
    p.add_argument("query", nargs="+")
    p.add_argument("--json", action="store_true", help="print the tree as JSON")
    p.set_defaults(handler=_parse)

    p = actions.add_parser("stats", help="count what a search would find, grouped")
    p.add_argument("query", nargs="+")
    _search_options(p)
    p.add_argument("--by", choices=STATS_BY, default="chat")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_stats)

    register_message_links(actions)


def _with_query(exc: ChatseekError, query: str) -> ChatseekError:
    if "span" in exc.metadata:
        exc.metadata.setdefault("query", query)
    return exc


def _request(args: argparse.Namespace) -> pb.SearchMessagesRequest:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import parse_source

    return pb.SearchMessagesRequest(
        query=" ".join(args.query),
        source=parse_source(args.source),
        account=args.account,
        chats=args.chat,
        timezone=args.timezone,
        limit=getattr(args, "limit", 0),
        page_token=getattr(args, "page", ""),
        newest=getattr(args, "newest", False),
        context=getattr(args, "context", 0),
    )


def _search(args: argparse.Namespace) -> int:
    from chatseek_core.errors import ChatseekError
    from chatseek_core.wire_json import to_json

    at_least_one(args.limit, "--limit", "limit")
    request = _request(args)
    try:
        doc = to_json(call(gateway().search.SearchMessages, request).result)
    except ChatseekError as exc:
        raise _with_query(exc, request.query) from None
    if args.json:
        emit(doc, as_json=True)
        return 0
    if args.jsonl:
        for item in doc.get("items", []):
            print(json.dumps(item, ensure_ascii=False))
        return 0
    if not doc.get("words_ready", True):
        print("warning: the word index is still catching up", file=sys.stderr)
    items = doc.get("items", [])
    if not items:
        print("no messages match")
    for item in items:
        chat = item.get("chat", {})
        sender = item.get("sender", {})
        print(f"{item['date']}  {chat.get('title') or chat.get('id')}  {sender.get('name', '')}")
        print(f"    {item.get('snippet') or item.get('text', '')}")
        album = item.get("album") or []
        if album:
            matched = sum(1 for photo in album if photo.get("matched"))
            print(f"    album of {len(album)}, {matched} matching:")
            for photo in album:
                kind = (photo.get("media") or {}).get("kind") or "photo"
                mark = "*" if photo.get("matched") else " "
                print(f"      {mark} {photo.get('snippet') or f'[{kind}]'}")
        print(f"    {item['link']}")
    if doc.get("has_more"):
        print(f"more: --page {doc.get('next_page_token')}", file=sys.stderr)
    return 0


def _parse(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.errors import ChatseekError
    from chatseek_core.wire_json import to_json

    query = " ".join(args.query)
    try:
        tree = to_json(call(gateway().search.ParseQuery, pb.ParseQueryRequest(query=query)).tree)
    except ChatseekError as exc:
        raise _with_query(exc, query) from None
    print(json.dumps(tree, ensure_ascii=False, indent=None if args.json else 2))
    return 0


def _stats(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.errors import ChatseekError
    from chatseek_core.wire_json import to_json

    request = _request(args)
    try:
        doc = to_json(
            call(
                gateway().search.MessageStats, pb.MessageStatsRequest(search=request, by=args.by)
            ).result
        )
    except ChatseekError as exc:
        raise _with_query(exc, request.query) from None
    if args.json:
        emit(doc, as_json=True)
        return 0
    for group in doc.get("buckets", []):
        print(f"{group.get('count', 0):>8}  {group.get('label') or group.get('key')}")
    total = doc.get("total", 0)
    print(
        f"{total:>8}  total"
        + (" (lower bound: some chats are incomplete)" if doc.get("lower_bound") else "")
    )
    return 0
