"""The gateway's servicers, one per gateway service, all served on one server and port.

``SearchServicer`` (fusion and lexical), ``ConversationsServicer`` (unitize), ``ArchiveServicer``
(ingest) and ``OpsServicer`` (the whole stack): each is thin, holds only the ``Deps`` it is
given, and shares with the others no state, only the helpers in ``common``.
"""

from __future__ import annotations

from chatseek_gateway.service.archive import ArchiveServicer
from chatseek_gateway.service.conversations import ConversationsServicer
from chatseek_gateway.service.ops import OpsServicer
from chatseek_gateway.service.search import SearchServicer

__all__ = ["ArchiveServicer", "ConversationsServicer", "OpsServicer", "SearchServicer"]
