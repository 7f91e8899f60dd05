"""The ``readers`` commands of the CLI."""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add these commands to the top-level parser."""
