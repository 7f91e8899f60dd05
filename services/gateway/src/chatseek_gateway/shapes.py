"""The shapes gateway replies share, for typing calls through the generated stubs.

Most gateway responses carry one typed ``result``; the streamed
responses of long operations carry one ``OperationEvent`` as ``event``. Light on purpose: the CLI
imports it at start-up, so protobuf is imported only for type checking.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from google.protobuf.message import Message

    from chatseek.common.v1 import common_pb2

__all__ = ["Answered", "Evented"]


class Answered(Protocol):
    """A response that carries its typed ``result``."""

    @property
    def result(self) -> Message: ...


class Evented(Protocol):
    """A streamed response of a long operation: it carries one ``OperationEvent``."""

    @property
    def event(self) -> common_pb2.OperationEvent: ...
