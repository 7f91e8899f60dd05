"""What the embed servicer is given: the loaded models, or why each one did not load."""

from __future__ import annotations

from dataclasses import dataclass

from chatseek_core.errors import ChatseekError
from chatseek_core.settings import Settings
from chatseek_embed.contract import Embedder, Reranker

__all__ = ["Deps"]


@dataclass
class Deps:
    """What the embed servicer needs."""

    settings: Settings
    embedder: Embedder | None
    reranker: Reranker | None
    backend: str
    reranker_error: str = ""
    embedder_error: ChatseekError | None = None
