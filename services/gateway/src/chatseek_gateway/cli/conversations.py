"""The ``conversations`` commands of the CLI (and the handler of ``messages links``).

``conversations build`` reconstructs a chat's conversations (publishing atomically), ``search``
finds the conversations that answer a question, ``list`` / ``show`` read the current build,
``links`` prints the whole parent map, and ``batches`` drives agent-assisted linking: status, get
a batch, answer it, then build again.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from chatseek_gateway.cli.common import (
    SOURCE_HELP,
    Subparsers,
    call,
    emit,
    gateway,
    operation,
    run_operation,
)
from chatseek_gateway.shapes import Answered

if TYPE_CHECKING:
    import grpc

__all__ = ["register", "register_message_links"]

READ_TIMEOUT_S = 120.0
TEXT_PREVIEW = 160
STDIN_NAME = "-"

Req = TypeVar("Req")
Doc = TypeVar("Doc", bound=Answered)


def _common(p: argparse.ArgumentParser, *, chat_required: bool = True) -> None:
    p.add_argument(
        "--chat", required=chat_required, help="one chat: id, @username, t.me link or title"
    )
    p.add_argument("--account", default="", help="account (default: active)")
    p.add_argument("--json", action="store_true", help="print the whole JSON document")


def register(sub: Subparsers) -> None:
    """Add the ``conversations`` commands to the top-level parser."""
    top = sub.add_parser("conversations", help="reconstructed conversations of a chat")
    conv = top.add_subparsers(dest="conversations_command", metavar="ACTION")
    conv.required = True

    p = conv.add_parser("build", help="rebuild conversations (previous build readable meanwhile)")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--chat", action="append", help="a chat spec (repeatable)")
    target.add_argument("--all", action="store_true", help="every chat of the account")
    p.add_argument("--account", default="", help="account (default: active)")
    p.add_argument("--json", action="store_true", help="print the build report as JSON")
    p.set_defaults(handler=_build)

    p = conv.add_parser("search", help="the conversations that answer a question")
    p.add_argument("question", nargs="+", help="a natural-language question, in any language")
    p.add_argument("--chat", action="append", default=[], help="restrict to a chat (repeatable)")
    p.add_argument("--since", default="", help="only conversations active since (ISO, 7d, …)")
    p.add_argument("-k", "--limit", type=int, default=0, help="at most this many (default 10)")
    p.add_argument("--source", default="active", help=SOURCE_HELP)
    p.add_argument("--account", default="", help="account (default: active)")
    p.add_argument("--json", action="store_true", help="print the whole JSON document")
    p.set_defaults(handler=_search)

    p = conv.add_parser("list", help="conversations of the current build, newest first")
    _common(p)
    p.add_argument("--since", default="", help="only those active since (2026-03-01, 7d, …)")
    p.add_argument("--limit", type=int, default=0, help="at most this many (default 50)")
    p.set_defaults(handler=_list)

    p = conv.add_parser("show", help="the messages of one conversation, in order")
    p.add_argument("conversation_id", type=int, help="an id from `conversations list`")
    _common(p)
    p.set_defaults(handler=_show)

    p = conv.add_parser("links", help='every message mapped to its parent: {"1002": 1001, ...}')
    _common(p)
    p.set_defaults(handler=_links)

    p = conv.add_parser("batches", help="agent-assisted linking: status, get, answer")
    actions = p.add_subparsers(dest="batches_action", metavar="ACTION")
    actions.required = True
    for action, text in (
        ("status", "how many uncertain messages await an answer; stale answers"),
        ("get", "a batch of uncertain messages with their candidate parents"),
        ("answer", 'store answers: {"answers": [{"msg_id": 1002, "parent": 1001 | "new"}]}'),
    ):
        q = actions.add_parser(action, help=text)
        _common(q)
        if action == "get":
            q.add_argument("--size", type=int, default=0, help="messages per batch (default 20)")
        if action == "answer":
            q.add_argument("--file", default=STDIN_NAME, help="the answer JSON file, - for stdin")
        q.set_defaults(handler=_batches, batch_action=action)


def register_message_links(messages_sub: Subparsers) -> None:
    """Add ``links CHAT MSG`` to the ``messages`` command's subparsers."""
    p = messages_sub.add_parser("links", help="a message's parent chain and rejected candidates")
    p.add_argument("chat", help="one chat: id, @username, t.me link or title (put -- before ids)")
    p.add_argument("msg_id", type=int)
    p.add_argument("--account", default="")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=message_links)


def _doc(
    method: grpc.UnaryUnaryMultiCallable[Req, Doc], request: Req, *, idempotent: bool = True
) -> dict[str, Any]:
    from chatseek_core.wire_json import to_json

    reply = call(method, request, timeout=READ_TIMEOUT_S, idempotent=idempotent)
    return to_json(reply.result)


def _preview(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TEXT_PREVIEW else line[: TEXT_PREVIEW - 1] + "…"


def _build(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

    request = pb.BuildConversationsRequest(
        account=args.account, chats=args.chat or [], all=args.all
    )
    report = run_operation(
        operation(gateway().conversations.BuildConversations, request), as_json=args.json
    )
    if args.json:
        emit(report, as_json=True)
        return 0
    for chat in report.get("chats", []):
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(chat.get("reasons", {}).items()))
        print(
            f"chat {chat['chat_id']}: build {chat['build_id']}, {chat['messages']} messages in "
            f"{chat['conversations']} conversations, {chat['chunks']} chunks "
            f"({chat['chunks_reused']} reused) in {chat['ms']} ms"
        )
        if reasons:
            print(f"  links: {reasons}")
        if chat.get("stale_answers"):
            print(f"  {chat['stale_answers']} stale agent answers ignored", file=sys.stderr)
    print(f"note: {report.get('note', '')}", file=sys.stderr)
    return 0


def _search(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import parse_source, to_json

    request = pb.SearchConversationsRequest(
        question=" ".join(args.question),
        chats=args.chat,
        source=parse_source(args.source),
        account=args.account,
        since=args.since,
        k=args.limit,
    )
    reply = call(gateway().search.SearchConversations, request, timeout=READ_TIMEOUT_S)
    doc = to_json(reply.result)
    if args.json:
        emit(doc, as_json=True)
        return 0
    for r in doc.get("results", []):
        c = r["conversation"]
        chat = c.get("chat", {})
        title = chat.get("title") or chat.get("id", "")
        print(
            f"{r['rank']:>2}. {title} #{c['conversation_id']} {c['start']} .. {c['end']} "
            f"({c['message_count']} msgs, by {'+'.join(r.get('by', []))})"
        )
        for chunk in r.get("evidence", []):
            print(
                f"    #{chunk['first_msg_id']}..#{chunk['last_msg_id']}: {_preview(chunk['text'])}"
            )
        print(f"    {r.get('link') or ''}   read all: {r.get('read', {}).get('command', '')}")
    for w in doc.get("warnings", []):
        print(f"warning: {w.get('message', '')} ({w.get('code', '')})", file=sys.stderr)
    if not doc.get("results"):
        print("no conversation matched; are the chats built (`conversations build`)?")
    return 0


def _list(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

    doc = _doc(
        gateway().conversations.ListConversations,
        pb.ListConversationsRequest(
            account=args.account, chat=args.chat, since=args.since, limit=args.limit
        ),
    )
    if args.json:
        emit(doc, as_json=True)
        return 0
    for c in doc.get("conversations", []):
        people = ", ".join(c.get("participants", [])[:5])
        print(
            f"#{c['conversation_id']:<6} {c['start']} .. {c['end']}  "
            f"{c['message_count']:>4} msgs  {people}"
        )
    print(
        f"{len(doc.get('conversations', []))} of {doc.get('total', 0)} conversations "
        f"(build {doc.get('build_id')}); {doc.get('note', '')}",
        file=sys.stderr,
    )
    return 0


def _show(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

    doc = _doc(
        gateway().conversations.ShowConversation,
        pb.ShowConversationRequest(
            account=args.account, chat=args.chat, conversation_id=args.conversation_id
        ),
    )
    if args.json:
        emit(doc, as_json=True)
        return 0
    for m in doc.get("messages", []):
        parent = f" ↳ {m['parent_id']} ({m['reason']})" if m.get("parent_id") is not None else ""
        media = f"[{m['media']}] " if m.get("media") else ""
        print(f"[{m.get('date')}] {m.get('sender') or 'unknown'} (#{m['msg_id']}){parent}")
        print(f"    {media}{_preview(m.get('text') or '')}")
    return 0


def _links(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

    result = _doc(
        gateway().conversations.ChatLinks, pb.ChatLinksRequest(account=args.account, chat=args.chat)
    )
    doc = {str(link["msg_id"]): link["parent_id"] for link in result["links"]}
    if args.json:
        print(json.dumps(doc, ensure_ascii=False))
        return 0
    for msg_id, parent in doc.items():
        print(f"{msg_id} <- {parent}" if parent is not None else f"{msg_id} (starts)")
    return 0


def _answer_text(source: str) -> str:
    if source == STDIN_NAME:
        return sys.stdin.read()
    path = Path(source)
    if not path.is_file():
        from chatseek_core.errors import InvalidArgument

        raise InvalidArgument(f"{source} is not a file", hint="--file PATH or - for stdin")
    return path.read_text(encoding="utf-8")


def _batches(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

    action = args.batch_action
    request = pb.LinkBatchRequest(account=args.account, chat=args.chat, action=action)
    if action == "get":
        request.size = args.size
    if action == "answer":
        request.answer_json = _answer_text(args.file)
    doc = _doc(gateway().conversations.LinkBatch, request, idempotent=action != "answer")
    if args.json:
        emit(doc, as_json=True)
    elif action == "status":
        print(
            f"{doc['messages']} messages, {doc['answered']} answered, "
            f"{doc['unanswered_uncertain']} uncertain without an answer, "
            f"{doc['stale_answers']} stale answers (build {doc['build_id']})"
        )
    elif action == "get":
        for m in doc.get("messages", []):
            print(f"#{m['msg_id']} [{m['date']}] {m['sender']}: {_preview(m['text'])}")
            for c in m.get("candidates", []):
                score = "" if c.get("score") is None else f" ({c['score']:.2f})"
                print(f"    -> #{c['msg_id']}{score} {c['sender']}: {_preview(c['text'])}")
        print("answer with `chatseek conversations batches answer --file F`", file=sys.stderr)
    else:
        print(f"stored {doc['stored']} answers; rebuild to apply them")
        for r in doc.get("rejected", []):
            print(f"rejected #{r.get('msg_id')}: {r['reason']}", file=sys.stderr)
    return 0


def message_links(args: argparse.Namespace) -> int:
    """``messages links CHAT MSG``: the parent chain of one message and its rejected candidates."""
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

    doc = _doc(
        gateway().conversations.MessageLinks,
        pb.MessageLinksRequest(account=args.account, chat=args.chat, msg_id=args.msg_id),
    )
    if args.json:
        emit(doc, as_json=True)
        return 0
    print(f"message {doc['msg_id']} in conversation #{doc['conversation_id']}:")
    for step in doc.get("chain", []):
        parent = step["parent_id"] if step["parent_id"] is not None else "start"
        print(f"  #{step['msg_id']} -> {parent}  ({step['reason']}, {step['confidence']:.2f})")
    for r in doc.get("rejected", []):
        cand = r["candidate_id"] if r["candidate_id"] is not None else "new conversation"
        print(f"  rejected: {cand} ({r['score']:.2f})")
    return 0
