"""The schema of ``lexical.db``: FTS5 word indexes derived from ingest and unitize.

Every FTS row is keyed by its source's id: ``msg_fts.rowid`` is ``ingest.messages.mid``,
``unit_fts.rowid`` and ``chunk_fts.rowid`` are ``unitize.units.unit_id``, so the whole file can be
deleted and rebuilt from the feeds. Each table has a ``raw`` column (normalised words) and a
``stem`` column (Snowball stems by script); both use ``unicode61`` with diacritics removed.
The tables are contentless (text lives in its owner's file) with delete support.
``msg_vocab`` exposes the message vocabulary for wildcard and regex expansion.
"""

from __future__ import annotations

from chatseek_core.db import Migration
from chatseek_core.feed import CURSOR_DDL

__all__ = ["MIGRATIONS", "OWNER", "TOKENIZER"]

OWNER = "lexical"
TOKENIZER = "unicode61 remove_diacritics 2"

_M001 = (
    f"""
CREATE VIRTUAL TABLE msg_fts USING fts5(
    raw, stem, tokenize = '{TOKENIZER}', content = '', contentless_delete = 1
);
CREATE VIRTUAL TABLE unit_fts USING fts5(
    raw, stem, tokenize = '{TOKENIZER}', content = '', contentless_delete = 1
);
CREATE VIRTUAL TABLE chunk_fts USING fts5(
    raw, stem, tokenize = '{TOKENIZER}', content = '', contentless_delete = 1
);
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

MIGRATIONS = [Migration(1, "initial", _M001)]
