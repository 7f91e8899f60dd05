"""Turning a request's chat specs, source and account into the list filter every list applies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chatseek.common.v1 import common_pb2
from chatseek.ingest.v1 import ingest_service_pb2, ingest_service_pb2_grpc
from chatseek_core.client import call
from chatseek_core.errors import InvalidArgument
from chatseek_fusion.hybrid import ListFilter

__all__ = ["resolve_one", "resolve_scope"]

SCOPE_TIMEOUT_S = 10.0


async def resolve_scope(
    ingest: ingest_service_pb2_grpc.IngestServiceAsyncStub,
    *,
    chats: Sequence[str],
    source: int,
    account: str,
    default_account: str,
    since: int,
    until: int,
    kinds: Sequence[str],
) -> tuple[ListFilter, list[dict[str, Any]]]:
    """Resolve chat specs through ingest; returns the filter and the coverage of searched chats.

    ``source`` is a ``common.v1.Source``: unspecified or active searches ``account`` (or the
    default one), all every account unless ``account`` names one.

    Raises:
        InvalidArgument: a source number the enum does not define.
        ChatNotFound / AmbiguousName: from ingest, for specs that name nothing.
    """
    if source not in common_pb2.Source.values():
        raise InvalidArgument(f"source {source} is not active or all", metadata={"field": "source"})
    every_account = source == common_pb2.SOURCE_ALL and not account
    accounts = ["*"] if every_account else [account or default_account]
    reply = await call(
        ingest.ListChats,
        ingest_service_pb2.ListChatsRequest(accounts=accounts, specs=list(chats)),
        timeout=SCOPE_TIMEOUT_S,
        idempotent=True,
        peer="ingest",
    )
    coverage = [
        {
            "account": c.chat.account,
            "id": c.chat.chat_id,
            "title": c.chat.title,
            "type": c.chat.type,
            "history_complete": c.history_complete,
            "last_fetched_at": c.last_fetched_at or None,
            "message_count": c.message_count,
        }
        for c in reply.chats
    ]
    flt = ListFilter(
        accounts=() if every_account else (account or default_account,),
        chat_ids=tuple(c.chat.chat_id for c in reply.chats) if chats else (),
        since=since,
        until=until,
        kinds=tuple(kinds),
    )
    return flt, coverage


async def resolve_one(
    ingest: ingest_service_pb2_grpc.IngestServiceAsyncStub, spec: str, account: str
) -> tuple[str, int]:
    """The ``(account, chat_id)`` a reader's chat spec names; it must name exactly one chat.

    Raises:
        InvalidArgument: the spec is empty.
        ChatNotFound / AmbiguousName: from ingest.
    """
    if not spec.strip():
        raise InvalidArgument("name a chat", metadata={"field": "chat"})
    reply = await call(
        ingest.ListChats,
        ingest_service_pb2.ListChatsRequest(accounts=[account], specs=[spec], exactly_one=True),
        timeout=SCOPE_TIMEOUT_S,
        idempotent=True,
        peer="ingest",
    )
    chat = reply.chats[0].chat
    return chat.account, int(chat.chat_id)
