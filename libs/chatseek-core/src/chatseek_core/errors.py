"""The one exception hierarchy of chatseek, and its mapping to gRPC status codes.

Every expected failure is a ``ChatseekError`` subclass carrying a gRPC code and a stable
UPPER_SNAKE ``reason``. Servers send it as ``google.rpc.Status`` with an ``ErrorInfo`` detail
(domain ``<svc>.chatseek``) and clients decode it back into the same class by reason.
Anything that is not a ``ChatseekError`` is a bug and travels as INTERNAL.

    ChatseekError                       INTERNAL            INTERNAL
    ├── InvalidArgument                 INVALID_ARGUMENT    INVALID_ARGUMENT
    │   ├── QuerySyntaxError            INVALID_ARGUMENT    SYNTAX_ERROR
    │   ├── UnknownField                INVALID_ARGUMENT    UNKNOWN_FIELD
    │   ├── UnsupportedField            INVALID_ARGUMENT    UNSUPPORTED_FIELD
    │   ├── InvalidValue                INVALID_ARGUMENT    INVALID_VALUE
    │   ├── UnsupportedOperator         INVALID_ARGUMENT    UNSUPPORTED_OPERATOR
    │   ├── UnsupportedRegex            INVALID_ARGUMENT    UNSUPPORTED_REGEX
    │   ├── AmbiguousName               INVALID_ARGUMENT    AMBIGUOUS_NAME
    │   ├── QueryLimit                  INVALID_ARGUMENT    QUERY_LIMIT
    │   └── MalformedExport             INVALID_ARGUMENT    MALFORMED_EXPORT
    ├── NotFound                        NOT_FOUND           NOT_FOUND
    │   ├── ChatNotFound                NOT_FOUND           CHAT_NOT_FOUND
    │   ├── MessageNotFound             NOT_FOUND           MESSAGE_NOT_FOUND
    │   └── ModelNotFound               NOT_FOUND           MODEL_NOT_FOUND
    ├── AlreadyExists                   ALREADY_EXISTS      ALREADY_EXISTS
    ├── FailedPrecondition              FAILED_PRECONDITION FAILED_PRECONDITION
    │   ├── SchemaTooNew                FAILED_PRECONDITION SCHEMA_TOO_NEW
    │   ├── EmbeddingSpaceMismatch      FAILED_PRECONDITION EMBEDDING_SPACE_MISMATCH
    │   ├── IndexNotReady               FAILED_PRECONDITION INDEX_NOT_READY
    │   ├── ExtensionsUnsupported       FAILED_PRECONDITION EXTENSIONS_UNSUPPORTED
    │   ├── NotAuthorized               FAILED_PRECONDITION NOT_AUTHORIZED
    │   │   └── WrongAccount            FAILED_PRECONDITION WRONG_ACCOUNT
    │   ├── SyncRunning                 FAILED_PRECONDITION SYNC_RUNNING
    │   └── ConfirmationRequired        FAILED_PRECONDITION CONFIRMATION_REQUIRED
    ├── Unavailable                     UNAVAILABLE         UNAVAILABLE
    │   ├── DatabaseBusy                UNAVAILABLE         DATABASE_BUSY
    │   ├── IndexBehind                 UNAVAILABLE         INDEX_BEHIND
    │   ├── ModelUnavailable            UNAVAILABLE         MODEL_UNAVAILABLE
    │   └── StorageError                UNAVAILABLE         STORAGE_ERROR
    ├── ResourceExhausted               RESOURCE_EXHAUSTED  RESOURCE_EXHAUSTED
    │   ├── FloodWait                   RESOURCE_EXHAUSTED  FLOOD_WAIT
    │   └── Overloaded                  RESOURCE_EXHAUSTED  OVERLOADED
    ├── DeadlineExceeded                DEADLINE_EXCEEDED   DEADLINE_EXCEEDED
    └── Unauthenticated                 UNAUTHENTICATED     UNAUTHENTICATED
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import grpc

__all__ = [
    "AlreadyExists",
    "AmbiguousName",
    "ChatNotFound",
    "ChatseekError",
    "ConfirmationRequired",
    "DatabaseBusy",
    "DeadlineExceeded",
    "EmbeddingSpaceMismatch",
    "ExtensionsUnsupported",
    "FailedPrecondition",
    "FloodWait",
    "IndexBehind",
    "IndexNotReady",
    "InvalidArgument",
    "InvalidValue",
    "MalformedExport",
    "MessageNotFound",
    "ModelNotFound",
    "ModelUnavailable",
    "NotAuthorized",
    "NotFound",
    "Overloaded",
    "QueryLimit",
    "QuerySyntaxError",
    "ResourceExhausted",
    "SchemaTooNew",
    "StorageError",
    "SyncRunning",
    "Unauthenticated",
    "Unavailable",
    "UnknownField",
    "UnsupportedField",
    "UnsupportedOperator",
    "UnsupportedRegex",
    "WrongAccount",
    "error_class_for",
]


class _StatusCode:
    """A class's gRPC status code, named here and looked up on first read.

    Importing the errors then does not import grpc (about 22 MiB), which a process that only
    raises them, such as ingest's export reader, never needs.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> grpc.StatusCode:
        import grpc

        return grpc.StatusCode[self.name]


class ChatseekError(Exception):
    """An expected failure with a stable reason, a user-facing hint and structured metadata.

    Args:
        message: what went wrong, in one sentence, without internals.
        hint: what the user should do about it.
        metadata: string key/values for machines (field names, spans, budget names).
        candidates: names to choose from, for ambiguity and not-found errors.
        retry_after_s: seconds after which a retry may succeed (overload, flood waits).
    """

    code = _StatusCode("INTERNAL")
    reason: ClassVar[str] = "INTERNAL"

    def __init__(
        self,
        message: str,
        *,
        hint: str = "",
        metadata: Mapping[str, str] | None = None,
        candidates: list[str] | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.metadata: dict[str, str] = dict(metadata or {})
        self.candidates: list[str] = list(candidates or [])
        self.retry_after_s = retry_after_s

    def to_dict(self) -> dict[str, object]:
        """The MCP / JSON shape of this error: ``{"error", "reason", "hint", ...}``."""
        out: dict[str, object] = {"error": self.message, "reason": self.reason, "hint": self.hint}
        if self.candidates:
            out["candidates"] = self.candidates
        if self.metadata:
            out["details"] = dict(self.metadata)
        if self.retry_after_s is not None:
            out["retry_after_s"] = self.retry_after_s
        return out


# --- invalid argument ---


class InvalidArgument(ChatseekError):
    code = _StatusCode("INVALID_ARGUMENT")
    reason = "INVALID_ARGUMENT"


class QuerySyntaxError(InvalidArgument):
    reason = "SYNTAX_ERROR"


class UnknownField(InvalidArgument):
    reason = "UNKNOWN_FIELD"


class UnsupportedField(InvalidArgument):
    reason = "UNSUPPORTED_FIELD"


class InvalidValue(InvalidArgument):
    reason = "INVALID_VALUE"


class UnsupportedOperator(InvalidArgument):
    reason = "UNSUPPORTED_OPERATOR"


class UnsupportedRegex(InvalidArgument):
    reason = "UNSUPPORTED_REGEX"


class AmbiguousName(InvalidArgument):
    reason = "AMBIGUOUS_NAME"


class QueryLimit(InvalidArgument):
    reason = "QUERY_LIMIT"


class MalformedExport(InvalidArgument):
    reason = "MALFORMED_EXPORT"


# --- not found ---


class NotFound(ChatseekError):
    code = _StatusCode("NOT_FOUND")
    reason = "NOT_FOUND"


class ChatNotFound(NotFound):
    reason = "CHAT_NOT_FOUND"


class MessageNotFound(NotFound):
    reason = "MESSAGE_NOT_FOUND"


class ModelNotFound(NotFound):
    reason = "MODEL_NOT_FOUND"


class AlreadyExists(ChatseekError):
    code = _StatusCode("ALREADY_EXISTS")
    reason = "ALREADY_EXISTS"


# --- failed precondition ---


class FailedPrecondition(ChatseekError):
    code = _StatusCode("FAILED_PRECONDITION")
    reason = "FAILED_PRECONDITION"


class SchemaTooNew(FailedPrecondition):
    reason = "SCHEMA_TOO_NEW"


class EmbeddingSpaceMismatch(FailedPrecondition):
    reason = "EMBEDDING_SPACE_MISMATCH"


class IndexNotReady(FailedPrecondition):
    reason = "INDEX_NOT_READY"


class ExtensionsUnsupported(FailedPrecondition):
    reason = "EXTENSIONS_UNSUPPORTED"


class NotAuthorized(FailedPrecondition):
    reason = "NOT_AUTHORIZED"


class WrongAccount(NotAuthorized):
    """A session file signs in as another Telegram user than the account it is filed under."""

    reason = "WRONG_ACCOUNT"


class SyncRunning(FailedPrecondition):
    reason = "SYNC_RUNNING"


class ConfirmationRequired(FailedPrecondition):
    reason = "CONFIRMATION_REQUIRED"


# --- unavailable / exhausted ---


class Unavailable(ChatseekError):
    code = _StatusCode("UNAVAILABLE")
    reason = "UNAVAILABLE"


class DatabaseBusy(Unavailable):
    reason = "DATABASE_BUSY"


class IndexBehind(Unavailable):
    """An index is catching up with new data (an import is running): transient, retry later."""

    reason = "INDEX_BEHIND"


class ModelUnavailable(Unavailable):
    reason = "MODEL_UNAVAILABLE"


class StorageError(Unavailable):
    reason = "STORAGE_ERROR"


class ResourceExhausted(ChatseekError):
    code = _StatusCode("RESOURCE_EXHAUSTED")
    reason = "RESOURCE_EXHAUSTED"


class FloodWait(ResourceExhausted):
    reason = "FLOOD_WAIT"


class Overloaded(ResourceExhausted):
    reason = "OVERLOADED"


class DeadlineExceeded(ChatseekError):
    code = _StatusCode("DEADLINE_EXCEEDED")
    reason = "DEADLINE_EXCEEDED"


class Unauthenticated(ChatseekError):
    code = _StatusCode("UNAUTHENTICATED")
    reason = "UNAUTHENTICATED"


def _all_subclasses(cls: type[ChatseekError]) -> list[type[ChatseekError]]:
    out = [cls]
    for sub in cls.__subclasses__():
        out.extend(_all_subclasses(sub))
    return out


def error_class_for(reason: str, code: grpc.StatusCode) -> type[ChatseekError]:
    """The class a client should raise for a decoded ``(reason, code)`` pair.

    An unknown reason falls back to the base class of its status code, so new server-side
    reasons still decode into something a client can catch.
    """
    for cls in _all_subclasses(ChatseekError):
        if cls.reason == reason:
            return cls
    for cls in _all_subclasses(ChatseekError):
        if cls.code == code and cls.__base__ is ChatseekError:
            return cls
    return ChatseekError
