"""The edge's JSON: typed results print exactly the documents main printed, and one vocabulary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message

from chatseek.common.v1 import common_pb2
from chatseek.embed.v1 import embed_service_pb2 as embed_pb
from chatseek.gateway.v1 import gateway_service_pb2 as gateway_pb
from chatseek_core.errors import InvalidArgument
from chatseek_core.wire_json import from_json, mode_word, parse_mode, parse_source, to_json
from tests.wire_helpers import as_typed_prints

WIRE = Path(__file__).resolve().parents[3] / "tests" / "wire"
RESULTS: dict[str, type[Message]] = {
    "conversations_search": common_pb2.ConversationsResult,
    "search": common_pb2.SearchResult,
    "thread": common_pb2.ThreadResult,
    "context": common_pb2.ContextResult,
    "evidence": common_pb2.EvidenceResult,
    "messages_search": common_pb2.MessagesResult,
    "conversations_list": common_pb2.ConversationList,
    "conversations_show": common_pb2.ConversationView,
    "message_links": common_pb2.MessageLinksResult,
    "status": gateway_pb.StatusResult,
    "embed_status": common_pb2.EmbedStatusResult,
    "backup": gateway_pb.BackupResult,
    "verify": common_pb2.VerifyReport,
    "models_list": embed_pb.KnownModelsResult,
    "models_verify": embed_pb.VerifyModelsResult,
    "embed": common_pb2.EmbedReport,
    "reindex_lexical": common_pb2.WordIndexReport,
    "reindex_vector": common_pb2.EmbedReport,
    "messages_stats": common_pb2.StatsResult,
    "import": common_pb2.ImportReport,
    "extract": common_pb2.ExtractReport,
    "sync": common_pb2.SyncReport,
    "prune_deleted": common_pb2.PruneDeletedReport,
    "dialogs": common_pb2.DialogsResult,
    "sources_ls": common_pb2.ListSourcesResult,
    "sources_add": common_pb2.AddSourceResult,
    "sources_rm": common_pb2.RemoveSourceResult,
    "sources_prune_dry_run": common_pb2.PruneSourcesPreview,
    "sources": common_pb2.ListSourcesResult,
    "tags_ls": common_pb2.ListTagsResult,
    "tags_add": common_pb2.TagAdded,
    "tags_rm": common_pb2.TagRemoved,
    "conversations_build": common_pb2.ConversationBuildReport,
    "conversations_links": gateway_pb.ChatLinksResult,
    "link_batch": gateway_pb.LinkBatchResult,
    "messages_parse": common_pb2.QueryTree,
}
# Pinned before their RPCs were typed; read back once they are.
NOT_TYPED_YET: tuple[str, ...] = ()
MCP_ONLY = ("synced",)
# A value of the right type for each masked key, to read the pinned copy back with.
VOLATILE_SAMPLES: dict[str, Any] = {
    "took_ms": 1.5,
    "index_age_min": 1.5,
    "units_per_s": 1.5,
    "eta_s": 1.5,
    "last_write_s_ago": 1.5,
    "since_start": {"embedded": 3, "cached": 2, "skipped": 1},
    "checked_at": 1700000000,
    "last_sync_at": 1700000000,
    "directory": "/backup",
    "bytes": 4096,
    "cached": True,
    "ms": 12,
    "unit_id": 7,
    "unit_ids": [7],
}


def _links_as_typed(links: dict[str, Any]) -> dict[str, Any]:
    """``conversations links`` prints an object the CLI builds from the typed list, by id."""
    ordered = sorted(links.items(), key=lambda item: int(item[0]))
    return {"links": [{"msg_id": int(m), "parent_id": p} for m, p in ordered]}


# Documents the edge builds from a typed result, as that result's JSON.
EDGE_BUILT = {"conversations_links": _links_as_typed}


def _unmask(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: VOLATILE_SAMPLES[k] if v == "<volatile>" and k in VOLATILE_SAMPLES else _unmask(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_unmask(v) for v in value]
    return value


def _pinned(path: Path) -> tuple[dict[str, Any], type[Message]]:
    doc = as_typed_prints(json.loads(path.read_text(encoding="utf-8")))
    for key in MCP_ONLY:
        doc.pop(key, None)
    if doc.get("cached") == "<volatile>":
        doc["cached"] = 2  # an embed report's count (the models list's "cached" is a flag)
    doc = _unmask(doc)
    # Hybrid coverage counts unix seconds, strict coverage writes ISO dates.
    fetched: Any = "2023-11-14T22:13:20Z" if "items" in doc else 1700000000
    for chat in (doc.get("coverage") or {}).get("chats", []):
        if chat.get("last_fetched_at") == "<volatile>":
            chat["last_fetched_at"] = fetched
    name = path.stem.split("_", 1)[1]
    if name.startswith(NOT_TYPED_YET):
        pytest.skip(f"{name} is not typed yet")
    kind = next(k for k in RESULTS if name.startswith(k))
    if kind in EDGE_BUILT:
        doc = EDGE_BUILT[kind](doc)
    return doc, RESULTS[kind]


@pytest.mark.parametrize("path", sorted(WIRE.glob("*.json")), ids=lambda p: p.stem)
def test_every_pinned_document_survives_its_typed_message_unchanged(path: Path) -> None:
    doc, kind = _pinned(path)
    assert isinstance(doc, dict)
    back = to_json(from_json(doc, kind()))
    assert json.dumps(back, sort_keys=True) == json.dumps(doc, sort_keys=True)


def test_numbers_keep_their_type_and_int64_stays_a_number() -> None:
    hit = common_pb2.Hit(rank=1, score=1.0, unit_id=2**40, chat=common_pb2.Chat(id=-(10**12)))
    doc = to_json(hit)
    assert doc["score"] == 1.0 and isinstance(doc["score"], float)
    assert doc["unit_id"] == 2**40 and isinstance(doc["unit_id"], int)
    assert doc["chat"] == {"id": -(10**12), "username": None}


def test_unset_fields_are_null_or_absent_as_their_proto_says() -> None:
    doc = to_json(common_pb2.Hit())
    assert doc["fallback_link"] is None  # optional: null
    assert doc["kind"] is None  # unspecified enum: null
    assert doc["by"] == []  # repeated: always a list
    assert doc["chat"] is None  # message: null
    for absent in ("comments", "album", "cosine", "text"):
        assert absent not in doc
    assert to_json(common_pb2.Hit(cosine=0.0, text=""))["cosine"] == 0.0


def test_enums_are_their_lower_case_words() -> None:
    chat = common_pb2.Chat(type=common_pb2.CHAT_KIND_SUPERGROUP)
    assert to_json(chat)["type"] == "supergroup"
    assert from_json({"type": "forum"}, common_pb2.Chat()).type == common_pb2.CHAT_KIND_FORUM


@pytest.mark.parametrize(
    ("word", "source"),
    [
        ("", common_pb2.SOURCE_ACTIVE),
        ("active", common_pb2.SOURCE_ACTIVE),
        ("telegram", common_pb2.SOURCE_ACTIVE),
        ("all", common_pb2.SOURCE_ALL),
    ],
)
def test_every_word_for_a_source_names_one_enum_value(word: str, source: int) -> None:
    assert parse_source(word) == source


def test_a_bad_source_or_mode_is_invalid_argument_naming_its_field() -> None:
    with pytest.raises(InvalidArgument) as source:
        parse_source("everything")
    assert source.value.metadata["field"] == "source"
    with pytest.raises(InvalidArgument) as mode:
        parse_mode("fuzzy")
    assert mode.value.metadata["field"] == "mode"
    with pytest.raises(InvalidArgument):
        mode_word(99)


def test_modes_round_trip_through_their_words() -> None:
    for word in ("hybrid", "lexical", "dense"):
        assert mode_word(parse_mode(word)) == word
    assert mode_word(common_pb2.SEARCH_MODE_UNSPECIFIED) == "hybrid"


def test_a_oneof_is_one_key_holding_the_set_member_and_reads_back_by_its_shape() -> None:
    report = gateway_pb.ServiceReport(name="lexical", error="X")
    assert to_json(report)["details"] is None
    report.lexical.words_ready = False
    doc = to_json(report)
    assert list(doc) == [
        "name",
        "address",
        "health",
        "version",
        "schema_version",
        "feed_lag",
        "details",
        "error",
    ]
    assert doc["details"] == {"words_ready": False, "messages_indexed": None, "units_indexed": None}
    assert from_json(doc, gateway_pb.ServiceReport()).WhichOneof("details") == "lexical"
    failed = from_json({"details": {"message": "m", "hint": ""}}, gateway_pb.ServiceReport())
    assert failed.WhichOneof("details") == "failure"
    assert from_json({"details": {}}, gateway_pb.ServiceReport()).WhichOneof("details") == "none"
    with pytest.raises(KeyError):
        from_json({"details": {"nothing": 1}}, gateway_pb.ServiceReport())


def test_a_verify_report_names_what_was_repaired_only_after_a_repair() -> None:
    plain = {"ok": True, "findings": [], "checked_at": 1}
    assert to_json(from_json(plain, common_pb2.VerifyReport())) == plain
    repaired = {**plain, "repaired": ["lexical: rebuilt the word indexes"]}
    assert to_json(from_json(repaired, common_pb2.VerifyReport())) == repaired


def test_a_stats_bucket_key_is_text_a_sender_id_or_null() -> None:
    for key in ("tg:default/-1001", 5237714402, None):
        doc = {"key": key, "label": "x", "count": 1}
        assert to_json(from_json(doc, common_pb2.StatsBucket())) == doc


def test_a_tagged_oneof_names_its_member_beside_the_members_fields() -> None:
    answer = common_pb2.LinkAnswerReport(chat_id=-1001, stored=1)
    result = gateway_pb.LinkBatchResult(answer=answer)
    doc = to_json(result)
    assert doc == {"action": "answer", "chat_id": -1001, "stored": 1, "rejected": []}
    assert list(doc) == ["action", "chat_id", "stored", "rejected"]
    assert from_json(doc, gateway_pb.LinkBatchResult()) == result
    assert to_json(gateway_pb.LinkBatchResult()) == {"action": None}
    assert from_json({"action": None}, gateway_pb.LinkBatchResult()).WhichOneof("action") is None
    with pytest.raises(KeyError):
        from_json({"action": "merge"}, gateway_pb.LinkBatchResult())


def test_a_query_node_is_flat_with_its_type() -> None:
    node = common_pb2.QueryNode(span=[0, 4], term=common_pb2.QueryValue(field="text", value="rent"))
    doc = to_json(node)
    assert doc == {"type": "term", "field": "text", "value": "rent", "span": [0, 4]}
    assert list(doc) == ["type", "field", "value", "span"]
    assert from_json(doc, common_pb2.QueryNode()) == node
    every = common_pb2.QueryNode(span=[0, 3])
    every.match_all.SetInParent()
    assert to_json(every) == {"type": "match_all", "span": [0, 3]}
    assert from_json(to_json(every), common_pb2.QueryNode()).WhichOneof("type") == "match_all"
    with pytest.raises(KeyError):
        from_json({"type": "fuzzy", "span": [0, 1]}, common_pb2.QueryNode())


def test_a_query_tree_nests_bool_nodes_and_keeps_open_range_ends_null() -> None:
    tree = {
        "version": 1,
        "language": "lucene-v1",
        "root": {
            "type": "bool",
            "must": [
                {
                    "type": "range",
                    "field": "date",
                    "lower": "2023-01-01",
                    "upper": None,
                    "include_lower": True,
                    "include_upper": False,
                    "span": [0, 5],
                }
            ],
            "should": [],
            "must_not": [{"type": "enum", "field": "has", "value": "file", "span": [6, 9]}],
            "span": [0, 9],
        },
    }
    assert to_json(from_json(tree, common_pb2.QueryTree())) == tree


def test_a_rejected_answer_echoes_an_integer_or_a_string_msg_id() -> None:
    for msg_id in (7, "7", None):
        doc = {"index": 0, "msg_id": msg_id, "reason": "INVALID_ENTRY"}
        assert to_json(from_json(doc, common_pb2.LinkAnswerRejection())) == doc
