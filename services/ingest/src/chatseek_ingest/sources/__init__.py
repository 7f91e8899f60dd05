"""Sources: resolving what a user names into Telegram chats or folders, and keeping them.

Owns the ``sources`` rows of ``ingest.db`` and which chats belong to which source: ``resolve``
(targets), ``dialogs`` (finding chats), ``catalog`` (adding, listing), ``removal`` and
``pruning``. Invariants: an imported chat is never taken over by ``add_source`` nor offered by
``prune_sources``; chats are deleted only through ``store.delete_chat`` under the sync lock, so
everything derived follows through the feed; ``prune_sources`` deletes nothing when a folder
source fails to resolve, and keeps a channel's discussion group.
"""

from __future__ import annotations

from chatseek_ingest.sources.catalog import AddedSource, SourceInfo, add_source, list_sources
from chatseek_ingest.sources.dialogs import DIALOGS_LIMIT, DialogMatch, dialogs
from chatseek_ingest.sources.pruning import PruneSourcesReport, prune_sources
from chatseek_ingest.sources.removal import RemovedSource, remove_source
from chatseek_ingest.sources.resolve import Resolved, ResolvedChat, resolve_target

__all__ = [
    "DIALOGS_LIMIT",
    "AddedSource",
    "DialogMatch",
    "PruneSourcesReport",
    "RemovedSource",
    "Resolved",
    "ResolvedChat",
    "SourceInfo",
    "add_source",
    "dialogs",
    "list_sources",
    "prune_sources",
    "remove_source",
    "resolve_target",
]
