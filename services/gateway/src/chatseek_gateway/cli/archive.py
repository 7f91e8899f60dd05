"""The archive commands: ``import``, ``tags``, ``auth``, ``dialogs``, ``sources``, ``sync``,
``extract`` and ``prune-deleted``.

Long passes draw progress on a terminal and print their report (``--json``: the whole
document). ``sources prune`` shows what would go and asks first; without a terminal it needs
``--yes``. ``auth`` prompts for the phone, the code and, when the account has one, the two-step
password (never echoed). Put ``--`` before a negative chat id given as a positional argument.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chatseek_gateway.cli.common import Subparsers, call, emit, gateway, operation, run_operation

if TYPE_CHECKING:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

__all__ = ["register"]

CHUNK_BYTES = 1024 * 1024
JSON_NAMES = ("result.json", "messages.json")
# Only files something can read text out of travel with an import; videos, voice and stickers
# would cost bandwidth and disk for nothing.
READABLE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff", ".pdf", ".docx"}
)
MIN_BUDGET_S = 1.0
DEFAULT_DIALOGS = 20
AUTH_ATTEMPTS = 3
TELEGRAM_TIMEOUT_S = 180.0
DELETE_TIMEOUT_S = 600.0
WARNINGS_SHOWN = 20
YES_ANSWERS = frozenset({"y", "yes"})


def register(sub: Subparsers) -> None:
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
    _register_telegram(sub)


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value < MIN_BUDGET_S:
        raise argparse.ArgumentTypeError(f"the budget is at least {MIN_BUDGET_S:g} s")
    return value


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def _register_telegram(sub: Subparsers) -> None:
    p = sub.add_parser("auth", help="sign in to Telegram (phone, login code, 2FA password)")
    p.add_argument("--account", default="", help="account to sign in (default: active)")
    p.add_argument("--phone", help="phone number in international format (else prompted)")
    p.set_defaults(handler=_auth)

    p = sub.add_parser("dialogs", help="find chats and folders of the account by name")
    p.add_argument("query", help="part of a title, an @username or a folder name")
    p.add_argument("-n", "--limit", type=_positive, default=DEFAULT_DIALOGS, help="matches shown")
    p.add_argument("--account", default="")
    p.add_argument("--json", action="store_true", help="print the matches as JSON")
    p.set_defaults(handler=_dialogs)

    p_src = sub.add_parser("sources", help="the chats and folders chatseek syncs")
    src_sub = p_src.add_subparsers(dest="sources_command", metavar="ACTION")
    src_sub.required = True
    p = src_sub.add_parser("add", help="add a chat or folder (then run `chatseek sync`)")
    p.add_argument(
        "target", help="chat id (after --), @username, t.me link, folder:<name> or a title"
    )
    p.add_argument("--since", default="", help="skip history before this day (YYYY-MM-DD)")
    p.add_argument("--comments", action="store_true", help="channels: also their comments")
    p.add_argument("--account", default="")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_sources_add)
    p = src_sub.add_parser("ls", help="every source with its chats, counts and last sync")
    p.add_argument("--account", default="")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_sources_ls)
    p = src_sub.add_parser("rm", help="remove a source and delete its chats' history")
    p.add_argument(
        "target", help="a source id from `sources ls`, folder name, chat id, @username or title"
    )
    p.add_argument("--account", default="")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_sources_rm)
    p = src_sub.add_parser("prune", help="delete the chats a folder source no longer lists")
    p.add_argument("--dry-run", action="store_true", help="only show what would be deleted")
    p.add_argument("--yes", action="store_true", help="delete without asking")
    p.add_argument("--account", default="")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_sources_prune)

    p = sub.add_parser("sync", help="fetch new messages of every source from Telegram")
    p.add_argument("--budget", type=_budget, help="seconds the run may take (default: no limit)")
    p.add_argument("-c", "--chat", action="append", default=[], help="only this chat (repeatable)")
    p.add_argument("--account", default="")
    p.add_argument(
        "--takeout",
        action="store_true",
        help="fetch through a Telegram data-export (takeout) session, gentler on flood waits "
        "for a big first sync; Telegram asks you to allow it in the app",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the sync report as JSON; progress events stream as JSON lines on stderr",
    )
    p.set_defaults(handler=_sync)

    p = sub.add_parser("extract", help="read text out of stored photos, PDF and DOCX files")
    p.add_argument("--budget", type=_budget, help="seconds the run may take (default: no limit)")
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="queue media that could not be read, or had no extractor, again",
    )
    p.add_argument("--account", default="")
    p.add_argument("--json", action="store_true", help="print the extract report as JSON")
    p.set_defaults(handler=_extract)

    p = sub.add_parser(
        "prune-deleted", help="drop stored messages Telegram no longer has (resumable)"
    )
    p.add_argument("-c", "--chat", default="", help="only this chat (and its comments)")
    p.add_argument("--budget", type=_budget, help="seconds the run may take (default: no limit)")
    p.add_argument("--account", default="")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=_prune_deleted)


def _locate(path: Path) -> tuple[Path, Path]:
    """The export folder and its JSON file."""
    from chatseek_core.errors import InvalidArgument

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


def _requests(
    args: argparse.Namespace, folder: Path, json_file: Path
) -> Iterator[pb.ImportRequest]:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

    yield pb.ImportRequest(
        start=pb.ImportStart(
            json_name=json_file.name,
            folder_name=folder.resolve().name,
            chat_title=args.chat_title or "",
            account=args.account,
            json_size=json_file.stat().st_size,
            json_path=str(json_file.resolve()),
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
    report = run_operation(
        operation(gateway().archive.Import, lambda: _requests(args, folder, json_file)),
        as_json=args.json,
    )
    if args.json:
        emit(report, as_json=True)
        return 0
    chats = report.get("chats", [])
    service = report.get("service_messages", 0)
    print(
        f"imported {report.get('messages_imported', 0)} messages"
        + (f" and {service} service messages" if service else "")
        + f" in {len(chats)} chat(s) as {report.get('source')}: {report.get('new', 0)} new,"
        f" {report.get('updated', 0)} updated, {report.get('unchanged', 0)} unchanged"
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
    from chatseek_core.wire_json import answer_json

    request = pb.TagsRequest(
        account=args.account,
        action=args.tags_action,
        tag=args.tag,
        chat=args.chat or "",
        sender=args.sender or "",
        message=args.message or "",
    )
    doc = answer_json(call(gateway().archive.Tags, request, idempotent=args.tags_action == "ls"))
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


# --- Telegram: auth ---


def _ask(prompt: str) -> str:
    """Read one answer from stdin, the prompt on stderr (stdout stays for results)."""
    from chatseek_core.errors import InvalidArgument

    sys.stderr.write(prompt)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise InvalidArgument("no answer on stdin", hint="run it on a terminal")
    return line.strip()


def _password() -> str:
    import getpass

    from chatseek_core.errors import InvalidArgument

    try:
        return getpass.getpass("Two-step verification password: ")
    except EOFError:
        raise InvalidArgument(
            "the account has two-step verification and no password could be read",
            hint="run `chatseek auth` on a terminal",
        ) from None


def _auth(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.errors import InvalidArgument, NotAuthorized

    phone = args.phone or _ask("Phone number (international format, e.g. +34600000000): ")
    started = call(
        gateway().archive.StartAuth,
        pb.StartAuthRequest(account=args.account, phone=phone),
        timeout=TELEGRAM_TIMEOUT_S,
        idempotent=False,
    )
    code = _ask("Login code Telegram sent: ")
    password = ""
    wrong = 0
    while True:
        request = pb.CompleteAuthRequest(
            account=args.account, login_token=started.login_token, code=code, password=password
        )
        try:
            done = call(
                gateway().archive.CompleteAuth,
                request,
                timeout=TELEGRAM_TIMEOUT_S,
                idempotent=False,
            )
        except NotAuthorized as exc:
            if exc.metadata.get("needs") != "password":
                raise
            password = _password()
            continue
        except InvalidArgument as exc:
            field = exc.metadata.get("field")
            wrong += 1
            if field not in ("code", "password") or wrong >= AUTH_ATTEMPTS:
                raise
            print(f"{exc.message}; try again", file=sys.stderr)
            if field == "code":
                code = _ask("Login code Telegram sent: ")
            else:
                password = _password()
            continue
        print(f"signed in as {done.user}; session saved to {done.session_path}")
        return 0


# --- Telegram: dialogs and sources ---


def _dialogs(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import to_json

    request = pb.DialogsRequest(account=args.account, query=args.query, limit=args.limit)
    doc = to_json(call(gateway().archive.Dialogs, request, timeout=TELEGRAM_TIMEOUT_S).result)
    if args.json:
        emit(doc, as_json=True)
        return 0
    matches = doc.get("matches", [])
    if not matches:
        print(f"nothing matches {args.query!r}", file=sys.stderr)
        return 0
    print(f"{'kind':<7} {'id':>16}  {'type':<10} {'score':>5}  title")
    for m in matches:
        extra = f" @{m['username']}" if m.get("username") else ""
        folders = f"  [{', '.join(m['folders'])}]" if m.get("folders") else ""
        print(
            f"{m['kind']:<7} {m['id']:>16}  {m['type']:<10} {m['score']:>5.2f}  "
            f"{m['title']}{extra}{folders}"
        )
    print("add one with: chatseek sources add TARGET (a folder as folder:<name>)", file=sys.stderr)
    return 0


def _when(unix: float | None) -> str:
    if not unix:
        return "never"
    from datetime import UTC, datetime

    return datetime.fromtimestamp(int(unix), UTC).strftime("%Y-%m-%d %H:%M")


def _sources_ls(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import answer_json

    request = pb.SourcesRequest(account=args.account, action="ls")
    doc = answer_json(call(gateway().archive.Sources, request))
    if args.json:
        emit(doc, as_json=True)
        return 0
    sources = doc.get("sources", [])
    if not sources:
        print("no sources yet: find chats with `chatseek dialogs NAME`, then `sources add`")
        return 0
    for source in sources:
        notes = [source["kind"]]
        if source.get("since"):
            notes.append(f"since {_when(source['since'])[:10]}")
        if source.get("comments"):
            notes.append("comments")
        if not source.get("configured", True):
            notes.append("not configured any more")
        if source.get("resolve_error"):
            notes.append(f"unresolved: {source['resolve_error']}")
        print(f"{source['source_id']}  ({', '.join(notes)})")
        for chat in source.get("chats", []):
            flags = " unavailable" if chat.get("unavailable") else ""
            name = f" @{chat['username']}" if chat.get("username") else ""
            print(
                f"  {chat['id']:>16}  {chat['type']:<10} {chat.get('message_count', 0):>8} msgs"
                f"  synced {_when(chat.get('last_sync_at'))}{flags}  {chat['title']}{name}"
            )
    return 0


def _sources_add(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import answer_json

    request = pb.SourcesRequest(
        account=args.account,
        action="add",
        target=args.target,
        since=args.since,
        comments=args.comments,
    )
    doc = answer_json(
        call(gateway().archive.Sources, request, timeout=TELEGRAM_TIMEOUT_S, idempotent=False)
    )
    if args.json:
        emit(doc, as_json=True)
        return 0
    chats = doc.get("chats", [])
    print(
        f"added {doc.get('source')} ({doc.get('kind')}): {doc.get('title')}, {len(chats)} chat(s)"
    )
    for chat in chats:
        print(f"  {chat['id']:>16}  {chat['type']:<10} {chat['title']}")
    if doc.get("hint"):
        print(doc["hint"], file=sys.stderr)
    return 0


def _sources_rm(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.wire_json import answer_json

    request = pb.SourcesRequest(account=args.account, action="rm", target=args.target)
    doc = answer_json(
        call(gateway().archive.Sources, request, timeout=DELETE_TIMEOUT_S, idempotent=False)
    )
    if args.json:
        emit(doc, as_json=True)
        return 0
    print(
        f"removed {doc.get('source_id')}: {len(doc.get('removed_chat_ids', []))} chat(s), "
        f"{doc.get('messages_deleted', 0)} message(s) deleted"
    )
    return 0


def _print_prune(doc: dict[str, Any]) -> None:
    verb = "would delete" if doc.get("dry_run") else "deleted"
    gone = doc.get("would_remove", doc.get("removed", []))
    for chat in gone:
        print(f"{verb:<12} {chat['chat_id']:>16}  {chat['title']}  ({chat['source_id']})")
    for chat in doc.get("kept", []):
        print(f"{'kept':<12} {chat['chat_id']:>16}  {chat['title']}  ({chat['reason']})")
    if not gone:
        print("nothing to prune: every folder source still lists its chats")


def _confirm(question: str) -> bool:
    return _ask(f"{question} [y/N] ").lower() in YES_ANSWERS


def _sources_prune(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek_core.errors import ConfirmationRequired
    from chatseek_core.wire_json import answer_json

    def prune(dry_run: bool) -> dict[str, Any]:
        request = pb.SourcesRequest(account=args.account, action="prune", dry_run=dry_run)
        reply = call(
            gateway().archive.Sources, request, timeout=DELETE_TIMEOUT_S, idempotent=dry_run
        )
        return answer_json(reply)

    preview = prune(True)
    gone = preview.get("would_remove", [])
    if args.dry_run or not gone:
        if args.json:
            emit(preview, as_json=True)
        else:
            _print_prune(preview)
        return 0
    if not args.yes:
        if not sys.stdin.isatty():
            raise ConfirmationRequired(
                f"pruning would delete {len(gone)} chat(s) and no terminal can confirm it",
                hint="look with `chatseek sources prune --dry-run`, then run it with --yes",
            )
        if not args.json:
            _print_prune(preview)
        if not _confirm(f"delete these {len(gone)} chat(s) and their history?"):
            print("nothing deleted", file=sys.stderr)
            return 0
    done = prune(False)
    if args.json:
        emit(done, as_json=True)
    else:
        _print_prune(done)
    return 0


# --- Telegram: passes ---


def _warn(lines: Sequence[object]) -> None:
    for line in lines[:WARNINGS_SHOWN]:
        print(f"warning: {line}", file=sys.stderr)
    if len(lines) > WARNINGS_SHOWN:
        print(f"warning: … and {len(lines) - WARNINGS_SHOWN} more (see --json)", file=sys.stderr)


def _stopped(report: dict[str, Any], command: str) -> None:
    if report.get("stopped_by") == "budget":
        print(f"stopped by the budget; run `chatseek {command}` again to continue", file=sys.stderr)
    elif report.get("stopped_by") == "flood_wait":
        print(
            f"Telegram asked to wait {report.get('flood_wait_s', 0):.0f} s; what was fetched is "
            f"stored, run `chatseek {command}` after that to continue",
            file=sys.stderr,
        )


def _sync(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

    request = pb.SyncRequest(
        budget_s=args.budget or 0.0, account=args.account, chats=args.chat, takeout=args.takeout
    )
    report = run_operation(operation(gateway().archive.Sync, request), as_json=args.json)
    if args.json:
        emit(report, as_json=True)
        return 0
    print(
        f"synced: {report.get('new', 0)} new, {report.get('updated', 0)} updated, "
        f"{report.get('deleted', 0)} deleted; {report.get('chats_done', 0)} chat(s) up to date, "
        f"{report.get('chats_remaining', 0)} remaining"
    )
    if report.get("takeout") == "declined":
        print(
            "takeout: Telegram did not start the data export; allow it in the Telegram app "
            "and run `chatseek sync --takeout` again (this run used ordinary requests)",
            file=sys.stderr,
        )
    for chat in report.get("unavailable", []):
        print(f"unavailable: {chat['chat_id']} {chat['title']} ({chat['reason']})", file=sys.stderr)
    _stopped(report, "sync")
    _warn(report.get("warnings", []))
    return 0


def _extract(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

    request = pb.ExtractRequest(
        budget_s=args.budget or 0.0, retry_failed=args.retry_failed, account=args.account
    )
    report = run_operation(operation(gateway().archive.Extract, request), as_json=args.json)
    if args.json:
        emit(report, as_json=True)
        return 0
    counts = report.get("counts") or {}
    settled = ", ".join(f"{state} {n}" for state, n in sorted(counts.items())) or "nothing new"
    print(f"extracted: {settled}; {report.get('remaining', 0)} pending")
    if report.get("requeued"):
        print(f"  queued again: {report['requeued']}")
    if report.get("unfetchable"):
        print(
            f"  {report['unfetchable']} media of imported or unavailable chats cannot be fetched",
            file=sys.stderr,
        )
    _stopped(report, "extract")
    return 0


def _prune_deleted(args: argparse.Namespace) -> int:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb

    request = pb.PruneDeletedRequest(
        account=args.account, chat=args.chat, budget_s=args.budget or 0.0
    )
    report = run_operation(operation(gateway().archive.PruneDeleted, request), as_json=args.json)
    if args.json:
        emit(report, as_json=True)
        return 0
    print(
        f"checked {report.get('checked', 0)} message(s), deleted {report.get('deleted', 0)}; "
        f"{report.get('chats_done', 0)} chat(s) done, {report.get('chats_remaining', 0)} remaining"
    )
    _stopped(report, "prune-deleted")
    _warn(report.get("warnings", []))
    return 0
