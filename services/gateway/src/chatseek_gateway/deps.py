"""What the gateway servicers are given: the settings and the stubs to every peer."""

from __future__ import annotations

from dataclasses import dataclass

from chatseek_core.settings import Settings
from chatseek_gateway.peers import Peers

__all__ = ["Deps"]


@dataclass
class Deps:
    """What the gateway servicer needs."""

    settings: Settings
    peers: Peers
