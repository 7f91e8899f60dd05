"""What the lexical servicer is given: ``lexical.db`` with its producers attached (one pool of
connections that write, one that only answers queries), the loop, and the threads that score a
relevance page's matches in parts."""

from __future__ import annotations

from dataclasses import dataclass

from chatseek_core import db
from chatseek_core.consumer import FeedLoop
from chatseek_core.settings import Settings
from chatseek_lexical.query.split import Splitter

__all__ = ["Deps", "PRODUCERS"]

PRODUCERS = ("ingest", "unitize")


@dataclass
class Deps:
    """What the lexical servicer needs.

    ``pool`` writes: the feed loop's thread and a reindex, each with the house page cache.
    ``reads`` answers queries, read-only, with a small page cache on each query thread.
    """

    settings: Settings
    pool: db.ThreadConnections
    reads: db.ThreadConnections
    loop: FeedLoop
    splitter: Splitter

    def ready_to_index(self) -> bool:
        """Whether both producers' files exist and are attached on this thread."""
        return all(self.reads.attached(name) for name in PRODUCERS)
