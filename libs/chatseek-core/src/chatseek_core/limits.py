"""The request limits the gateway, fusion and lexical all enforce, stated once.

Invariants:
* Each limit has one value here; a service that checks it imports it, so the MCP tools, the
  gateway and the service behind them refuse the same requests.
* Two sizes of one kind that differ on purpose keep their own names: ``MAX_K`` bounds the hits
  of a hybrid search, ``MAX_CONVERSATIONS_FOUND`` the (larger, evidence-carrying) conversations
  of a conversation search.
"""

from __future__ import annotations

__all__ = ["DEFAULT_AROUND", "MAX_CONVERSATIONS_FOUND", "MAX_K", "MAX_QUERY_BYTES", "SEARCH_MODES"]

MAX_QUERY_BYTES = 8192
"""The strict query language's budget (UTF-8 bytes); a longer question is no question either."""
SEARCH_MODES = ("hybrid", "lexical", "dense")
"""The hybrid search modes: both lists fused, words only, meaning only."""
MAX_K = 100
"""The most hits one hybrid search returns."""
MAX_CONVERSATIONS_FOUND = 50
"""The most conversations one conversation search returns."""
DEFAULT_AROUND = 15
"""Messages shown before and after the anchor of a context read, unless asked otherwise."""
