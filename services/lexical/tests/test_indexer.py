"""The lexical indexer: feeds in, FTS rows out, crash safety, rebuild, readiness."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlean
from helpers_store import ACCOUNT, Stores, make_stores, open_lexical
from hypothesis import given, settings
from hypothesis import strategies as st

from chatseek_core import db
from chatseek_core.feed import cursor
from chatseek_core.render import indexed_text
from chatseek_core.stopwords import query_terms
from chatseek_core.text import analyse, words
from chatseek_lexical.indexer import (
    FEED_INGEST,
    FEED_UNITIZE,
    IndexCounts,
    apply_feeds,
    drop_chat,
    index_columns,
    rebuild,
)
from chatseek_lexical.ranked import match_expression
from chatseek_lexical.readiness import words_ready, words_status

CHAT = -1001
OTHER_CHAT = -1002
FTS_TABLES = ("msg_fts", "unit_fts", "chunk_fts")


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    s = make_stores(tmp_path)
    yield s
    s.close()


def hits(lex: db.Connection, query: str, table: str = "msg_fts") -> set[int]:
    """Rowids of ``table`` holding every word of ``query`` (raw or stemmed)."""
    expr = match_expression(query_terms(query), "AND")
    rows = lex.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", (expr,)).fetchall()
    return {int(r[0]) for r in rows}


def index_snapshot(lex: db.Connection) -> dict[str, list[tuple[object, ...]]]:
    """Every indexed token occurrence of the three FTS tables, plus bookkeeping and cursors."""
    out: dict[str, list[tuple[object, ...]]] = {}
    for table in FTS_TABLES:
        lex.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_inst"
            f" USING fts5vocab(main, {table}, instance)"
        )
        out[table] = [
            tuple(r) for r in lex.execute(f"SELECT * FROM temp.{table}_inst ORDER BY 1, 2, 3, 4")
        ]
    for table in ("indexed_messages", "indexed_units"):
        out[table] = [tuple(r) for r in lex.execute(f"SELECT * FROM {table} ORDER BY 1")]
    out["cursors"] = [(cursor(lex, FEED_INGEST), cursor(lex, FEED_UNITIZE))]
    return out


def fts_blocks(lex: db.Connection) -> list[tuple[object, ...]]:
    """The raw storage of msg_fts: changes whenever anything is written to it."""
    return [tuple(r) for r in lex.execute("SELECT * FROM msg_fts_data ORDER BY id")]


# --- messages ---


def test_new_messages_become_findable_after_apply_feeds(stores: Stores) -> None:
    mid = stores.ingest.put_message(CHAT, 1, "Where can I rent a flat?")
    assert hits(stores.lex, "rent flat") == set()

    assert apply_feeds(stores.lex) == 1

    assert hits(stores.lex, "rent flat") == {mid}
    assert cursor(stores.lex, FEED_INGEST) == 1


def test_an_edit_replaces_the_old_words(stores: Stores) -> None:
    mid = stores.ingest.put_message(CHAT, 1, "selling a bicycle")
    apply_feeds(stores.lex)
    stores.ingest.put_message(CHAT, 1, "selling a guitar")
    apply_feeds(stores.lex)

    assert hits(stores.lex, "guitar") == {mid}
    assert hits(stores.lex, "bicycle") == set()


def test_a_deleted_message_disappears_from_the_index(stores: Stores) -> None:
    stores.ingest.put_message(CHAT, 1, "secret plans")
    keep = stores.ingest.put_message(CHAT, 2, "public plans")
    apply_feeds(stores.lex)
    stores.ingest.delete_message(CHAT, 1)
    apply_feeds(stores.lex)

    assert hits(stores.lex, "plans") == {keep}
    assert stores.lex.execute("SELECT count(*) FROM indexed_messages").fetchone()[0] == 1


def test_file_names_and_extracted_media_text_are_indexed(stores: Stores) -> None:
    mid = stores.ingest.put_message(CHAT, 1, "see attached", file_name="invoice_march.pdf")
    apply_feeds(stores.lex)
    assert hits(stores.lex, "invoice_march") == {mid}
    assert hits(stores.lex, "pdf") == {mid}

    stores.ingest.set_extracted_text(CHAT, 1, "Total due: 1250 EUR, IBAN ES12")
    apply_feeds(stores.lex)

    assert hits(stores.lex, "iban 1250") == {mid}
    assert hits(stores.lex, "attached") == {mid}


def test_replayed_events_for_unchanged_content_write_nothing(stores: Stores) -> None:
    stores.ingest.put_message(CHAT, 1, "quiet message")
    apply_feeds(stores.lex)
    before = fts_blocks(stores.lex)

    stores.ingest.announce(CHAT, 1, "upsert")
    assert apply_feeds(stores.lex) == 1

    assert fts_blocks(stores.lex) == before
    assert cursor(stores.lex, FEED_INGEST) == 2


def test_an_upsert_for_a_row_that_no_longer_exists_acts_as_a_delete(stores: Stores) -> None:
    stores.ingest.put_message(CHAT, 1, "ephemeral words")
    apply_feeds(stores.lex)
    stores.ingest.put_message(CHAT, 1, "ephemeral words again")
    stores.ingest.delete_message(CHAT, 1)

    assert apply_feeds(stores.lex, batch=1) == 2

    assert hits(stores.lex, "ephemeral") == set()
    assert stores.lex.execute("SELECT count(*) FROM indexed_messages").fetchone()[0] == 0


def test_a_delete_event_for_a_message_that_came_back_keeps_it(stores: Stores) -> None:
    stores.ingest.put_message(CHAT, 1, "first life")
    stores.ingest.delete_message(CHAT, 1)
    mid = stores.ingest.put_message(CHAT, 1, "second life")

    apply_feeds(stores.lex, batch=2)

    assert hits(stores.lex, "life") == {mid}
    assert hits(stores.lex, "second") == {mid}
    assert hits(stores.lex, "first") == set()


def test_repeated_events_for_one_message_collapse_within_a_batch(stores: Stores) -> None:
    for version in ("alpha", "beta", "gamma"):
        mid = stores.ingest.put_message(CHAT, 7, f"draft {version}")

    assert apply_feeds(stores.lex) == 3

    assert hits(stores.lex, "draft") == {mid}
    assert hits(stores.lex, "gamma") == {mid}
    assert hits(stores.lex, "alpha") == set()


def test_a_reused_message_rowid_carries_only_the_new_messages_words(stores: Stores) -> None:
    stores.ingest.put_message(CHAT, 1, "keeper")
    reused = stores.ingest.put_message(CHAT, 2, "departed words")
    apply_feeds(stores.lex)
    stores.ingest.delete_message(CHAT, 2)
    newcomer = stores.ingest.put_message(OTHER_CHAT, 9, "newcomer words")
    assert newcomer == reused

    apply_feeds(stores.lex)

    assert hits(stores.lex, "words") == {newcomer}
    assert hits(stores.lex, "departed") == set()
    rows = stores.lex.execute(
        "SELECT chat_id, msg_id FROM indexed_messages WHERE mid = ?", (reused,)
    )
    assert [tuple(r) for r in rows] == [(OTHER_CHAT, 9)]


def test_a_rowid_indexed_under_a_key_the_batch_does_not_name_is_replaced_not_doubled(
    stores: Stores,
) -> None:
    # The message's delete never reached the feed (as from a writer that crashed between the
    # two), so only the newcomer's key names the reused mid: new rows are inserted as new
    # until the bookkeeping's key refuses one, and then the batch is replaced instead.
    stores.ingest.put_message(CHAT, 1, "keeper")
    reused = stores.ingest.put_message(CHAT, 2, "departed words")
    apply_feeds(stores.lex)
    with db.transaction(stores.ingest.conn):
        stores.ingest.conn.execute(
            "DELETE FROM messages WHERE chat_id = ? AND msg_id = ?", (CHAT, 2)
        )
    newcomer = stores.ingest.put_message(OTHER_CHAT, 9, "newcomer words")
    fresh = stores.ingest.put_message(OTHER_CHAT, 10, "fresh words")
    assert newcomer == reused

    apply_feeds(stores.lex)

    assert hits(stores.lex, "words") == {newcomer, fresh}
    assert hits(stores.lex, "departed") == set()
    assert hits(stores.lex, "keeper") != set()
    rows = stores.lex.execute("SELECT mid, chat_id, msg_id FROM indexed_messages ORDER BY mid")
    assert [tuple(r)[1:] for r in rows] == [(CHAT, 1), (OTHER_CHAT, 9), (OTHER_CHAT, 10)]
    assert stores.lex.execute("SELECT count(*) FROM msg_fts").fetchone()[0] == 3


def test_events_of_other_kinds_are_consumed_without_effect(stores: Stores) -> None:
    with db.transaction(stores.ingest.conn):
        stores.ingest.conn.execute(
            "INSERT INTO _feed (kind, account, chat_id, entity, op)"
            " VALUES ('chat', ?, ?, 1, 'upsert')",
            (ACCOUNT, CHAT),
        )

    assert apply_feeds(stores.lex) == 1

    assert words_ready(stores.lex)
    assert stores.lex.execute("SELECT count(*) FROM indexed_messages").fetchone()[0] == 0


def test_small_batches_converge_to_the_feed_head(stores: Stores) -> None:
    mids = [stores.ingest.put_message(CHAT, i, f"note number {i}") for i in range(1, 8)]

    assert apply_feeds(stores.lex, batch=3) == 7

    assert hits(stores.lex, "note") == set(mids)
    assert cursor(stores.lex, FEED_INGEST) == 7


def test_a_batch_below_one_is_refused(stores: Stores) -> None:
    with pytest.raises(ValueError):
        apply_feeds(stores.lex, batch=0)


# --- units ---


def test_units_go_to_unit_fts_and_conversation_chunks_to_chunk_fts(stores: Stores) -> None:
    window = stores.unitize.put_unit(CHAT, "window", [1, 2], "[2024-05-01 10:00] Ann: rent")
    thread = stores.unitize.put_unit(CHAT, "thread", [3], "[2024-05-01 11:00] Bob: rent")
    post = stores.unitize.put_unit(CHAT, "post", [4], "[2024-05-01 12:00] News: rent")
    build = stores.unitize.start_build(CHAT)
    chunk = stores.unitize.put_unit(
        CHAT, "conversation", [1, 3], "Ann: rent Bob: rent", key="c:1", build_id=build
    )

    assert apply_feeds(stores.lex) == 4

    assert hits(stores.lex, "rent", "unit_fts") == {window, thread, post}
    assert hits(stores.lex, "rent", "chunk_fts") == {chunk}
    assert cursor(stores.lex, FEED_UNITIZE) == 4


def test_a_recut_unit_replaces_its_words_and_a_deleted_one_disappears(stores: Stores) -> None:
    first = stores.unitize.put_unit(CHAT, "window", [1], "Ann: parking permit", key="w:1")
    second = stores.unitize.put_unit(CHAT, "window", [2], "Bob: parking garage", key="w:2")
    apply_feeds(stores.lex)

    stores.unitize.put_unit(CHAT, "window", [1, 3], "Ann: residence permit", key="w:1")
    stores.unitize.delete_unit(second)
    apply_feeds(stores.lex)

    assert hits(stores.lex, "permit", "unit_fts") == {first}
    assert hits(stores.lex, "parking", "unit_fts") == set()
    assert hits(stores.lex, "residence", "unit_fts") == {first}


# --- crash safety ---


def _fail_cursor_writes(lex: db.Connection, after_seq: int) -> None:
    for event in ("INSERT", "UPDATE"):
        lex.execute(
            f"CREATE TEMP TRIGGER fail_cursor_{event.lower()} BEFORE {event} ON main._cursors"
            f" WHEN NEW.seq > {after_seq} BEGIN SELECT RAISE(ABORT, 'simulated crash'); END"
        )


def _heal(lex: db.Connection) -> None:
    lex.execute("DROP TRIGGER temp.fail_cursor_insert")
    lex.execute("DROP TRIGGER temp.fail_cursor_update")


def test_a_failure_after_the_fts_writes_leaves_nothing_half_visible(stores: Stores) -> None:
    mids = [stores.ingest.put_message(CHAT, i, f"crash test {i}") for i in range(1, 5)]
    _fail_cursor_writes(stores.lex, after_seq=0)

    with pytest.raises(sqlean.IntegrityError):
        apply_feeds(stores.lex)

    assert hits(stores.lex, "crash") == set()
    assert stores.lex.execute("SELECT count(*) FROM indexed_messages").fetchone()[0] == 0
    assert cursor(stores.lex, FEED_INGEST) == 0

    _heal(stores.lex)
    assert apply_feeds(stores.lex) == 4
    assert hits(stores.lex, "crash") == set(mids)


def test_a_failure_in_a_later_batch_keeps_the_earlier_batches_only(stores: Stores) -> None:
    mids = [stores.ingest.put_message(CHAT, i, f"batch word {i}") for i in range(1, 6)]
    _fail_cursor_writes(stores.lex, after_seq=2)

    with pytest.raises(sqlean.IntegrityError):
        apply_feeds(stores.lex, batch=2)

    assert cursor(stores.lex, FEED_INGEST) == 2
    assert hits(stores.lex, "batch word") == set(mids[:2])

    _heal(stores.lex)
    apply_feeds(stores.lex, batch=2)
    assert hits(stores.lex, "batch word") == set(mids)
    assert index_snapshot(stores.lex) == _rebuilt_snapshot(stores.lex)


# --- rebuild and drop ---


def _rebuilt_snapshot(lex: db.Connection) -> dict[str, list[tuple[object, ...]]]:
    rebuild(lex)
    return index_snapshot(lex)


def _busy_history(stores: Stores) -> None:
    for i in range(1, 13):
        stores.ingest.put_message(CHAT if i % 2 else OTHER_CHAT, i, f"сообщение {i} про счёт")
    stores.ingest.put_message(CHAT, 3, "исправлено: банки и счета", file_name="выписка.pdf")
    stores.ingest.set_extracted_text(CHAT, 3, "Остаток на счёте 2024")
    stores.ingest.delete_message(OTHER_CHAT, 4)
    stores.ingest.delete_message(CHAT, 5)
    stores.ingest.put_message(CHAT, 5, "resurrected banks")
    stores.unitize.put_unit(CHAT, "window", [1, 3], "Ann: счёт", key="w:1")
    gone = stores.unitize.put_unit(CHAT, "thread", [3, 5], "Bob: банк", key="t:3")
    stores.unitize.put_unit(CHAT, "window", [1, 3, 5], "Ann: счёт и банк", key="w:1")
    stores.unitize.delete_unit(gone)
    build = stores.unitize.start_build(CHAT)
    stores.unitize.put_unit(CHAT, "conversation", [1, 3], "Ann: счёт", key="c:1", build_id=build)
    stores.unitize.publish_build(build)


def test_rebuild_produces_exactly_what_incremental_indexing_produced(stores: Stores) -> None:
    _busy_history(stores)
    apply_feeds(stores.lex, batch=4)
    incremental = index_snapshot(stores.lex)

    counts = rebuild(stores.lex)

    assert counts == IndexCounts(messages=11, units=1, chunks=1)
    assert index_snapshot(stores.lex) == incremental
    assert words_ready(stores.lex)


def test_events_after_a_rebuild_are_still_applied(stores: Stores) -> None:
    stores.ingest.put_message(CHAT, 1, "before rebuild")
    rebuild(stores.lex)
    assert apply_feeds(stores.lex) == 0
    mid = stores.ingest.put_message(CHAT, 2, "after rebuild")

    assert apply_feeds(stores.lex) == 1

    assert hits(stores.lex, "rebuild") == {1, mid}


def test_drop_chat_removes_only_that_chats_rows(stores: Stores) -> None:
    stores.ingest.put_message(CHAT, 1, "shared word")
    other = stores.ingest.put_message(OTHER_CHAT, 1, "shared word")
    stores.unitize.put_unit(CHAT, "window", [1], "shared word")
    other_unit = stores.unitize.put_unit(OTHER_CHAT, "window", [1], "shared word")
    apply_feeds(stores.lex)

    assert drop_chat(stores.lex, ACCOUNT, CHAT) == 2

    assert hits(stores.lex, "shared") == {other}
    assert hits(stores.lex, "shared", "unit_fts") == {other_unit}
    assert words_ready(stores.lex)


# --- readiness ---


def test_words_ready_is_honest_before_and_after_indexing(stores: Stores) -> None:
    assert words_ready(stores.lex)
    stores.ingest.put_message(CHAT, 1, "one")
    stores.ingest.put_message(CHAT, 2, "two")
    stores.unitize.put_unit(CHAT, "window", [1, 2], "one two")

    status = words_status(stores.lex)
    assert not words_ready(stores.lex)
    assert not status.ready
    assert [(f.feed, f.cursor, f.head, f.behind) for f in status.feeds] == [
        (FEED_INGEST, 0, 2, 2),
        (FEED_UNITIZE, 0, 1, 1),
    ]
    assert status.behind == 3

    apply_feeds(stores.lex)

    status = words_status(stores.lex)
    assert words_ready(stores.lex)
    assert status.ready and status.behind == 0
    assert (status.messages, status.units) == (2, 1)
    brief = words_status(stores.lex, counts=False)
    assert (brief.messages, brief.units) == (None, None)
    assert brief.feeds == status.feeds


def test_words_are_not_ready_while_only_the_unit_feed_lags(stores: Stores) -> None:
    stores.ingest.put_message(CHAT, 1, "one")
    apply_feeds(stores.lex)
    stores.unitize.put_unit(CHAT, "window", [1], "one")

    assert not words_ready(stores.lex)
    assert words_status(stores.lex).feeds[1].behind == 1


def test_a_cursor_past_the_feed_head_asks_for_a_rebuild(tmp_path: Path) -> None:
    first = make_stores(tmp_path)
    first.ingest.put_message(CHAT, 1, "old store")
    apply_feeds(first.lex)
    first.close()
    for name in ("ingest.db", "ingest.db-wal", "ingest.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    second = make_stores(tmp_path)
    try:
        status = words_status(second.lex)
        assert not status.ready
        assert status.feeds[0].needs_rebuild
        assert apply_feeds(second.lex) == 0

        rebuild(second.lex)

        assert words_ready(second.lex)
        assert hits(second.lex, "old") == set()
    finally:
        second.close()


# --- migrations ---


def _stores_at_schema(tmp_path: Path, version: int) -> tuple[Stores, db.Connection]:
    """Stores whose lexical.db has only lexical's first ``version`` migrations, open apart."""
    from chatseek_lexical.schema import MIGRATIONS, OWNER

    s = make_stores(tmp_path)
    s.lex.close()
    (tmp_path / "lexical.db").unlink()
    old = db.connect(tmp_path / "lexical.db")
    db.migrate(old, OWNER, MIGRATIONS[:version])
    db.attach_readonly(old, tmp_path / "ingest.db", "ingest")
    db.attach_readonly(old, tmp_path / "unitize.db", "unitize")
    return s, old


def test_an_index_of_the_first_schema_is_indexed_again_with_analysed_tokens(
    tmp_path: Path,
) -> None:
    s, old = _stores_at_schema(tmp_path, 1)
    mid = s.ingest.put_message(CHAT, 1, "Rent the «flat» — ёлка, e-mail")
    apply_feeds(old)
    assert hits(old, "rent") == {mid}
    old_terms = {r[0] for r in old.execute("SELECT term FROM msg_vocab")}
    old.close()

    s.lex = open_lexical(tmp_path)
    try:
        assert cursor(s.lex, FEED_INGEST) == 0
        assert hits(s.lex, "rent") == set()
        apply_feeds(s.lex)
        assert hits(s.lex, "rent flat") == {mid}
        assert hits(s.lex, "елка e mail") == {mid}
        # The same tokens as unicode61 found in this text, now cut by the shared analyser.
        assert {r[0] for r in s.lex.execute("SELECT term FROM msg_vocab")} == old_terms
        sql = s.lex.execute("SELECT sql FROM sqlite_master WHERE name = 'msg_fts'").fetchone()[0]
        assert "'ascii'" in sql
    finally:
        s.close()


def _unit_as_written_before(
    tmp_path: Path, version: int, text: str, fts_text: str
) -> tuple[Stores, int]:
    """Stores at schema ``version`` holding one window of ``text`` whose ``unit_fts`` row is
    ``index_columns(fts_text)``, as the code of that schema wrote it; lexical.db is closed."""
    s, old = _stores_at_schema(tmp_path, version)
    s.ingest.put_message(CHAT, 1, "rent is 1200")
    unit = s.unitize.put_unit(CHAT, "window", [1, 2], text)
    apply_feeds(old)
    with db.transaction(old):
        old.execute(
            "INSERT OR REPLACE INTO unit_fts (rowid, raw, stem) VALUES (?, ?, ?)",
            (unit, *index_columns(fts_text)),
        )
    old.close()
    return s, unit


def test_units_are_indexed_again_with_their_month_names_after_migration_4(
    tmp_path: Path,
) -> None:
    text = "[2023-10-13 10:15] Ann: rent is 1200\n[2023-11-01 10:16] Bob: paid"
    # As the code before migration 4 wrote it: the text alone.
    s, unit = _unit_as_written_before(tmp_path, 3, text, text)

    s.lex = open_lexical(tmp_path)
    try:
        assert hits(s.lex, "rent", "unit_fts") == set()
        apply_feeds(s.lex)
        assert hits(s.lex, "rent 1200 2023 october", "unit_fts") == {unit}
        assert hits(s.lex, "в октябре и ноябре", "unit_fts") == {unit}
        assert hits(s.lex, "november", "unit_fts") == {unit}
        assert hits(s.lex, "december", "unit_fts") == set()
        assert hits(s.lex, "october", "msg_fts") == set()  # messages hold their own words only
    finally:
        s.close()


def test_units_are_indexed_again_with_dates_as_words_and_no_stamps_after_migration_5(
    tmp_path: Path,
) -> None:
    text = "[2023-10-03 10:15] Ann: rent is 1200\n[2023-11-01 10:16] Bob: paid"
    # As the code before migration 5 wrote it: every line's stamp, then the month names.
    before = f"{text}\noctober октябрь november ноябрь"
    assert "15" in index_columns(before)[0].split()
    s, unit = _unit_as_written_before(tmp_path, 4, text, before)

    s.lex = open_lexical(tmp_path)
    try:
        assert hits(s.lex, "rent", "unit_fts") == set()
        apply_feeds(s.lex)
        # The minute a line was sent is no word of it; its date, worded, is.
        assert hits(s.lex, "rent 15", "unit_fts") == set()
        assert hits(s.lex, "rent 16", "unit_fts") == set()
        assert hits(s.lex, "rent on october 3 2023", "unit_fts") == {unit}
        assert hits(s.lex, "paid 1 ноября", "unit_fts") == {unit}
        assert hits(s.lex, "rent 1200", "unit_fts") == {unit}  # the text's own numbers stay
        assert hits(s.lex, "2024", "unit_fts") == set()
        s.lex.execute("CREATE VIRTUAL TABLE temp.u_inst USING fts5vocab(main, unit_fts, instance)")
        tokens = {
            col: [
                r[0]
                for r in s.lex.execute(
                    "SELECT term FROM u_inst WHERE col = ? ORDER BY offset", (col,)
                )
            ]
            for col in ("raw", "stem")
        }
        assert tokens == {
            "raw": words(indexed_text(text)),
            "stem": analyse(indexed_text(text)).split(),
        }
    finally:
        s.close()


# --- analysis ---


def test_the_stem_cache_stays_within_its_byte_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from chatseek_lexical import indexer

    monkeypatch.setattr(indexer, "STEM_CACHE_BYTES", 20_000)
    indexer._stems.clear()
    indexer._stems.bytes_held = 0
    for n in range(2_000):
        text = f"квартиры{n} apartments{n} залоги"
        assert index_columns(text) == (" ".join(words(text)), analyse(text))
        assert indexer._stems.bytes_held <= 20_000
    assert 0 < len(indexer._stems) < 200


_TRICKY = list(
    "абвгдеёжзийклмнЁЙЖ ABCxyz019_-.,!?\t\n\r\x0b\x0c\x1c\x85\u00a0\u2028\u3000"
    "«»—…№ßæøéüİıﬁ²½\u0301\u0306\u0308😀\ufe0f👍🏽ΩΣς한글ㄱ"
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet=st.sampled_from(_TRICKY))))
def test_index_columns_equal_the_shared_analyser(text: str) -> None:
    assert index_columns(text) == (" ".join(words(text)), analyse(text))


# ASCII text takes a path that skips whitespace folding; text without "_" another regex.
_ASCII_TRICKY = list("abcXYZ019_-.,!?'\" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x00\x7f")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(_ASCII_TRICKY)))
def test_index_columns_of_ascii_text_equal_the_shared_analyser(text: str) -> None:
    assert index_columns(text) == (" ".join(words(text)), analyse(text))


@pytest.mark.parametrize(
    "text",
    ["snake_case words_here", "Квартира_аренда залог", "__init__ a_b_", "x\u00a0y\u2028z", ""],
)
def test_underscores_split_words_as_the_shared_analyser_does(text: str) -> None:
    assert index_columns(text) == (" ".join(words(text)), analyse(text))
