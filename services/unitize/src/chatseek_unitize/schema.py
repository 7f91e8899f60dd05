"""The schema of ``unitize.db``: units, conversation builds and agent link answers.

A unit is keyed by ``unit_id`` (stable while its ``(account, chat_id, topic_key, kind, key)``
identity stays, so vectors survive re-cuts); ``msg_ids`` is a JSON array of the chat's message
ids in order and ``unit_members`` indexes it by ingest ``mid``. Conversation chunks are units of
kind ``conversation`` tied to the build that made them. A build becomes visible only when
``conversation_builds.state`` is ``complete`` and it is the chat's ``current`` build, switched in
one transaction. Unit changes are announced on ``_feed`` (kind ``unit``, entity ``unit_id``).
"""

from __future__ import annotations

from chatseek_core.db import Migration
from chatseek_core.feed import CURSOR_DDL, FEED_DDL

__all__ = ["MIGRATIONS", "OWNER"]

OWNER = "unitize"

_M001 = (
    """
CREATE TABLE units (
    unit_id INTEGER PRIMARY KEY,
    account TEXT NOT NULL,
    chat_id INTEGER NOT NULL,
    topic_key INTEGER NOT NULL DEFAULT 0,
    kind TEXT NOT NULL CHECK (kind IN ('window', 'thread', 'post', 'conversation')),
    key TEXT NOT NULL,
    build_id INTEGER,
    first_msg_id INTEGER NOT NULL,
    last_msg_id INTEGER NOT NULL,
    start_date INTEGER NOT NULL,
    end_date INTEGER NOT NULL,
    msg_ids TEXT NOT NULL,
    senders TEXT NOT NULL,
    reactions INTEGER NOT NULL DEFAULT 0,
    text TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    recipe INTEGER NOT NULL,
    UNIQUE (account, chat_id, topic_key, kind, key)
);
CREATE INDEX units_by_chat_date ON units(account, chat_id, start_date);

CREATE TABLE unit_members (
    unit_id INTEGER NOT NULL REFERENCES units(unit_id) ON DELETE CASCADE,
    account TEXT NOT NULL,
    chat_id INTEGER NOT NULL,
    msg_id INTEGER NOT NULL,
    PRIMARY KEY (account, chat_id, msg_id, unit_id)
) WITHOUT ROWID;
CREATE INDEX unit_members_by_unit ON unit_members(unit_id);

CREATE TABLE chat_recipes (
    account TEXT NOT NULL,
    chat_id INTEGER NOT NULL,
    recipe INTEGER NOT NULL,
    cut_at INTEGER NOT NULL DEFAULT (unixepoch()),
    PRIMARY KEY (account, chat_id)
);

CREATE TABLE conversation_builds (
    build_id INTEGER PRIMARY KEY,
    account TEXT NOT NULL,
    chat_id INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('building', 'complete', 'failed', 'superseded')),
    scorer TEXT NOT NULL,
    started_at INTEGER NOT NULL DEFAULT (unixepoch()),
    finished_at INTEGER,
    message_count INTEGER NOT NULL DEFAULT 0,
    conversation_count INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE current_builds (
    account TEXT NOT NULL,
    chat_id INTEGER NOT NULL,
    build_id INTEGER NOT NULL REFERENCES conversation_builds(build_id),
    PRIMARY KEY (account, chat_id)
);
CREATE TABLE links (
    build_id INTEGER NOT NULL REFERENCES conversation_builds(build_id) ON DELETE CASCADE,
    msg_id INTEGER NOT NULL,
    parent_id INTEGER,
    conversation_id INTEGER NOT NULL,
    reason TEXT NOT NULL,
    confidence REAL NOT NULL,
    rejected TEXT,
    PRIMARY KEY (build_id, msg_id)
) WITHOUT ROWID;
CREATE INDEX links_by_conversation ON links(build_id, conversation_id);
CREATE TABLE conversations (
    build_id INTEGER NOT NULL REFERENCES conversation_builds(build_id) ON DELETE CASCADE,
    conversation_id INTEGER NOT NULL,
    first_msg_id INTEGER NOT NULL,
    last_msg_id INTEGER NOT NULL,
    start_date INTEGER NOT NULL,
    end_date INTEGER NOT NULL,
    message_count INTEGER NOT NULL,
    participants TEXT NOT NULL,
    PRIMARY KEY (build_id, conversation_id)
) WITHOUT ROWID;

CREATE TABLE agent_answers (
    account TEXT NOT NULL,
    chat_id INTEGER NOT NULL,
    msg_id INTEGER NOT NULL,
    parent_id INTEGER,
    msg_hash TEXT NOT NULL,
    parent_hash TEXT,
    answered_at INTEGER NOT NULL DEFAULT (unixepoch()),
    PRIMARY KEY (account, chat_id, msg_id)
);
"""
    + FEED_DDL
    + CURSOR_DDL
)

# Lookups of the incremental re-cut and of builds: a topic's windows in chronological order, a
# unit by key prefix (thread and post parts), a build's chunks, unfinished builds. A whole chat
# cut records the ingest feed head it read, so the events it already reflects are skipped.
_M002 = """
ALTER TABLE chat_recipes ADD COLUMN feed_seq INTEGER NOT NULL DEFAULT 0;
CREATE INDEX units_by_topic_start
    ON units(account, chat_id, topic_key, kind, start_date, first_msg_id);
CREATE INDEX units_by_kind_key ON units(account, chat_id, kind, key);
CREATE INDEX units_by_build ON units(build_id) WHERE build_id IS NOT NULL;
CREATE INDEX conversation_builds_by_state ON conversation_builds(state, account, chat_id);
"""

# Albums in reply threads, and an album's photos as one line group under one header: only units
# holding an album change. Every chat is marked for one whole re-cut at the same recipe (0 is
# below any RECIPE_VERSION), so units without albums come back with the same hash and are not
# written, announced or embedded again, as a new RECIPE_VERSION would make them.
_M003 = "UPDATE chat_recipes SET recipe = 0;"

# A channel's whole cut rendered a comment in place of the post that shares its id (the two
# chats number their messages apart). Every channel with post units is marked for one whole
# re-cut at the same recipe: only the post units that were wrong change.
_M004 = """
UPDATE chat_recipes SET recipe = 0 WHERE EXISTS (
    SELECT 1 FROM units AS u WHERE u.account = chat_recipes.account
    AND u.chat_id = chat_recipes.chat_id AND u.kind = 'post'
);
"""

MIGRATIONS = [
    Migration(1, "initial", _M001),
    Migration(2, "unit and build lookups", _M002),
    Migration(3, "re-cut chats for albums", _M003),
    Migration(4, "re-cut channels whose comments share post ids", _M004),
]
