"""The schema of ``ingest.db``, the source of truth every other store derives from.

Identity: a chat is ``(account, chat_id)`` with the *marked* chat id (channels and supergroups
``-100…``, legacy groups ``-id``, private chats the peer's user id); a message is
``(account, chat_id, msg_id)`` and also has a stable integer ``mid`` (its rowid, kept across
upserts) that derived stores use as a key. Dates are unix seconds UTC. ``text`` is the original,
as it came; nothing normalised is stored (migration 4 dropped ``norm_text``).
Every stored, edited or deleted message is announced on ``_feed`` (kind ``message``, entity
``msg_id``) in the same transaction.
"""

from __future__ import annotations

from chatseek_core.db import Migration
from chatseek_core.feed import FEED_DDL

__all__ = ["MIGRATIONS", "OWNER"]

OWNER = "ingest"

_M001 = (
    """
CREATE TABLE accounts (
    account TEXT PRIMARY KEY,
    provider TEXT NOT NULL DEFAULT 'telegram',
    user_id INTEGER,
    display_name TEXT,
    is_active INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL DEFAULT (unixepoch())
);

CREATE TABLE sources (
    account TEXT NOT NULL REFERENCES accounts(account),
    source_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('chat', 'folder', 'import')),
    target TEXT NOT NULL,
    since INTEGER,
    comments INTEGER NOT NULL DEFAULT 0,
    added_at INTEGER NOT NULL DEFAULT (unixepoch()),
    resolve_error TEXT,
    PRIMARY KEY (account, source_id)
);

CREATE TABLE chats (
    account TEXT NOT NULL REFERENCES accounts(account),
    chat_id INTEGER NOT NULL,
    type TEXT NOT NULL CHECK (type IN
        ('private', 'saved', 'bot', 'group', 'supergroup', 'forum', 'channel')),
    title TEXT NOT NULL DEFAULT '',
    username TEXT,
    access_hash INTEGER,
    linked_chat_id INTEGER,
    source_id TEXT,
    is_import INTEGER NOT NULL DEFAULT 0,
    unavailable INTEGER NOT NULL DEFAULT 0,
    unavailable_reason TEXT,
    history_complete INTEGER NOT NULL DEFAULT 0,
    last_fetched_at INTEGER,
    last_msg_id INTEGER NOT NULL DEFAULT 0,
    prune_cursor INTEGER NOT NULL DEFAULT 0,
    migrated_to INTEGER,
    message_count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (account, chat_id)
);

CREATE TABLE history_ranges (
    account TEXT NOT NULL,
    chat_id INTEGER NOT NULL,
    first_msg_id INTEGER NOT NULL,
    last_msg_id INTEGER NOT NULL,
    PRIMARY KEY (account, chat_id, first_msg_id),
    FOREIGN KEY (account, chat_id) REFERENCES chats(account, chat_id) ON DELETE CASCADE
);

CREATE TABLE senders (
    account TEXT NOT NULL,
    sender_id INTEGER NOT NULL,
    kind TEXT NOT NULL DEFAULT 'user',
    display_name TEXT NOT NULL DEFAULT '',
    username TEXT,
    PRIMARY KEY (account, sender_id)
);

CREATE TABLE messages (
    mid INTEGER PRIMARY KEY,
    account TEXT NOT NULL,
    chat_id INTEGER NOT NULL,
    msg_id INTEGER NOT NULL,
    date INTEGER NOT NULL,
    edit_date INTEGER,
    kind TEXT NOT NULL DEFAULT 'message' CHECK (kind IN ('message', 'service')),
    sender_id INTEGER,
    sender_name TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL DEFAULT '',
    entities TEXT,
    norm_text TEXT NOT NULL DEFAULT '',
    reply_to_msg_id INTEGER,
    reply_to_peer_id INTEGER,
    topic_id INTEGER,
    comment_channel_id INTEGER,
    comment_post_id INTEGER,
    fwd_from TEXT,
    via_bot TEXT,
    reactions_total INTEGER NOT NULL DEFAULT 0,
    reactions TEXT,
    service_action TEXT,
    has_link INTEGER NOT NULL DEFAULT 0,
    mentions TEXT,
    content_hash TEXT NOT NULL DEFAULT '',
    UNIQUE (account, chat_id, msg_id),
    FOREIGN KEY (account, chat_id) REFERENCES chats(account, chat_id) ON DELETE CASCADE
);
CREATE INDEX messages_by_date ON messages(account, chat_id, date);
CREATE INDEX messages_by_reply ON messages(account, chat_id, reply_to_msg_id)
    WHERE reply_to_msg_id IS NOT NULL;
CREATE INDEX messages_by_sender ON messages(account, sender_id);

CREATE TABLE media (
    mid INTEGER PRIMARY KEY REFERENCES messages(mid) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('photo', 'video', 'voice', 'video_note', 'audio',
        'sticker', 'animation', 'document', 'poll', 'contact', 'location', 'venue', 'todo',
        'game', 'invoice')),
    file_name TEXT,
    mime TEXT,
    size INTEGER,
    extra TEXT,
    extract_state TEXT NOT NULL DEFAULT 'pending' CHECK (extract_state IN
        ('pending', 'read', 'no-extractor', 'failed', 'too-large', 'disabled')),
    extracted_text TEXT,
    extract_error TEXT,
    extracted_at INTEGER
);
CREATE INDEX media_pending ON media(extract_state) WHERE extract_state = 'pending';

CREATE TABLE tags (
    tag TEXT NOT NULL CHECK (length(tag) BETWEEN 1 AND 32),
    target TEXT NOT NULL CHECK (target IN ('chat', 'sender', 'message')),
    account TEXT NOT NULL,
    chat_id INTEGER NOT NULL DEFAULT 0,
    sender_id INTEGER NOT NULL DEFAULT 0,
    msg_id INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tag, target, account, chat_id, sender_id, msg_id)
);

CREATE TABLE sync_runs (
    run_id INTEGER PRIMARY KEY,
    account TEXT NOT NULL,
    kind TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    outcome TEXT,
    detail TEXT
);
"""
    + FEED_DDL
)

# Albums: the media group id Telegram gives every message of one album (NULL outside albums
# and for imported messages: a Desktop export does not carry it).
_M002 = """
ALTER TABLE messages ADD COLUMN grouped_id INTEGER;
CREATE INDEX messages_by_group ON messages(account, chat_id, grouped_id)
    WHERE grouped_id IS NOT NULL;
"""

# A sender's messages by date: ``from:`` with a date range, newest first, reads only the range.
_M003 = """
DROP INDEX messages_by_sender;
CREATE INDEX messages_by_sender ON messages(account, sender_id, date);
"""

# ``norm_text`` held ``normalise(text)``: a second copy of every text, a sixth of the file,
# made by the import's busiest process, for one reader (fusion's channel-copy check, which now
# normalises the few texts it compares). Dropping it rewrites the table once.
_M004 = """
ALTER TABLE messages DROP COLUMN norm_text;
"""

MIGRATIONS = [
    Migration(1, "initial", _M001),
    Migration(2, "media_groups", _M002),
    Migration(3, "sender_dates", _M003),
    Migration(4, "no_norm_text", _M004),
]
