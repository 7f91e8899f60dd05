"""The schema of ``lexical.db``: FTS5 word indexes derived from ingest and unitize.

Every FTS row is keyed by its source's id: ``msg_fts.rowid`` is ``ingest.messages.mid``,
``unit_fts.rowid`` and ``chunk_fts.rowid`` are ``unitize.units.unit_id``, so the whole file can be
deleted and rebuilt from the feeds. Each table has a ``raw`` column (normalised words) and a
``stem`` column (Snowball stems by script). Both hold tokens the shared analyser
(``chatseek_core.text``) already cut, space-joined, and queries cut their words the same way, so
the tables use FTS5's ``ascii`` tokenizer, which only splits them again (an analysed token holds
no ASCII separator). A unit's or chunk's rows hold its lines without their time stamps, then the
stamps' dates as words: years, the English and Russian month names, days without a leading zero
(``render.indexed_text``), so "what did we say on October 3" finds the lines stamped
``2023-10-03 …``, and the "10" of a question does not match every line sent at ten. The tables
are contentless (text lives in its owner's file) with delete support.
``msg_vocab`` exposes the message vocabulary for wildcard and regex expansion;
``msg_col_vocab`` each term's document count per column, which fusion reads to score a hit's own
messages as bm25 over ``msg_fts`` would.
"""

from __future__ import annotations

from chatseek_core.db import Migration
from chatseek_core.feed import CURSOR_DDL

__all__ = ["MIGRATIONS", "OWNER", "TOKENIZER"]

OWNER = "lexical"
# Migration 1 let ``unicode61`` re-tokenise the normalised text; migration 2 moved to ``ascii``
# over analysed tokens: a sixth less CPU per indexed message, and the tokens of both columns are
# the analyser's by construction, as a query's are.
TOKENIZER = "ascii"
_TOKENIZER_1 = "unicode61 remove_diacritics 2"


_TABLES = ("msg_fts", "unit_fts", "chunk_fts")


def _fts_tables(tokenizer: str, names: tuple[str, ...] = _TABLES) -> str:
    return "".join(
        f"""
CREATE VIRTUAL TABLE {name} USING fts5(
    raw, stem, tokenize = '{tokenizer}', content = '', contentless_delete = 1
);"""
        for name in names
    )


_M001 = (
    f"""
{_fts_tables(_TOKENIZER_1)}
CREATE VIRTUAL TABLE msg_vocab USING fts5vocab(msg_fts, 'row');

-- Which FTS rows exist, so deletes and re-indexes know what to remove.
CREATE TABLE indexed_messages (
    mid INTEGER PRIMARY KEY,
    account TEXT NOT NULL,
    chat_id INTEGER NOT NULL,
    msg_id INTEGER NOT NULL,
    content_hash TEXT NOT NULL
);
CREATE INDEX indexed_messages_by_chat ON indexed_messages(account, chat_id, msg_id);
CREATE TABLE indexed_units (
    unit_id INTEGER PRIMARY KEY,
    account TEXT NOT NULL,
    chat_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    content_hash TEXT NOT NULL
);
CREATE INDEX indexed_units_by_chat ON indexed_units(account, chat_id);
"""
    + CURSOR_DDL
)

# Every FTS row is indexed again from the feeds (kept whole by their owners) from seq 0.
_M002 = (
    """
DROP TABLE msg_vocab;
DROP TABLE msg_fts;
DROP TABLE unit_fts;
DROP TABLE chunk_fts;
"""
    + _fts_tables(TOKENIZER)
    + """
CREATE VIRTUAL TABLE msg_vocab USING fts5vocab(msg_fts, 'row');
DELETE FROM indexed_messages;
DELETE FROM indexed_units;
DELETE FROM _cursors WHERE feed IN ('ingest', 'unitize');
"""
)

# A view of the index, no storage of its own: the message list's bm25 idf per column.
_M003 = "CREATE VIRTUAL TABLE msg_col_vocab USING fts5vocab(msg_fts, 'col');"

# A unit's or chunk's rows also hold the names of the months its lines fall in: both tables are
# indexed again from the unitize feed, from seq 0.
_M004 = (
    """
DROP TABLE unit_fts;
DROP TABLE chunk_fts;
"""
    + _fts_tables(TOKENIZER, ("unit_fts", "chunk_fts"))
    + """
DELETE FROM indexed_units;
DELETE FROM _cursors WHERE feed = 'unitize';
"""
)

# A unit's or chunk's rows no longer hold each line's stamp, only its dates as words
# (``render.indexed_text``): both tables are indexed again from the unitize feed, from seq 0.
_M005 = _M004

MIGRATIONS = [
    Migration(1, "initial", _M001),
    Migration(2, "ascii_tokens", _M002),
    Migration(3, "column_vocabulary", _M003),
    Migration(4, "unit_month_names", _M004),
    Migration(5, "unit_date_words", _M005),
]
