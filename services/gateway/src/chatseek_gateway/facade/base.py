"""What every facade mixin shares: the dependencies and small request helpers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc

if TYPE_CHECKING:
    from chatseek_gateway.server import Deps

__all__ = ["Ctx", "FacadeBase"]

Ctx = grpc.aio.ServicerContext[Any, Any]


class FacadeBase:
    """Holds the gateway's dependencies for the mixins."""

    _deps: Deps

    def _account(self, account: str) -> str:
        """The request's account, or the active one."""
        return account or self._deps.settings.account
