"""What the ingest servicer is given: ``ingest.db``, the nudger and the Telegram factory.

The Telegram client is built by ``Deps.telegram_factory`` (the real Telethon client by
default; tests inject ``FakeTelegram`` there, at the Telethon boundary, and nowhere else).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chatseek_core import db
from chatseek_core.consumer import Nudger
from chatseek_core.settings import Settings
from chatseek_ingest.auth import PendingLogins
from chatseek_ingest.runtime import TelegramFactory
from chatseek_ingest.telegram import open_client

__all__ = ["Deps"]


@dataclass
class Deps:
    """What the ingest servicer needs.

    Attributes:
        telegram_factory: builds an unconnected Telegram client from (session string, api id,
            api hash); the session is read from the account's session file by the service.
        logins: logins waiting for their code (in memory only).
    """

    settings: Settings
    pool: db.ThreadConnections
    nudger: Nudger
    telegram_factory: TelegramFactory = open_client
    logins: PendingLogins = field(default_factory=PendingLogins)
