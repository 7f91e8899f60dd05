"""The archive commands: ``import`` and ``tags``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chatseek_core.errors import InvalidArgument
from chatseek_gateway.cli.common import call, emit, gateway, run_operation

__all__ = ["register"]

CHUNK_BYTES = 1024 * 1024
JSON_NAMES = ("result.json", "messages.json")
# Only files something can read text out of travel with an import; videos, voice and stickers
# would cost bandwidth and disk for nothing.
READABLE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff", ".pdf", ".docx"}
)


def register(sub: Any) -> None:
    """Add the archive commands to the top-level parser."""
    p = sub.add_parser("import", help="import a Telegram Desktop JSON export (folder or file)")
    p.add_argument("path", type=Path, help="the export folder, or its result.json/messages.json")
    p.add_argument("--chat-title", help="title for a single-chat export")
    p.add_argument("--account", default="", help="account to import into (default: active)")
    p.add_argument("--json", action="store_true", help="print the import report as JSON")
    p.set_defaults(handler=_import)

    p_tags = sub.add_parser("tags", help="local labels on chats, senders and messages")
    tags_sub = p_tags.add_subparsers(dest="tags_command", metavar="ACTION")
    tags_sub.required = True
    for action, text in (("add", "attach a tag"), ("rm", "detach a tag")):
        p = tags_sub.add_parser(action, help=text)
        p.add_argument("tag", help="lower-case a-z, 0-9 and '-', 1-32 characters")
        target = p.add_mutually_exclusive_group(required=True)
        target.add_argument("--chat", help="a chat spec")
        target.add_argument("--sender", help="a sender id")
        target.add_argument("--message", help="CHAT/MSG")
        p.add_argument("--account", default="")
        p.add_argument("--json", action="store_true")
        p.set_defaults(handler=_tags, tags_action=action)
    p = tags_sub.add_parser("ls", help="list tags")
    p.add_argument("--account", default="")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_tags, tags_action="ls", tag="", chat=None, sender=None, message=None)


def _locate(path: Path) -> tuple[Path, Path]:
    """The export folder and its JSON file."""
    if path.is_dir():
        for name in JSON_NAMES:
            if (path / name).is_file():
                return path, path / name
        raise InvalidArgument(
            f"{path} holds no result.json or messages.json",
            hint="point at the folder Telegram Desktop exported, or at its JSON file",
        )
    if path.is_file():
        return path.parent, path
    raise InvalidArgument(f"{path} does not exist", hint="check the path")


def _media_files(folder: Path, json_file: Path) -> list[Path]:
    files = []
    for candidate in sorted(folder.rglob("*")):
        if candidate == json_file or not candidate.is_file() or candidate.is_symlink():
            continue
        if candidate.suffix.lower() in READABLE_SUFFIXES:
            files.append(candidate)
    return files


def _requests(args: argparse.Namespace, folder: Path, json_file: Path) -> Iterator[Any]:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

    yield pb.ImportRequest(
        start=pb.ImportStart(
            json_name=json_file.name,
            folder_name=folder.resolve().name,
            chat_title=args.chat_title or "",
            account=args.account,
            json_size=json_file.stat().st_size,
        )
    )
    for file in [json_file, *_media_files(folder, json_file)]:
        rel = file.relative_to(folder).as_posix()
        with open(file, "rb") as handle:
            while True:
                data = handle.read(CHUNK_BYTES)
                last = len(data) < CHUNK_BYTES
                yield pb.ImportRequest(chunk=pb.FileChunk(path=rel, data=data, last=last))
                if last:
                    break


def _import(args: argparse.Namespace) -> int:
    folder, json_file = _locate(args.path)
    stub = gateway()
    report = run_operation(stub.Import(_requests(args, folder, json_file), timeout=24 * 3600.0))
    if args.json:
        emit(report, as_json=True)
        return 0
    chats = report.get("chats", [])
    print(
        f"imported {report.get('messages_imported', 0)} messages "
        f"({report.get('new', 0)} new, {report.get('updated', 0)} updated) "
        f"in {len(chats)} chat(s) as {report.get('source')}"
    )
    for chat in chats:
        print(f"  {chat['id']:>16}  {chat['type']:<10} {chat['title']}")
    media = report.get("media") or {}
    if media:
        print("  media: " + ", ".join(f"{k} {v}" for k, v in sorted(media.items())))
    if report.get("skipped"):
        print(f"  skipped: {report['skipped']}")
    for warning in report.get("warnings", [])[:20]:
        print(f"warning: {warning['message']} ({warning['location']})", file=sys.stderr)
    if report.get("truncated"):
        print(
            "warning: the export ends mid-write; imported up to its last complete message",
            file=sys.stderr,
        )
    return 0


def _tags(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.proto_json import from_document

    request = pb.TagsRequest(
        account=args.account,
        action=args.tags_action,
        tag=args.tag,
        chat=args.chat or "",
        sender=args.sender or "",
        message=args.message or "",
    )
    doc = from_document(call("Tags", request, idempotent=args.tags_action == "ls").result)
    if args.json:
        emit(doc, as_json=True)
    elif args.tags_action == "ls":
        for tag in doc.get("tags", []):
            where = {"chat": f"chat {tag['chat_id']}", "sender": f"sender {tag['sender_id']}"}.get(
                tag["kind"], f"message {tag['chat_id']}/{tag['msg_id']}"
            )
            print(f"{tag['tag']:<20} {where}")
    else:
        changed = doc.get("added", doc.get("removed"))
        print(f"{args.tags_action} {args.tag}: {'done' if changed else 'no change'}")
    return 0
