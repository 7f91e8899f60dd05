"""The one text form of an instant.

Invariants:
* ``iso_utc`` is how every response writes unix seconds: ``2026-03-29T10:00:00Z``.
"""

from __future__ import annotations

import time

__all__ = ["iso_utc"]


def iso_utc(ts: int) -> str:
    """``2026-03-29T10:00:00Z`` for unix seconds ``ts``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
