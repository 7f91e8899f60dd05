"""The shapes gateway replies share, for typing calls through the generated stubs.

Most gateway responses carry one ``result``, typed or a JSON ``Document``; the streamed
responses of long operations carry one ``OperationEvent`` as ``event``. Light on purpose: the CLI
imports it at start-up, so protobuf is imported only for type checking.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from google.protobuf.message import Message

    from chatseek.common.v1 import common_pb2

__all__ = ["Documented", "Evented"]


class Documented(Protocol):
    """A response that carries its ``result``: a typed message, or a JSON ``Document`` where
    the RPC is not typed yet."""

    @property
    def result(self) -> Message: ...


class Evented(Protocol):
    """A streamed response of a long operation: it carries one ``OperationEvent``."""

    @property
    def event(self) -> common_pb2.OperationEvent: ...
