"""Deleting a message or a whole source removes it from every derived store.

A private stack imports two exports: ``main`` (a group whose messages fall into separate windows
and a reply thread, and a small chat) and ``twin`` (a chat whose text is identical to main's
small chat, so its units share their vector-cache entries). After units, word indexes, vectors
and conversations are built, two messages of the group are deleted through the ingest store (as
a sync that sees them gone and ``prune-deleted`` do), the stack settles and the group's
conversations are built again; then ``sources rm`` removes the whole ``main`` import. After each
step every store is read directly: units and their members, conversation builds, links and
chunks, the FTS tables and their bookkeeping, vectors and the vector cache; ``chatseek verify``
must pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chatseek_core import db
from chatseek_ingest import store
from tests.security_helpers import Msg, write_export
from tests.stack_helpers import cli, settle, stack_env

ACCOUNT = "default"
GROUP = -1_000_000_005_551
SMALL = -5552
TWIN = -5553
GONE_IDS = (4, 6)
GONE_WORDS = ("zephyrquartz", "quokkaphrase")
MAIN_WORDS = ("alphaword", "xylophoneword", "zephyrquartz")
SHARED_WORD = "gemstone"
GROUP_MESSAGES = [
    Msg(1, 0, "Ana", "alphaword talk one"),
    Msg(2, 1, "Ben", "alphaword talk two"),
    Msg(3, 2, "Ana", "alphaword talk three"),
    Msg(4, 180, "Ben", "the secret word is zephyrquartz"),
    Msg(5, 360, "Ana", "plans for friday xylophoneword"),
    Msg(6, 361, "Ben", "quokkaphrase sounds good", reply_to=5),
]
SHARED_MESSAGES = [
    Msg(1, 0, "Cleo", "twin line one gemstone"),
    Msg(2, 1, "Dan", "twin line two gemstone"),
]


@dataclass
class Stage:
    """Everything the derived stores hold after one step."""

    units: list[dict[str, Any]] = field(default_factory=list)
    members: list[tuple[int, int, int]] = field(default_factory=list)
    builds: list[tuple[int, int, str]] = field(default_factory=list)
    current: list[tuple[int, int]] = field(default_factory=list)
    links: list[tuple[int, int, int | None]] = field(default_factory=list)
    conversations: list[tuple[int, int, int, int]] = field(default_factory=list)
    fts: dict[str, set[int]] = field(default_factory=dict)
    vocab: set[str] = field(default_factory=set)
    indexed_messages: list[tuple[int, int, int]] = field(default_factory=list)
    indexed_units: list[tuple[int, int]] = field(default_factory=list)
    embedded: dict[int, str] = field(default_factory=dict)
    vectors: dict[str, set[int]] = field(default_factory=dict)
    cache: set[str] = field(default_factory=set)
    verify: dict[str, Any] = field(default_factory=dict)

    def unit_ids(self, chat_id: int | None = None) -> set[int]:
        return {u["unit_id"] for u in self.units if chat_id in (None, u["chat_id"])}

    def hashes(self, chat_id: int) -> set[str]:
        return {u["content_hash"] for u in self.units if u["chat_id"] == chat_id}


def _rows(data: Path, owner: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = db.connect(data / f"{owner}.db", readonly=True, vec=owner == "vector")
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def _stage(env: dict[str, str]) -> Stage:
    data = Path(env["CHATSEEK_HOME"]) / "data"
    stage = Stage()
    columns = ("unit_id", "chat_id", "kind", "msg_ids", "text", "content_hash")
    stage.units = [
        dict(zip(columns, r, strict=True))
        for r in _rows(data, "unitize", f"SELECT {', '.join(columns)} FROM units")
    ]
    stage.members = _rows(data, "unitize", "SELECT unit_id, chat_id, msg_id FROM unit_members")
    stage.builds = _rows(
        data, "unitize", "SELECT build_id, chat_id, state FROM conversation_builds"
    )
    stage.current = _rows(data, "unitize", "SELECT chat_id, build_id FROM current_builds")
    stage.links = _rows(data, "unitize", "SELECT build_id, msg_id, parent_id FROM links")
    stage.conversations = _rows(
        data,
        "unitize",
        "SELECT build_id, conversation_id, first_msg_id, last_msg_id FROM conversations",
    )
    words = " OR ".join((*GONE_WORDS, *MAIN_WORDS, SHARED_WORD))
    for table in ("msg_fts", "unit_fts", "chunk_fts"):
        found = _rows(data, "lexical", f"SELECT rowid FROM {table} WHERE {table} MATCH ?", (words,))
        stage.fts[table] = {int(r[0]) for r in found}
    stage.vocab = {str(r[0]) for r in _rows(data, "lexical", "SELECT term FROM msg_vocab")}
    stage.indexed_messages = _rows(
        data, "lexical", "SELECT mid, chat_id, msg_id FROM indexed_messages"
    )
    stage.indexed_units = _rows(data, "lexical", "SELECT unit_id, chat_id FROM indexed_units")
    stage.embedded = {
        int(u): str(h)
        for u, h in _rows(data, "vector", "SELECT unit_id, content_hash FROM embedded_units")
    }
    tables = _rows(data, "vector", "SELECT name FROM sqlite_master WHERE sql LIKE '%USING vec0%'")
    for (name,) in tables:
        stage.vectors[name] = {
            int(r[0]) for r in _rows(data, "vector", f"SELECT unit_id FROM {name}")
        }
    stage.cache = {
        str(r[0]) for r in _rows(data, "vector", "SELECT content_hash FROM vector_cache")
    }
    stage.verify = json.loads(cli(env, "verify", "--json", check=False).stdout)
    return stage


def _mid_of(data: Path, chat_id: int, msg_id: int) -> int:
    rows = _rows(
        data,
        "ingest",
        "SELECT mid FROM messages WHERE account = ? AND chat_id = ? AND msg_id = ?",
        (ACCOUNT, chat_id, msg_id),
    )
    return int(rows[0][0])


@dataclass
class Story:
    """The stages of the deletions, and what was true before them."""

    before: Stage
    deleted: Stage
    removed: Stage
    gone_mids: set[int]
    gone_units: set[int]
    gone_hashes: set[str]


def _delete_messages(env: dict[str, str], chat_id: int, msg_ids: tuple[int, ...]) -> int:
    """Delete messages as a sync or ``prune-deleted`` does: through the ingest store."""
    conn = db.connect(Path(env["CHATSEEK_HOME"]) / "data" / "ingest.db")
    try:
        with db.transaction(conn):
            return store.delete_messages(conn, ACCOUNT, chat_id, msg_ids)
    finally:
        conn.close()


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    """Import, build, delete two messages, rebuild, remove a source; a stage after each."""
    work = tmp_path_factory.mktemp("deletion")
    env = stack_env(work / "home")
    main = write_export(
        work / "main",
        [
            ("Deletion Group", "private_supergroup", 5551, GROUP_MESSAGES),
            ("Small Twin", "private_group", 5552, SHARED_MESSAGES),
        ],
    )
    twin = write_export(work / "twin", [("Other Twin", "private_group", 5553, SHARED_MESSAGES)])
    try:
        cli(env, "import", str(main))
        cli(env, "import", str(twin))
        settle(env)
        cli(env, "conversations", "build", "--all")
        settle(env)
        before = _stage(env)
        data = Path(env["CHATSEEK_HOME"]) / "data"
        gone_mids = {_mid_of(data, GROUP, m) for m in GONE_IDS}
        held = {m[0] for m in before.members if m[1] == GROUP and m[2] in GONE_IDS}
        gone_hashes = {u["content_hash"] for u in before.units if u["unit_id"] in held}

        assert _delete_messages(env, GROUP, GONE_IDS) == len(GONE_IDS)
        settle(env)
        cli(env, "conversations", "build", "--chat", "Deletion Group")
        settle(env)
        deleted = _stage(env)

        cli(env, "sources", "rm", "import:main")
        settle(env)
        removed = _stage(env)
        yield Story(before, deleted, removed, gone_mids, held, gone_hashes)
    finally:
        cli(env, "stack", "down", check=False)


def test_the_stores_held_the_messages_before_the_deletion(story: Story) -> None:
    before = story.before
    assert {(GROUP, m) for m in GONE_IDS} <= {(c, m) for _, c, m in before.members}
    assert any(u["kind"] == "conversation" and u["chat_id"] == GROUP for u in before.units)
    assert {GROUP, SMALL, TWIN} <= {c for c, _ in before.current}
    assert story.gone_mids <= before.fts["msg_fts"]
    assert set(GONE_WORDS) <= before.vocab
    assert story.gone_units <= set(before.embedded)
    assert story.gone_hashes <= before.cache
    assert before.verify["ok"], before.verify


# --- a deleted message ---


def test_a_deleted_message_leaves_no_unit_and_no_unit_member(story: Story) -> None:
    stage = story.deleted
    assert not [m for m in stage.members if m[1] == GROUP and m[2] in GONE_IDS]
    for unit in stage.units:
        assert not any(word in unit["text"] for word in GONE_WORDS), unit
        if unit["chat_id"] == GROUP:
            assert not set(GONE_IDS) & set(json.loads(unit["msg_ids"])), unit


def test_a_deleted_message_leaves_no_link_or_conversation_after_the_next_build(
    story: Story,
) -> None:
    stage = story.deleted
    current = dict(stage.current)[GROUP]
    assert [b for b in stage.builds if b[1] == GROUP and b[2] == "complete"] == [
        (current, GROUP, "complete")
    ]
    group_builds = {b[0] for b in stage.builds if b[1] == GROUP}
    links = [link for link in stage.links if link[0] in group_builds]
    assert links and all(link[0] == current for link in links)
    assert not [link for link in links if link[1] in GONE_IDS or link[2] in GONE_IDS]
    spans = [c for c in stage.conversations if c[0] in group_builds]
    assert spans and not [c for c in spans if c[2] in GONE_IDS or c[3] in GONE_IDS]


def test_a_deleted_message_leaves_the_word_indexes(story: Story) -> None:
    stage = story.deleted
    assert not story.gone_mids & stage.fts["msg_fts"]
    assert not story.gone_mids & {mid for mid, _, _ in stage.indexed_messages}
    assert not [m for m in stage.indexed_messages if m[1] == GROUP and m[2] in GONE_IDS]
    units = stage.unit_ids()
    for table in ("unit_fts", "chunk_fts"):
        assert stage.fts[table] <= units, table
        texts = [u["text"] for u in stage.units if u["unit_id"] in stage.fts[table]]
        assert not [t for t in texts if any(word in t for word in GONE_WORDS)], table
    assert {unit_id for unit_id, _ in stage.indexed_units} == units
    assert not set(GONE_WORDS) & stage.vocab


def test_a_deleted_message_leaves_no_vector_and_no_cache_entry_only_it_used(
    story: Story,
) -> None:
    stage = story.deleted
    units = stage.unit_ids()
    assert set(stage.embedded) == units
    assert stage.vectors and all(ids == units for ids in stage.vectors.values())
    assert stage.cache == set(stage.embedded.values())
    assert not story.gone_hashes & stage.cache


def test_verify_passes_after_the_deletion(story: Story) -> None:
    assert story.deleted.verify["ok"], story.deleted.verify


# --- a removed source ---


def test_a_removed_source_leaves_no_unit_member_or_conversation_of_its_chats(
    story: Story,
) -> None:
    stage = story.removed
    assert {u["chat_id"] for u in stage.units} == {TWIN}
    assert {chat for _, chat, _ in stage.members} == {TWIN}
    assert {chat for _, chat, _ in stage.builds} == {TWIN}
    assert [chat for chat, _ in stage.current] == [TWIN]
    builds = {build for build, _, _ in stage.builds}
    assert {link[0] for link in stage.links} <= builds
    assert {c[0] for c in stage.conversations} <= builds


def test_a_removed_source_leaves_the_word_indexes(story: Story) -> None:
    stage = story.removed
    twin_units = stage.unit_ids(TWIN)
    assert {chat for _, chat, _ in stage.indexed_messages} == {TWIN}
    assert {chat for _, chat in stage.indexed_units} == {TWIN}
    assert stage.fts["unit_fts"] | stage.fts["chunk_fts"] <= twin_units
    assert stage.fts["msg_fts"] == {mid for mid, _, _ in stage.indexed_messages}
    assert not set(MAIN_WORDS) & stage.vocab
    assert SHARED_WORD in stage.vocab


def test_a_removed_source_leaves_vectors_and_cache_entries_only_the_other_chat_shares(
    story: Story,
) -> None:
    before, stage = story.before, story.removed
    twin_units = stage.unit_ids(TWIN)
    assert set(stage.embedded) == twin_units
    assert all(ids == twin_units for ids in stage.vectors.values())
    assert stage.cache == set(stage.embedded.values())
    shared = before.hashes(SMALL) & before.hashes(TWIN)
    assert shared and shared <= stage.cache
    only_main = (before.hashes(GROUP) | before.hashes(SMALL)) - shared
    assert only_main and not only_main & stage.cache


def test_verify_passes_after_the_removal(story: Story) -> None:
    assert story.removed.verify["ok"], story.removed.verify
