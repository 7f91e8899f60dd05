"""The Telegram boundary: the client calls ingest makes, the real client, and record conversion.

Owns ``TelegramClientLike`` (exactly the Telethon calls used here) and the real client over an
in-memory ``StringSession`` read from the account's session file (``client``), the flood-wait
policy every Telegram-using core function shares (``flood``, ``fetch``), peers and folders
(``peers``), and ``chat_record`` / ``to_records`` (``chats``, ``messages``, ``media``), which
turn real Telethon objects into the same records an export produces. Invariants: chat ids are
marked (``telethon.utils.get_peer_id``); conversion does no I/O; only ``auth`` writes a session
file. Nothing here imports ``auth``, ``sync`` or the glue above them (``chatseek_ingest.runtime``
for credentials and connected clients, ``chatseek_ingest.downloads`` for media fetching).
"""

from __future__ import annotations

from chatseek_ingest.telegram.chats import chat_record
from chatseek_ingest.telegram.client import (
    SESSIONS_DIR,
    TelegramClientLike,
    open_client,
    read_session,
    session_path,
)
from chatseek_ingest.telegram.fetch import (
    UNAVAILABLE_ERRORS,
    FetchArgs,
    Fetched,
    collect,
    fetch_messages,
    unavailable_reason,
)
from chatseek_ingest.telegram.flood import FLOOD_SLEEP_THRESHOLD_S, FloodNotice, FloodPolicy
from chatseek_ingest.telegram.messages import GENERAL_TOPIC_ID, to_records
from chatseek_ingest.telegram.peers import (
    CHANNEL_ID_OFFSET,
    folder_title,
    get_folders,
    get_linked_chat,
    input_peer,
)

__all__ = [
    "CHANNEL_ID_OFFSET",
    "FLOOD_SLEEP_THRESHOLD_S",
    "GENERAL_TOPIC_ID",
    "SESSIONS_DIR",
    "UNAVAILABLE_ERRORS",
    "FetchArgs",
    "Fetched",
    "FloodNotice",
    "FloodPolicy",
    "TelegramClientLike",
    "chat_record",
    "collect",
    "fetch_messages",
    "folder_title",
    "get_folders",
    "get_linked_chat",
    "input_peer",
    "open_client",
    "read_session",
    "session_path",
    "to_records",
    "unavailable_reason",
]
