"""What the unitize servicer and its feed loop are given: ``unitize.db``, nudger, loop."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from chatseek_core import db
from chatseek_core.consumer import FeedLoop, Nudger
from chatseek_core.settings import Settings

__all__ = ["Deps"]


@dataclass
class Deps:
    """What the unitize servicer and its feed loop need."""

    settings: Settings
    pool: db.ThreadConnections
    nudger: Nudger
    loop: FeedLoop | None = field(default=None)
    stepping: threading.Lock = field(default_factory=threading.Lock)
