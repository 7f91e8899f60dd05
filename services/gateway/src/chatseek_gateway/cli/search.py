"""The hybrid ``search`` command."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from chatseek_core.limits import MAX_K, SEARCH_MODES
from chatseek_gateway.cli.common import SOURCE_HELP, Subparsers, at_least_one, call, emit, gateway

__all__ = ["print_hits", "register"]


def register(sub: Subparsers) -> None:
    """Add ``search`` to the top-level parser."""
    p = sub.add_parser(
        "search",
        help="find the conversations that answer a question (words + meaning)",
        description="Options come before the query; `--` ends them.",
    )
    p.add_argument("query", nargs="+", help="what to look for (natural language or keywords)")
    p.add_argument(
        "-c",
        "--chat",
        action="append",
        default=[],
        help="restrict to a chat: id, @username, t.me link, folder:<name>, import:<slug> or title",
    )
    p.add_argument("--source", default="active", help=SOURCE_HELP)
    p.add_argument("--account", default="", help="account to search (default: active)")
    p.add_argument(
        "--since",
        default="",
        help="ISO date, month, datetime or age: 30m (minutes), 12h, 7d, 3w, 6M (months), 1y",
    )
    p.add_argument("--until", default="", help="inclusive upper bound, same forms as --since")
    p.add_argument(
        "--kind",
        action="append",
        default=[],
        choices=["window", "thread", "post", "conversation"],
        help="unit kinds to search (repeatable; default window, thread, post)",
    )
    p.add_argument("--mode", default="hybrid", help=f"one of {', '.join(SEARCH_MODES)}")
    p.add_argument("-k", "--limit", type=int, default=10, help=f"number of hits (1-{MAX_K})")
    p.add_argument(
        "--rerank",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="re-score candidates with the cross-encoder (default: on when available)",
    )
    p.add_argument("--full", action="store_true", help="include each hit's whole unit text")
    p.add_argument("--json", action="store_true", help="print the whole result document")
    p.set_defaults(handler=_search)


def print_hits(doc: dict[str, Any]) -> None:
    """Human output: one block per hit, warnings on stderr."""
    for warning in doc.get("warnings", []):
        print(f"warning: {warning['message']} ({warning['code']})", file=sys.stderr)
    hits = doc.get("hits", [])
    if not hits:
        print("no hits")
        return
    for hit in hits:
        chat = hit.get("chat", {})
        dates = hit.get("date_range", {})
        print(
            f"#{hit['rank']}  {hit['score']:.3f}  {hit['kind']}  "
            f"{chat.get('title') or chat.get('id')}  {dates.get('start', '')} → "
            f"{dates.get('end', '')}  [{'+'.join(hit.get('by', []))}]"
        )
        print(f"    {hit['link']}")
        if hit.get("fallback_link"):
            print(f"    {hit['fallback_link']}")
        for line in str(hit.get("text") or hit.get("snippet", "")).splitlines():
            print(f"    {line}")
        print()


def _search(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import parse_mode, parse_source, to_json

    request = pb.SearchRequest(
        query=" ".join(args.query),
        chats=args.chat,
        source=parse_source(args.source),
        account=args.account,
        since=args.since,
        until=args.until,
        kinds=args.kind,
        mode=parse_mode(args.mode),
        k=at_least_one(args.limit, "-k/--limit", "k"),
        full=args.full,
    )
    if args.rerank is not None:
        request.rerank = args.rerank
    doc = to_json(call(gateway().search.Search, request).result)
    if args.json:
        emit(doc, as_json=True)
    else:
        print_hits(doc)
    return 0
