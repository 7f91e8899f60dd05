"""Fusion picks a hit's anchor by scoring its messages as FTS5's bm25 over lexical's index does.

The index here is lexical's own: its migrations, its analyser, its match expressions; the
scores fusion computes in Python must be FTS5's to the last bits, over words, stems, repeats,
long and short messages, and media text.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chatseek_core import db
from chatseek_core.stopwords import query_terms
from chatseek_core.text import words
from chatseek_fusion.anchors import Anchors, index_stats, message_score, message_text
from chatseek_fusion.store import MessageRow, UnitRow
from chatseek_lexical.indexer import index_columns
from chatseek_lexical.ranked import RAW_WEIGHT, STEM_WEIGHT, match_expression
from chatseek_lexical.schema import MIGRATIONS, OWNER

ACCOUNT = "me"
CHAT = -100_555

TEXTS = [
    "сдаю квартиру на долгий срок, хозяин просит залог за один месяц и оплату вперёд до пятого",
    "Квартира в центре: залог, аренда, коммуналка. Квартира светлая!",
    "квартира квартира квартира",
    "where is the deposit for the flat? the flat deposit was paid",
    "deposit",
    "flats and deposits, depositing money into flats for a long long long long long time",
    "банковская карта и банк",
    "ничего общего с запросом",
    "rent is due; the rent for the flat is 900",
    "квартиры квартира квартирный вопрос",
    "",
]
MEDIA = {10: ("договор_аренды.pdf", "Договор аренды квартиры, залог 900 евро")}
QUERIES = [
    "квартира залог",
    "flat deposit",
    "the rent for a flat",
    "аренда квартиры залог евро",
    "банк",
    "квартиры квартира",
]


def _message(msg_id: int, text: str) -> MessageRow:
    file_name, media_text = MEDIA.get(msg_id, (None, None))
    return MessageRow(
        account=ACCOUNT,
        chat_id=CHAT,
        msg_id=msg_id,
        date=1_767_268_800 + msg_id,
        sender_id=1,
        sender_name="Ann",
        text=text,
        reply_to_msg_id=None,
        topic_id=None,
        kind="message",
        media_kind="document" if file_name else None,
        file_name=file_name,
        media_text=media_text,
        content_hash="",
        comment_channel_id=None,
        comment_post_id=None,
    )


MESSAGES = {n: _message(n, text) for n, text in enumerate(TEXTS, start=1)}


def _index(path: Path, migrations: int = len(MIGRATIONS)) -> db.Connection:
    """``lexical.db`` migrated by lexical (its first ``migrations``), its message index filled
    as the indexer fills it, attached read-only as fusion attaches it."""
    writer = db.connect(path)
    db.migrate(writer, OWNER, MIGRATIONS[:migrations])
    with db.transaction(writer):
        writer.executemany(
            "INSERT INTO msg_fts (rowid, raw, stem) VALUES (?, ?, ?)",
            [(n, *index_columns(message_text(m))) for n, m in MESSAGES.items()],
        )
    writer.close()
    conn = db.connect(":memory:")
    db.attach_readonly(conn, path, "lexical")
    return conn


@pytest.fixture
def lexical(tmp_path: Path) -> db.Connection:
    return _index(tmp_path / "lexical.db")


@pytest.mark.parametrize("query", QUERIES)
def test_each_message_scores_what_fts5_bm25_gives_it(lexical: db.Connection, query: str) -> None:
    terms = query_terms(query)
    fts = {
        int(r[0]): float(r[1])
        for r in lexical.execute(
            f"SELECT rowid, -bm25(msg_fts, {RAW_WEIGHT}, {STEM_WEIGHT}) FROM lexical.msg_fts"
            " WHERE msg_fts MATCH ?",
            (match_expression(terms, "OR"),),
        )
    }
    assert fts, "the query matches something"
    stats = index_stats(lexical, [t for pair in terms for t in pair])
    assert stats.rows == len(MESSAGES)
    for msg_id, m in MESSAGES.items():
        held, score = message_score(words(message_text(m)), terms, stats)
        if msg_id in fts:
            assert score == pytest.approx(fts[msg_id], rel=1e-12, abs=1e-12)
            assert score > 0
        else:
            assert (held, score) == (False, 0.0)
    every = {
        int(r[0])
        for r in lexical.execute(
            "SELECT rowid FROM lexical.msg_fts WHERE msg_fts MATCH ?",
            (match_expression(terms, "AND"),),
        )
    }
    holding = {
        n for n, m in MESSAGES.items() if message_score(words(message_text(m)), terms, stats)[0]
    }
    assert holding == every


def _unit(unit_id: int, msg_ids: tuple[int, ...]) -> UnitRow:
    return UnitRow(
        unit_id=unit_id,
        account=ACCOUNT,
        chat_id=CHAT,
        topic_key=0,
        kind="window",
        build_id=None,
        first_msg_id=msg_ids[0],
        last_msg_id=msg_ids[-1],
        start_date=0,
        end_date=0,
        msg_ids=msg_ids,
        senders=("Ann",),
        reactions=0,
        text="",
    )


def test_a_unit_anchors_on_its_message_holding_every_word_before_a_higher_partial_score(
    lexical: db.Connection,
) -> None:
    # Message 3 repeats "квартира" and outscores message 1 on bm25, but message 1 holds both:
    # the message list's AND pass ranks it first, and so does fusion.
    terms = query_terms("квартира залог")
    stats = index_stats(lexical, [t for pair in terms for t in pair])
    partial = message_score(words(TEXTS[2]), terms, stats)
    whole = message_score(words(TEXTS[0]), terms, stats)
    assert partial[1] > whole[1] and whole[0] and not partial[0]
    units = [_unit(1, (3, 1, 8)), _unit(2, (8, 7)), _unit(3, (4, 5, 6)), _unit(4, (11, 10))]
    got = Anchors(lexical, "квартира залог").best(units, {(ACCOUNT, CHAT): MESSAGES})
    # Unit 2 holds no query word and gets no anchor; unit 4's document holds both in its text.
    assert got == {1: 1, 4: 10}
    got = Anchors(lexical, "flat deposit").best(units, {(ACCOUNT, CHAT): MESSAGES})
    assert got == {3: 4}
    assert Anchors(lexical, "!!!").best(units, {(ACCOUNT, CHAT): MESSAGES}) == {}


def test_without_the_column_vocabulary_anchors_still_prefer_every_word(tmp_path: Path) -> None:
    # A lexical.db from before migration 3: no document counts, every idf FTS5's floor.
    conn = _index(tmp_path / "lexical.db", migrations=2)
    units = [_unit(1, (3, 1, 8))]
    assert Anchors(conn, "квартира залог").best(units, {(ACCOUNT, CHAT): MESSAGES}) == {1: 1}
