"""Deep links of strict-search items: the shared rules of ``chatseek_core.links``.

Re-exported here with the constants the compiler needs, so the query package names one place.
"""

from __future__ import annotations

from chatseek_core.links import CHANNEL_ID_OFFSET, deep_link, locator

__all__ = ["GENERAL_TOPIC", "MARKED_CHANNEL_BASE", "deep_link", "locator"]

MARKED_CHANNEL_BASE = CHANNEL_ID_OFFSET
GENERAL_TOPIC = 1
