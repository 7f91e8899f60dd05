"""Hostile input: damaged exports through the importer, and bad requests through the gateway.

The importer is fuzzed with mutations of the real exports in ``../shared/eval/import-fixtures``
(truncation, wrong JSON types, missing keys, huge strings, invalid UTF-8, deep nesting), each
imported into a copy of a real migrated ``ingest.db`` that already holds a committed chat: the
result is a report whose warnings say what was skipped or cut, or a ``MalformedExport`` naming
the file, the location and how far the import got; never another exception, and a chat the
import did not finish is never marked complete without the report or error naming it. The
suite's per-test timeout is the guard against a hang. The gateway part sends out-of-range,
unknown and over-long values over real gRPC to a private stack: each is refused with its status
code, reason and the field it names.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from chatseek.common.v1 import common_pb2
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek_core import db
from chatseek_core.client import decode_error
from chatseek_core.errors import MalformedExport
from chatseek_core.server import MAX_MESSAGE_BYTES
from chatseek_gateway.cli.common import EXIT_CODES
from chatseek_gateway.stubs import GatewayStubs
from chatseek_ingest.export import MAX_NESTING, export_slug
from chatseek_ingest.importer import ImportReport, import_export
from chatseek_testing.telegram import ingest_db
from tests.security_helpers import Msg, Mutation, mutated_exports, write_export
from tests.stack_helpers import cli, stack_env

ACCOUNT = "default"
FIXTURE_GLOB = "import-fixtures/chat-history-manager/*/result.json"
FUZZ_EXAMPLES = 60
LONG_FUZZ_EXAMPLES = 1000
LONG_FUZZ_TIMEOUT_S = 3600
BASELINE_CHAT_ID = 1_666_000_001
FIRST_CHAT_ID = 1_666_000_002
SECOND_CHAT_ID = 1_666_000_003
WARNING_KINDS = {"skipped", "truncated", "unsafe_media_path"}
# A warning or error quotes at most a little of the file, however large its strings are.
MAX_TEXT_CHARS = 1024
ACCOUNT_EXPORT = (
    Path(__file__).resolve().parents[1] / "services/ingest/tests/fixtures/exports/account"
)
SUPERGROUP = "-1001500000001"
OVER_QUERY_BUDGET = 8193
RPC_TIMEOUT_S = 60.0


# --- the store every fuzz case imports into ---


@dataclass(frozen=True)
class Template:
    """A migrated ``ingest.db`` holding one committed chat, and that chat's rows."""

    path: Path
    baseline: list[tuple[Any, ...]]


def _baseline(conn: db.Connection) -> list[tuple[Any, ...]]:
    return [
        tuple(row)
        for row in conn.execute(
            "SELECT c.title, c.history_complete, c.message_count, m.msg_id, m.date, m.text"
            " FROM chats c JOIN messages m ON m.account = c.account AND m.chat_id = c.chat_id"
            " WHERE c.chat_id = ? ORDER BY m.msg_id",
            (-BASELINE_CHAT_ID,),
        )
    ]


def _messages(count: int, first: int = 1) -> list[Msg]:
    return [
        Msg(first + i, 2 * i, "Ana" if i % 2 else "Ben", f"line {first + i}") for i in range(count)
    ]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    """The store a fuzz case starts from: one chat imported and committed before."""
    folder = tmp_path_factory.mktemp("template")
    conn = ingest_db(folder / "ingest.db")
    export = write_export(
        folder / "baseline", [("Committed Before", "private_group", BASELINE_CHAT_ID, _messages(6))]
    )
    import_export(conn, ACCOUNT, export)
    baseline = _baseline(conn)
    conn.close()
    assert baseline and all(row[1] == 1 for row in baseline)
    return Template(folder / "ingest.db", baseline)


def _stored(conn: db.Connection, source_id: str) -> int:
    row = conn.execute(
        "SELECT COUNT(*) FROM messages m JOIN chats c"
        " ON c.account = m.account AND c.chat_id = m.chat_id WHERE c.source_id = ?",
        (source_id,),
    ).fetchone()
    return int(row[0])


def _incomplete(conn: db.Connection, source_id: str) -> set[int]:
    return {
        int(r[0])
        for r in conn.execute(
            "SELECT chat_id FROM chats WHERE source_id = ? AND history_complete = 0", (source_id,)
        )
    }


def _check_report(conn: db.Connection, report: ImportReport, source_id: str, cut: bool) -> set[int]:
    """The report's own consistency; returns the chats its warnings name as cut short."""
    kinds = Counter(w["kind"] for w in report.warnings)
    assert set(kinds) <= WARNING_KINDS, report.warnings
    assert all(w["message"] and w["location"] for w in report.warnings), report.warnings
    assert all(len(w["message"]) <= MAX_TEXT_CHARS for w in report.warnings)
    assert report.skipped == kinds["skipped"]
    assert kinds["truncated"] <= 1 and report.truncated == (kinds["truncated"] == 1)
    assert cut or not report.truncated
    assert report.new == _stored(conn, source_id)
    read = report.new + report.updated + report.unchanged
    assert read == report.messages_imported + report.service_messages
    return {w["chat_id"] for w in report.warnings if w["kind"] == "truncated" and w["chat_id"]}


def _check_refusal(
    conn: db.Connection, error: MalformedExport, source_id: str, file: Path
) -> set[int]:
    """The error names the file, a location and how far it got; returns its partial chat."""
    assert error.reason == "MALFORMED_EXPORT"
    assert error.metadata["file"] == str(file.resolve())
    assert error.metadata["location"]
    assert str(file.resolve()) in error.message and "imported before it" in error.message
    assert len(error.message) <= MAX_TEXT_CHARS
    reported = int(error.metadata["messages_stored"])
    stored = _stored(conn, source_id)
    assert stored <= reported and (stored == 0) == (reported == 0)
    partial = error.metadata.get("partial_chat")
    return {int(partial)} if partial else set()


def _import_mutation(template: Template, mutation: Mutation) -> str:
    """Import ``mutation`` over a copy of the template; returns what happened."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shutil.copyfile(template.path, root / "ingest.db")
        export = root / "export"
        export.mkdir()
        (export / "result.json").write_bytes(mutation.data)
        source_id = f"import:{export_slug(export)}"
        conn = db.connect(root / "ingest.db")
        try:
            try:
                report = import_export(conn, ACCOUNT, export)
            except MalformedExport as error:
                named = _check_refusal(conn, error, source_id, export / "result.json")
                outcome = "refused"
            else:
                named = _check_report(conn, report, source_id, mutation.cut)
                outcome = "cut short" if report.truncated else "imported"
            assert _incomplete(conn, source_id) <= named
            assert _baseline(conn) == template.baseline
        finally:
            conn.close()
    return outcome


def _fixtures(eval_dir: Path) -> list[Path]:
    found = sorted(eval_dir.glob(FIXTURE_GLOB))
    if not found:
        pytest.skip(f"no import fixtures under {eval_dir}")
    return found


FUZZ = settings(
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


@settings(FUZZ, max_examples=FUZZ_EXAMPLES)
@given(data=st.data())
def test_a_damaged_real_export_imports_or_fails_with_a_located_error(
    eval_dir: Path, template: Template, data: st.DataObject
) -> None:
    strategy = mutated_exports(_fixtures(eval_dir), max_string=1024 * 1024, max_depth=100_000)
    event(_import_mutation(template, data.draw(strategy)))


@pytest.mark.long
@pytest.mark.timeout(LONG_FUZZ_TIMEOUT_S)
@settings(FUZZ, max_examples=LONG_FUZZ_EXAMPLES)
@given(data=st.data())
def test_many_damaged_real_exports_import_or_fail_with_a_located_error(
    eval_dir: Path, template: Template, data: st.DataObject
) -> None:
    strategy = mutated_exports(_fixtures(eval_dir), max_string=4 * 1024 * 1024, max_depth=2_000_000)
    event(_import_mutation(template, data.draw(strategy)))


# --- damage the fuzzer found, pinned ---


def _two_chats(folder: Path, second: list[Msg]) -> Path:
    return write_export(
        folder,
        [
            ("First", "private_group", FIRST_CHAT_ID, _messages(3)),
            ("Second", "private_group", SECOND_CHAT_ID, second),
        ],
    )


def _history(conn: db.Connection, chat_id: int) -> tuple[int, list[int]]:
    done = conn.execute(
        "SELECT history_complete FROM chats WHERE chat_id = ?", (-chat_id,)
    ).fetchone()[0]
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT msg_id FROM messages WHERE chat_id = ? ORDER BY msg_id", (-chat_id,)
        )
    ]
    return int(done), ids


def test_a_file_cut_inside_a_chat_leaves_it_incomplete_and_the_report_names_it(
    tmp_path: Path,
) -> None:
    export = _two_chats(tmp_path / "export", _messages(5, first=101))
    data = (export / "result.json").read_bytes()
    (export / "result.json").write_bytes(data[: data.index(b'"id": 104')])
    conn = ingest_db(tmp_path / "ingest.db")
    report = import_export(conn, ACCOUNT, export)
    assert report.truncated
    (cut,) = [w for w in report.warnings if w["kind"] == "truncated"]
    assert cut["chat_id"] == -SECOND_CHAT_ID
    assert _history(conn, FIRST_CHAT_ID) == (1, [1, 2, 3])
    assert _history(conn, SECOND_CHAT_ID) == (0, [101, 102, 103])


def test_a_malformed_export_keeps_what_it_read_and_says_how_far_it_got(tmp_path: Path) -> None:
    export = _two_chats(tmp_path / "export", _messages(5, first=101))
    data = (export / "result.json").read_bytes()
    (export / "result.json").write_bytes(data.replace(b'"line 103"', b'"line \xff 103"'))
    conn = ingest_db(tmp_path / "ingest.db")
    with pytest.raises(MalformedExport) as caught:
        import_export(conn, ACCOUNT, export)
    error = caught.value
    assert "invalid UTF-8" in error.message
    assert error.metadata["location"] == "chats.list[1].messages[2]"
    assert error.metadata["messages_stored"] == "5"
    assert error.metadata["partial_chat"] == str(-SECOND_CHAT_ID)
    assert _history(conn, FIRST_CHAT_ID) == (1, [1, 2, 3])
    assert _history(conn, SECOND_CHAT_ID) == (0, [101, 102])


@pytest.mark.parametrize("opener", [b"[", b'{"a":'])
def test_nesting_a_million_levels_deep_is_refused_where_it_starts(
    tmp_path: Path, opener: bytes
) -> None:
    export = _two_chats(tmp_path / "export", _messages(3, first=101))
    depth = 1_000_000
    closer = b"]" if opener == b"[" else b"}"
    data = (export / "result.json").read_bytes()
    nested = opener * depth + b"1" + closer * depth
    (export / "result.json").write_bytes(data.replace(b'"line 102"', nested))
    conn = ingest_db(tmp_path / "ingest.db")
    with pytest.raises(MalformedExport) as caught:
        import_export(conn, ACCOUNT, export)
    assert f"deeper than {MAX_NESTING} levels" in caught.value.message
    assert caught.value.metadata["location"].startswith("chats.list[1]")
    assert _history(conn, FIRST_CHAT_ID) == (1, [1, 2, 3])


@pytest.mark.parametrize(
    "bad", [b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xff"], ids=repr
)
def test_invalid_utf8_the_parser_lets_through_is_still_a_located_error(
    tmp_path: Path, bad: bytes
) -> None:
    export = _two_chats(tmp_path / "export", _messages(3, first=101))
    data = (export / "result.json").read_bytes()
    (export / "result.json").write_bytes(data.replace(b"line 102", b"line " + bad))
    conn = ingest_db(tmp_path / "ingest.db")
    with pytest.raises(MalformedExport) as caught:
        import_export(conn, ACCOUNT, export)
    assert "invalid UTF-8" in caught.value.message
    assert caught.value.metadata["location"].startswith("chats.list[1]")


@pytest.mark.parametrize(
    ("patch", "reason"),
    [
        ({"date_unixtime": "9" * 30}, "'date_unixtime' is not a number"),
        ({"date_unixtime": "9" * 5000}, "'date_unixtime' is not a number"),
        ({"date_unixtime": "²"}, "'date_unixtime' is not a number"),
        ({"date_unixtime": str(10**15)}, "'date_unixtime' is out of range"),
        ({"date_unixtime": None, "date": "0001-01-01T00:00:00"}, "'date' is out of range"),
        ({"edited_unixtime": "9" * 25}, "'edited_unixtime' is not a number"),
        ({"from_id": "user" + "9" * 30}, "'from_id' is not a peer id"),
        ({"reply_to_peer_id": "channel" + "9" * 19}, "'reply_to_peer_id' is not a peer id"),
        ({"type": "service", "action": {"topic": 1}}, "'action' is not a string"),
    ],
    ids=repr,
)
def test_values_no_store_can_hold_skip_the_message_with_a_warning(
    tmp_path: Path, patch: dict[str, Any], reason: str
) -> None:
    export = write_export(
        tmp_path / "export", [("Group", "private_supergroup", FIRST_CHAT_ID, _messages(3))]
    )
    doc = json.loads((export / "result.json").read_bytes())
    doc["chats"]["list"][0]["messages"][1].update(patch)
    (export / "result.json").write_text(json.dumps(doc), encoding="utf-8")
    report = import_export(ingest_db(tmp_path / "ingest.db"), ACCOUNT, export)
    (skipped,) = [w for w in report.warnings if w["kind"] == "skipped"]
    assert (skipped["msg_id"], skipped["location"]) == (2, "chats.list[0].messages[1]")
    assert reason in skipped["message"]
    assert report.new == 2


@pytest.mark.parametrize("kind", [[], {}, 5], ids=repr)
def test_a_nameless_chat_whose_type_is_not_a_string_is_a_located_error(
    tmp_path: Path, kind: Any
) -> None:
    export = write_export(
        tmp_path / "export", [("x", "private_group", FIRST_CHAT_ID, _messages(2))]
    )
    doc = json.loads((export / "result.json").read_bytes())
    chat = doc["chats"]["list"][0]
    del chat["name"]
    chat["type"] = kind
    (export / "result.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(MalformedExport) as caught:
        import_export(ingest_db(tmp_path / "ingest.db"), ACCOUNT, export)
    assert caught.value.metadata["location"] == "chats.list[0]"


def test_a_chat_id_no_store_can_hold_is_a_located_error(tmp_path: Path) -> None:
    export = write_export(
        tmp_path / "export", [("Group", "private_supergroup", 2**62, _messages(2))]
    )
    with pytest.raises(MalformedExport) as caught:
        import_export(ingest_db(tmp_path / "ingest.db"), ACCOUNT, export)
    assert caught.value.metadata["location"] == "chats.list[0].id"


# --- the gateway's inputs ---


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[GatewayStubs, dict[str, str]]]:
    """A private stack holding the fixture export and its conversations; the gateway's stub."""
    base = tmp_path_factory.mktemp("hostile")
    env = stack_env(base / "home")
    shutil.copytree(ACCOUNT_EXPORT, base / "export")
    channel = grpc.insecure_channel(
        env["CHATSEEK_GATEWAY_ADDR"],
        options=[("grpc.max_send_message_length", 2 * MAX_MESSAGE_BYTES)],
    )
    try:
        cli(env, "import", str(base / "export"))
        cli(env, "conversations", "build", "--all")
        yield GatewayStubs.over(channel), env
    finally:
        channel.close()
        cli(env, "stack", "down", check=False)


def _rpc(stubs: GatewayStubs, name: str) -> Any:
    """The stub method of the gateway RPC ``name``, on whichever gateway service serves it."""
    services = (stubs.search, stubs.conversations, stubs.archive, stubs.ops)
    (method,) = [getattr(s, name) for s in services if hasattr(s, name)]
    return method


def _refusal(method: Any, request: Any) -> Any:
    """The decoded error of a call that must fail; a list is sent as a request stream."""
    sent = iter(request) if isinstance(request, list) else request
    try:
        response = method(sent, timeout=RPC_TIMEOUT_S)
        if not hasattr(response, "ListFields"):
            list(response)
    except grpc.RpcError as err:
        return decode_error(err)
    raise AssertionError(f"{type(request).__name__} was accepted")


def _messages_request(**fields: Any) -> pb.SearchMessagesRequest:
    return pb.SearchMessagesRequest(**{"query": "flat", "limit": 5, **fields})


LOCATOR = f"tg:default/{SUPERGROUP}/100"
DEEP_JSON = "[" * 100_000 + "]" * 100_000


# A list, not an iterator: a stream that every run of the test can send again.
UPLOAD_LONG_NAME = [
    pb.ImportRequest(start=pb.ImportStart(json_name="result.json")),
    pb.ImportRequest(chunk=pb.FileChunk(path="n" * 5000, data=b"{}", last=True)),
]
UPLOAD_ESCAPING = [
    pb.ImportRequest(start=pb.ImportStart(json_name="result.json")),
    pb.ImportRequest(chunk=pb.FileChunk(path="media/../../x", data=b"{}", last=True)),
]
# Numbers the enums do not define: a client built against a newer proto.
UNDEFINED_MODE = common_pb2.SearchMode.ValueType(99)
UNDEFINED_SOURCE = common_pb2.Source.ValueType(99)
CASES: list[tuple[str, str, Any, str, str]] = [
    ("Search", "k below 1", pb.SearchRequest(query="flat", k=-1), "INVALID_ARGUMENT", "k"),
    ("Search", "k above 100", pb.SearchRequest(query="flat", k=5000), "INVALID_ARGUMENT", "k"),
    (
        "Search",
        "unknown mode",
        pb.SearchRequest(query="flat", mode=UNDEFINED_MODE),
        "INVALID_ARGUMENT",
        "mode",
    ),
    (
        "Search",
        "unknown kind",
        pb.SearchRequest(query="flat", kinds=["poem"]),
        "INVALID_VALUE",
        "kinds",
    ),
    (
        "Search",
        "unknown source",
        pb.SearchRequest(query="flat", source=UNDEFINED_SOURCE),
        "INVALID_ARGUMENT",
        "source",
    ),
    (
        "Search",
        "bad date",
        pb.SearchRequest(query="flat", since="someday"),
        "INVALID_VALUE",
        "since",
    ),
    (
        "Search",
        "over-long query",
        pb.SearchRequest(query="a" * OVER_QUERY_BUDGET),
        "INVALID_ARGUMENT",
        "query",
    ),
    ("SearchMessages", "limit above 1000", _messages_request(limit=5000), "INVALID_VALUE", "limit"),
    ("SearchMessages", "negative limit", _messages_request(limit=-1), "INVALID_VALUE", "limit"),
    (
        "SearchMessages",
        "context above 20",
        _messages_request(context=99),
        "INVALID_VALUE",
        "context",
    ),
    (
        "SearchMessages",
        "unknown source",
        _messages_request(source=UNDEFINED_SOURCE),
        "INVALID_ARGUMENT",
        "source",
    ),
    (
        "SearchMessages",
        "unknown timezone",
        _messages_request(timezone="Mars/Olympus"),
        "INVALID_VALUE",
        "timezone",
    ),
    (
        "SearchMessages",
        "forged page token",
        _messages_request(page_token="AAAA"),
        "INVALID_VALUE",
        "page_token",
    ),
    (
        "SearchMessages",
        "text and tree",
        _messages_request(tree_json="{}"),
        "INVALID_ARGUMENT",
        "query",
    ),
    (
        "SearchMessages",
        "tree not JSON",
        _messages_request(query="", tree_json="{"),
        "INVALID_ARGUMENT",
        "tree_json",
    ),
    (
        "MessageStats",
        "unknown grouping",
        pb.MessageStatsRequest(search=_messages_request(), by="week"),
        "INVALID_VALUE",
        "by",
    ),
    (
        "SearchConversations",
        "k above 50",
        pb.SearchConversationsRequest(question="flat", k=5000),
        "INVALID_ARGUMENT",
        "k",
    ),
    (
        "SearchConversations",
        "over-long question",
        pb.SearchConversationsRequest(question="a" * OVER_QUERY_BUDGET),
        "INVALID_ARGUMENT",
        "question",
    ),
    (
        "Context",
        "negative before",
        pb.ContextRequest(chat=SUPERGROUP, msg_id=100, before=-1),
        "INVALID_ARGUMENT",
        "before",
    ),
    (
        "Context",
        "after above 200",
        pb.ContextRequest(chat=SUPERGROUP, msg_id=100, after=10**6),
        "INVALID_ARGUMENT",
        "after",
    ),
    ("Thread", "no chat", pb.ThreadRequest(chat="", msg_id=100), "INVALID_ARGUMENT", "chat"),
    (
        "Evidence",
        "101 locators",
        pb.EvidenceRequest(locators=[LOCATOR] * 101),
        "INVALID_ARGUMENT",
        "locators",
    ),
    ("Evidence", "no locators", pb.EvidenceRequest(), "INVALID_ARGUMENT", "locators"),
    (
        "Evidence",
        "not a locator",
        pb.EvidenceRequest(locators=["tg:/x/1"]),
        "INVALID_VALUE",
        "locator",
    ),
    (
        "Evidence",
        "negative max_chars",
        pb.EvidenceRequest(locators=[LOCATOR], max_chars=-5),
        "INVALID_ARGUMENT",
        "max_chars",
    ),
    (
        "ListConversations",
        "limit above 1000",
        pb.ListConversationsRequest(chat=SUPERGROUP, limit=5000),
        "INVALID_VALUE",
        "limit",
    ),
    (
        "ListConversations",
        "negative limit",
        pb.ListConversationsRequest(chat=SUPERGROUP, limit=-1),
        "INVALID_VALUE",
        "limit",
    ),
    (
        "LinkBatch",
        "unknown action",
        pb.LinkBatchRequest(chat=SUPERGROUP, action="merge"),
        "INVALID_ARGUMENT",
        "action",
    ),
    (
        "LinkBatch",
        "size above 200",
        pb.LinkBatchRequest(chat=SUPERGROUP, action="get", size=10**5),
        "INVALID_VALUE",
        "size",
    ),
    (
        "LinkBatch",
        "negative size",
        pb.LinkBatchRequest(chat=SUPERGROUP, action="get", size=-3),
        "INVALID_VALUE",
        "size",
    ),
    (
        "LinkBatch",
        "answer not JSON",
        pb.LinkBatchRequest(chat=SUPERGROUP, action="answer", answer_json="[[["),
        "INVALID_VALUE",
        "answer_json",
    ),
    ("Sources", "unknown action", pb.SourcesRequest(action="wipe"), "INVALID_ARGUMENT", "action"),
    ("Tags", "unknown action", pb.TagsRequest(action="wipe"), "INVALID_ARGUMENT", "action"),
    (
        "Tags",
        "a 10 000-character tag",
        pb.TagsRequest(action="add", tag="x" * 10_000, chat=SUPERGROUP),
        "INVALID_VALUE",
        "tag",
    ),
    (
        "Reindex",
        "unknown target",
        pb.ReindexRequest(target="everything"),
        "INVALID_ARGUMENT",
        "target",
    ),
    ("Models", "unknown action", pb.ModelsRequest(action="delete"), "INVALID_ARGUMENT", "action"),
    (
        "SearchMessages",
        "tree nested past the JSON parser",
        _messages_request(query="", tree_json=DEEP_JSON),
        "INVALID_ARGUMENT",
        "tree_json",
    ),
    (
        "ParseQuery",
        "tree nested past the JSON parser",
        pb.ParseQueryRequest(tree_json=DEEP_JSON),
        "INVALID_ARGUMENT",
        "tree_json",
    ),
    (
        "LinkBatch",
        "answer nested past the JSON parser",
        pb.LinkBatchRequest(chat=SUPERGROUP, action="answer", answer_json=DEEP_JSON),
        "INVALID_VALUE",
        "answer_json",
    ),
    (
        "Tags",
        "a sender id of 5000 digits",
        pb.TagsRequest(action="add", tag="ok", sender="9" * 5000),
        "INVALID_ARGUMENT",
        "sender",
    ),
    (
        "Tags",
        "a sender id in superscript digits",
        pb.TagsRequest(action="add", tag="ok", sender="²"),
        "INVALID_ARGUMENT",
        "sender",
    ),
    (
        "Tags",
        "a message id past 64 bits",
        pb.TagsRequest(action="add", tag="ok", message=f"{SUPERGROUP}/{'9' * 30}"),
        "INVALID_ARGUMENT",
        "message",
    ),
    (
        "Import",
        "a file name longer than the file system allows",
        UPLOAD_LONG_NAME,
        "INVALID_ARGUMENT",
        "chunk.path",
    ),
    ("Import", "an upload path climbing out", UPLOAD_ESCAPING, "INVALID_ARGUMENT", "chunk.path"),
]


@pytest.mark.parametrize(
    ("method", "request_", "reason", "field"),
    [pytest.param(m, r, reason, f, id=f"{m}: {why}") for m, why, r, reason, f in CASES],
)
def test_bad_values_are_refused_with_invalid_argument_naming_the_field(
    gateway: tuple[GatewayStubs, dict[str, str]],
    method: str,
    request_: Any,
    reason: str,
    field: str,
) -> None:
    error = _refusal(_rpc(gateway[0], method), request_)
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert (error.reason, error.metadata.get("field")) == (reason, field)


def test_a_backup_into_a_directory_that_cannot_be_made_names_the_directory(
    gateway: tuple[GatewayStubs, dict[str, str]], tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    error = _refusal(gateway[0].ops.Backup, pb.BackupRequest(directory=str(blocker / "backup")))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.metadata["field"] == "directory"


def test_a_strict_query_over_its_byte_budget_names_the_budget(
    gateway: tuple[GatewayStubs, dict[str, str]],
) -> None:
    for method, request in (
        ("SearchMessages", _messages_request(query="a " * OVER_QUERY_BUDGET)),
        ("ParseQuery", pb.ParseQueryRequest(query="a " * OVER_QUERY_BUDGET)),
    ):
        error = _refusal(_rpc(gateway[0], method), request)
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT
        assert (error.reason, error.metadata["budget"]) == ("QUERY_LIMIT", "query_bytes")


def test_an_error_echoing_a_huge_input_still_arrives_whole(
    gateway: tuple[GatewayStubs, dict[str, str]],
) -> None:
    error = _refusal(gateway[0].search.Thread, pb.ThreadRequest(chat="ж" * 20_000, msg_id=1))
    assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "CHAT_NOT_FOUND")
    assert len(error.message) < 20_000


def test_a_message_over_the_server_limit_is_resource_exhausted(
    gateway: tuple[GatewayStubs, dict[str, str]],
) -> None:
    request = pb.SearchRequest(query="a" * (MAX_MESSAGE_BYTES + 1024), k=5)
    error = _refusal(gateway[0].search.Search, request)
    assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_negative_message_id_is_looked_up_like_any_other(
    gateway: tuple[GatewayStubs, dict[str, str]],
) -> None:
    # Real exports hold negative ids (service and local messages), so they are not refused.
    error = _refusal(gateway[0].search.Thread, pb.ThreadRequest(chat=SUPERGROUP, msg_id=-5))
    assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "MESSAGE_NOT_FOUND")


@pytest.mark.parametrize(
    ("args", "field"),
    [
        pytest.param(("search", "-k", "0", "--json", "--", "flat"), "k", id="search -k 0"),
        pytest.param(
            ("messages", "search", "--limit", "0", "--json", "--", "flat"),
            "limit",
            id="messages search --limit 0",
        ),
        pytest.param(
            ("messages", "search", "--limit", "5000", "--json", "--", "flat"),
            "limit",
            id="messages search --limit 5000",
        ),
        pytest.param(
            ("context", "--before", "-1", "--json", "--", SUPERGROUP, "100"),
            "before",
            id="context --before -1",
        ),
    ],
)
def test_the_cli_refuses_a_count_out_of_range_with_the_invalid_argument_exit(
    gateway: tuple[GatewayStubs, dict[str, str]], args: tuple[str, ...], field: str
) -> None:
    proc = cli(gateway[1], *args, check=False)
    assert proc.returncode == EXIT_CODES["INVALID_ARGUMENT"]
    assert json.loads(proc.stdout)["details"]["field"] == field
