"""Sources and dialogs against the strict fake Telegram over a real, migrated ingest.db."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatseek_core import db, feed
from chatseek_core.errors import (
    AmbiguousName,
    ChatNotFound,
    FailedPrecondition,
    InvalidArgument,
    SyncRunning,
)
from chatseek_ingest import store
from chatseek_ingest.model import ExportChat
from chatseek_ingest.sources import (
    add_source,
    dialogs,
    list_sources,
    prune_sources,
    remove_source,
    resolve_target,
)
from chatseek_ingest.sync import default_lock_path, sync, sync_lock
from chatseek_testing.telegram import FakeTelegram, ingest_db

ACCOUNT = "me"


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[db.Connection]:
    connection = ingest_db(tmp_path / "data" / "ingest.db")
    yield connection
    connection.close()


@pytest.fixture
def tg() -> FakeTelegram:
    fake = FakeTelegram()
    fake.add_channel(100, "Madrid Expats", username="madrid_expats", megagroup=True)
    fake.add_channel(101, "Valencia Expats", megagroup=True)
    fake.add_channel(102, "Barcelona rentals", username="bcn_rent", megagroup=True)
    fake.add_user(11, "Marta", last_name="Gil", username="marta")
    fake.add_group(55, "Family")
    return fake


def import_chat(conn: db.Connection, chat_id: int, title: str) -> None:
    with db.transaction(conn):
        store.ensure_account(conn, ACCOUNT)
        store.ensure_source(conn, ACCOUNT, "import:archive", "import", "archive")
        store.upsert_chat(
            conn,
            ACCOUNT,
            ExportChat(chat_id, -chat_id, "supergroup", title, None, "private_supergroup"),
            source_id="import:archive",
            is_import=True,
        )


def chat_ids(conn: db.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT chat_id FROM chats ORDER BY chat_id")]


# --- resolution ---


@pytest.mark.parametrize(
    "target",
    [
        "-1000000000100",
        "@madrid_expats",
        "https://t.me/madrid_expats",
        "t.me/madrid_expats/123",
        "t.me/c/100/4567",
        "madrid expats",
        "Madrid",
        "madrd expat",
    ],
)
async def test_a_chat_resolves_from_id_username_links_and_titles(
    tg: FakeTelegram, target: str
) -> None:
    resolved = await resolve_target(tg, target)
    assert (resolved.kind, resolved.target) == ("chat", "-1000000000100")
    assert resolved.source_id == "chat:@madrid_expats"
    assert [c.record.title for c in resolved.chats] == ["Madrid Expats"]


async def test_a_chat_without_username_gets_an_id_source(tg: FakeTelegram) -> None:
    resolved = await resolve_target(tg, "Valencia")
    assert resolved.source_id == "chat:-1000000000101"
    assert resolved.chats[0].access_hash is not None


async def test_a_folder_resolves_by_name_with_its_chats(tg: FakeTelegram) -> None:
    tg.add_folder(7, "Spain", [tg.entity(-1000000000100), tg.entity(-1000000000102)])
    resolved = await resolve_target(tg, "folder:spain")
    assert (resolved.kind, resolved.source_id, resolved.title) == (
        "folder",
        "folder:Spain",
        "Spain",
    )
    assert sorted(c.record.chat_id for c in resolved.chats) == [-1000000000102, -1000000000100]


async def test_a_flag_folder_lists_every_chat_of_its_kind(tg: FakeTelegram) -> None:
    tg.add_folder(8, "Groups", groups=True, exclude=[tg.entity(-1000000000102)])
    resolved = await resolve_target(tg, "folder:Groups")
    assert sorted(c.record.chat_id for c in resolved.chats) == [
        -1000000000101,
        -1000000000100,
        -55,
    ]


async def test_a_title_several_chats_share_is_ambiguous_and_lists_candidates(
    tg: FakeTelegram,
) -> None:
    with pytest.raises(AmbiguousName) as caught:
        await resolve_target(tg, "expats")
    assert caught.value.reason == "AMBIGUOUS_NAME"
    assert sorted(caught.value.candidates) == [
        "Madrid Expats (@madrid_expats)",
        "Valencia Expats (-1000000000101)",
    ]


@pytest.mark.parametrize("target", ["@nobody_here", "-1000000009999", "zzzz qqqq", "folder:Nope"])
async def test_a_target_matching_nothing_is_chat_not_found(tg: FakeTelegram, target: str) -> None:
    with pytest.raises(ChatNotFound) as caught:
        await resolve_target(tg, target)
    assert caught.value.reason == "CHAT_NOT_FOUND"


@pytest.mark.parametrize("target", ["", "t.me/+AbCdEf", "t.me/joinchat/AbCdEf", "import:x"])
async def test_invite_links_imports_and_empty_targets_are_refused(
    tg: FakeTelegram, target: str
) -> None:
    with pytest.raises(InvalidArgument):
        await resolve_target(tg, target)


async def test_an_id_the_session_has_never_seen_resolves_through_the_dialogs(
    tg: FakeTelegram,
) -> None:
    assert tg.requested("iter_dialogs") == []
    resolved = await resolve_target(tg, "11")
    assert resolved.chats[0].record.type == "private"
    assert resolved.title == "Marta Gil"


# --- adding, listing ---


async def test_adding_a_source_stores_it_with_its_chats_and_access_hashes(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    added = await add_source(conn, tg, ACCOUNT, "@bcn_rent", since=1_700_000_000, comments=True)
    assert (added.source, added.kind, added.title) == (
        "chat:@bcn_rent",
        "chat",
        "Barcelona rentals",
    )
    row = conn.execute("SELECT target, since, comments FROM sources").fetchone()
    assert tuple(row) == ("-1000000000102", 1_700_000_000, 1)
    chat = conn.execute("SELECT source_id, access_hash, type FROM chats").fetchone()
    assert chat[0] == "chat:@bcn_rent" and chat[1] is not None and chat[2] == "supergroup"
    again = await add_source(conn, tg, ACCOUNT, "Barcelona rentals")
    assert again.source == "chat:@bcn_rent"
    assert conn.execute("SELECT since, comments FROM sources").fetchone()[1] == 0


async def test_adding_an_imported_chat_is_refused_by_name(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    import_chat(conn, -1000000000101, "Valencia Expats")
    with pytest.raises(FailedPrecondition) as caught:
        await add_source(conn, tg, ACCOUNT, "Valencia")
    assert caught.value.metadata["source_id"] == "import:archive"
    assert "import:archive" in caught.value.hint
    assert conn.execute("SELECT COUNT(*) FROM sources WHERE kind = 'chat'").fetchone()[0] == 0


async def test_a_folder_holding_an_imported_chat_leaves_it_to_its_import(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    tg.add_folder(7, "Spain", [tg.entity(-1000000000100), tg.entity(-1000000000101)])
    import_chat(conn, -1000000000101, "Valencia Expats")
    added = await add_source(conn, tg, ACCOUNT, "folder:Spain")
    assert added.skipped_imports == [-1000000000101]
    assert [c["id"] for c in added.chats] == [-1000000000100]
    owner = conn.execute("SELECT source_id FROM chats WHERE chat_id = -1000000000101").fetchone()
    assert owner[0] == "import:archive"


async def test_sources_are_listed_configured_first_with_their_chats(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    import_chat(conn, -1000000000777, "Old chat")
    await add_source(conn, tg, ACCOUNT, "@marta")
    listed = list_sources(conn, ACCOUNT)
    assert [s.source_id for s in listed] == ["chat:@marta", "import:archive"]
    marta = listed[0].to_dict()
    assert marta["chats"][0]["title"] == "Marta Gil"
    assert set(marta["chats"][0]) >= {
        "id",
        "title",
        "type",
        "username",
        "message_count",
        "last_sync_at",
        "unavailable",
    }


# --- removing ---


async def test_removing_a_source_deletes_its_chats_and_announces_every_message(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    chat = tg.entity(-1000000000102)
    for n in range(3):
        tg.send(chat, f"flat {n}")
    await add_source(conn, tg, ACCOUNT, "@bcn_rent")
    await add_source(conn, tg, ACCOUNT, "@marta")
    await sync(conn, tg, ACCOUNT)
    head = feed.head(conn)
    removed = remove_source(conn, ACCOUNT, "Barcelona")
    assert removed.source_id == "chat:@bcn_rent"
    assert removed.removed_chat_ids == [-1000000000102] and removed.messages_deleted == 3
    deletes = [(e.entity, e.op) for e in feed.read_after(conn, head, 100)]
    assert deletes == [(1, "delete"), (2, "delete"), (3, "delete")]
    assert chat_ids(conn) == [11]
    assert [r[0] for r in conn.execute("SELECT source_id FROM sources")] == ["chat:@marta"]


@pytest.mark.parametrize("target", ["chat:@marta", "@marta", "11", "marta gil", "Marta"])
async def test_a_source_is_removed_by_id_chat_or_title(
    conn: db.Connection, tg: FakeTelegram, target: str
) -> None:
    await add_source(conn, tg, ACCOUNT, "@marta")
    assert remove_source(conn, ACCOUNT, target).source_id == "chat:@marta"


async def test_an_imported_source_can_be_removed_deliberately(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    import_chat(conn, -1000000000777, "Old chat")
    removed = remove_source(conn, ACCOUNT, "import:archive")
    assert removed.removed_chat_ids == [-1000000000777]


async def test_a_chat_of_a_folder_cannot_be_removed_on_its_own(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    tg.add_folder(7, "Spain", [tg.entity(-1000000000100)])
    await add_source(conn, tg, ACCOUNT, "folder:Spain")
    with pytest.raises(FailedPrecondition) as caught:
        remove_source(conn, ACCOUNT, "@madrid_expats")
    assert caught.value.metadata["source_id"] == "folder:Spain"
    assert remove_source(conn, ACCOUNT, "Spain").removed_chat_ids == [-1000000000100]


async def test_a_discussion_group_is_removed_only_with_its_channel(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = tg.add_channel(300, "Daily", username="daily")
    group = tg.add_channel(301, "Daily chat", megagroup=True, dialog=False)
    tg.link_discussion(channel, group)
    post = tg.send(channel, "post")
    tg.comment(channel, post.id, "first!", sender=tg.entity(11))
    await add_source(conn, tg, ACCOUNT, "@daily", comments=True)
    await sync(conn, tg, ACCOUNT)
    with pytest.raises(FailedPrecondition):
        remove_source(conn, ACCOUNT, "-1000000000301")
    removed = remove_source(conn, ACCOUNT, "@daily")
    assert sorted(removed.removed_chat_ids) == [-1000000000301, -1000000000300]


async def test_removing_a_source_is_refused_while_a_sync_runs(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    await add_source(conn, tg, ACCOUNT, "@marta")
    with sync_lock(default_lock_path(conn)), pytest.raises(SyncRunning):
        remove_source(conn, ACCOUNT, "@marta")
    assert chat_ids(conn) == [11]


async def test_removing_an_unknown_source_lists_nothing_and_fails(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    await add_source(conn, tg, ACCOUNT, "@marta")
    with pytest.raises(ChatNotFound):
        remove_source(conn, ACCOUNT, "@nobody")


# --- pruning folders ---


async def spain(conn: db.Connection, tg: FakeTelegram) -> None:
    madrid, valencia = tg.entity(-1000000000100), tg.entity(-1000000000101)
    tg.add_folder(7, "Spain", [madrid, valencia, tg.entity(-1000000000102)])
    await add_source(conn, tg, ACCOUNT, "folder:Spain")
    tg.add_folder(7, "Spain", [madrid])


async def test_a_dry_run_prune_lists_what_a_folder_no_longer_holds_and_deletes_nothing(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    await spain(conn, tg)
    report = await prune_sources(conn, tg, ACCOUNT, dry_run=True)
    doc = report.to_dict()
    assert sorted(c["chat_id"] for c in doc["would_remove"]) == [-1000000000102, -1000000000101]
    assert doc["kept"] == []
    assert len(chat_ids(conn)) == 3


async def test_a_prune_deletes_them_but_keeps_a_chat_another_source_lists(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    await spain(conn, tg)
    await add_source(conn, tg, ACCOUNT, "@bcn_rent")
    report = await prune_sources(conn, tg, ACCOUNT, dry_run=False)
    assert [c["chat_id"] for c in report.removed] == [-1000000000101]
    assert report.kept == [
        {
            "chat_id": -1000000000102,
            "title": "Barcelona rentals",
            "source_id": "folder:Spain",
            "reason": "listed by chat:@bcn_rent",
        }
    ]
    assert chat_ids(conn) == [-1000000000102, -1000000000100]
    owner = conn.execute("SELECT source_id FROM chats WHERE chat_id = -1000000000102").fetchone()
    assert owner[0] == "chat:@bcn_rent"


async def test_a_prune_keeps_the_discussion_group_of_a_channel_that_stays(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    channel = tg.add_channel(300, "Daily", username="daily")
    group = tg.add_channel(301, "Daily chat", megagroup=True)
    tg.link_discussion(channel, group)
    tg.add_folder(9, "Reading", [channel, group])
    post = tg.send(channel, "post")
    tg.comment(channel, post.id, "first!", sender=tg.entity(11))
    await add_source(conn, tg, ACCOUNT, "folder:Reading", comments=True)
    await sync(conn, tg, ACCOUNT)
    tg.add_folder(9, "Reading", [channel])
    report = await prune_sources(conn, tg, ACCOUNT, dry_run=False)
    assert report.removed == []
    assert report.kept[0]["chat_id"] == -1000000000301
    assert report.kept[0]["reason"] == "discussion group of 'Daily'"
    assert -1000000000301 in chat_ids(conn)


async def test_a_prune_deletes_nothing_when_a_folder_fails_to_resolve(
    conn: db.Connection, tg: FakeTelegram
) -> None:
    await spain(conn, tg)
    tg.add_folder(8, "Work", [tg.entity(11)])
    await add_source(conn, tg, ACCOUNT, "folder:Work")
    tg.remove_folder(8)
    with pytest.raises(FailedPrecondition) as caught:
        await prune_sources(conn, tg, ACCOUNT, dry_run=False)
    assert caught.value.metadata["sources"] == "folder:Work"
    assert len(chat_ids(conn)) == 4


async def test_a_prune_never_offers_an_imported_chat(conn: db.Connection, tg: FakeTelegram) -> None:
    tg.add_folder(7, "Spain", [tg.entity(-1000000000100)])
    await add_source(conn, tg, ACCOUNT, "folder:Spain")
    import_chat(conn, -1000000000101, "Valencia Expats")
    with db.transaction(conn):
        conn.execute("UPDATE chats SET source_id = 'folder:Spain' WHERE is_import = 1")
    report = await prune_sources(conn, tg, ACCOUNT, dry_run=True)
    assert report.removed == [] and report.kept == []


# --- dialogs ---


async def test_dialogs_find_chats_and_folders_by_title_username_and_folder_name(
    tg: FakeTelegram,
) -> None:
    tg.add_folder(7, "Expat life", [tg.entity(-1000000000101)])
    matches = await dialogs(tg, "expat")
    found: dict[str, Any] = {m.title: m.to_dict() for m in matches}
    assert set(found) == {"Madrid Expats", "Valencia Expats", "Expat life"}
    assert found["Expat life"]["kind"] == "folder"
    assert found["Expat life"]["target"] == "folder:Expat life"
    assert found["Valencia Expats"]["folders"] == ["Expat life"]
    assert found["Valencia Expats"]["target"] == "-1000000000101"
    assert found["Madrid Expats"]["target"] == "@madrid_expats"
    assert all(0 < m.score <= 1 for m in matches)
    exact = await dialogs(tg, "@bcn_rent")
    assert exact[0].title == "Barcelona rentals" and exact[0].score == 1.0
    assert [m.title for m in await dialogs(tg, "", limit=2)] == [
        "Barcelona rentals",
        "Family",
    ]
