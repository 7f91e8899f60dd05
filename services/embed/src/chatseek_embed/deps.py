"""What the embed servicer is given: the loaded models, or why each one did not load."""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass

from chatseek_core.errors import ChatseekError
from chatseek_core.settings import Settings
from chatseek_embed.contract import Embedder, Reranker

__all__ = ["Deps"]


@dataclass
class Deps:
    """What the embed servicer needs.

    ``inference`` is the one thread that loaded the models and runs every call of theirs: torch
    gives each thread that calls it a team of OpenMP workers of its own, and two teams on the
    same cores slow each other (a query took 21 ms instead of 8 once a second thread had used
    the model, even from the first; ``bench/PROFILES.md``, "The embed service")."""

    settings: Settings
    embedder: Embedder | None
    reranker: Reranker | None
    backend: str
    inference: Executor
    reranker_error: str = ""
    embedder_error: ChatseekError | None = None
