"""The archive tools: the indexed sources, the account's chats to add, and sync.

Each calls the gateway's archive service. Adding and removing a source change the config and
the stored history: those calls are not idempotent, so never retried.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field

from chatseek_gateway.mcp.tools.arguments import (
    MAX_BOUND_CHARS,
    MAX_SPEC_CHARS,
    ChatSpecs,
    bounded_int,
    checked_text,
    float_range,
    int_range,
    specs,
)
from chatseek_gateway.mcp.tools.calls import WRITE_TIMEOUT_S, GatewayCalls, tool

__all__ = ["ArchiveTools"]

DEFAULT_DIALOGS = 20
MAX_DIALOGS = 100
MAX_DIALOG_QUERY_CHARS = 256
DEFAULT_SYNC_BUDGET_S = 45.0
MAX_SYNC_BUDGET_S = 600.0


class ArchiveTools:
    """``sources``, ``dialogs``, ``sources_add``, ``sources_remove`` and ``sync``.

    Args:
        calls: the gateway calls.
    """

    TOOLS: ClassVar[tuple[str, ...]] = (
        "sources",
        "dialogs",
        "sources_add",
        "sources_remove",
        "sync",
    )

    def __init__(self, calls: GatewayCalls) -> None:
        self._calls = calls

    @tool
    async def sources(self) -> dict[str, Any]:
        """The sources the index holds chats under, each with its chats and their last sync.

        Configured sources first, then any other source still in the store (imports).
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        return await self._calls.document(
            lambda g: g.archive.Sources, pb.SourcesRequest(action="ls")
        )

    @tool
    async def dialogs(
        self,
        query: Annotated[str, Field(description="part of a chat or folder name, or @username")],
        limit: Annotated[int, bounded_int("number of matches", 1, MAX_DIALOGS)] = DEFAULT_DIALOGS,
    ) -> dict[str, Any]:
        """Chats and folders of the Telegram account matching a name (for sources_add).

        Each match has kind, id, title, type, username, folders, score and target: the string
        to pass to sources_add.
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.DialogsRequest(
            query=checked_text("query", query, MAX_DIALOG_QUERY_CHARS),
            limit=int_range("limit", limit, 1, MAX_DIALOGS),
        )
        return await self._calls.document(lambda g: g.archive.Dialogs, request)

    @tool
    async def sources_add(
        self,
        target: Annotated[
            str, Field(description="from dialogs: chat id, @username, t.me link or folder:<name>")
        ],
        since: Annotated[
            str | None, Field(description="skip history before this day (YYYY-MM-DD)")
        ] = None,
        comments: Annotated[
            bool, Field(description="channels: also index their discussion threads")
        ] = False,
    ) -> dict[str, Any]:
        """Add a chat or folder to the indexed sources (saved to the config); then run sync."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.SourcesRequest(
            action="add",
            target=checked_text("target", target, MAX_SPEC_CHARS),
            since=checked_text("since", since, MAX_BOUND_CHARS, required=False),
            comments=comments,
        )
        return await self._calls.document(
            lambda g: g.archive.Sources, request, timeout=WRITE_TIMEOUT_S, idempotent=False
        )

    @tool
    async def sources_remove(
        self,
        target: Annotated[
            str,
            Field(description="a source id from sources, folder name, chat id, @username or title"),
        ],
    ) -> dict[str, Any]:
        """Remove a source and delete its chats' stored history from every index.

        Refused while a sync runs. Only on the user's explicit request.
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.SourcesRequest(
            action="rm", target=checked_text("target", target, MAX_SPEC_CHARS)
        )
        return await self._calls.document(
            lambda g: g.archive.Sources, request, timeout=WRITE_TIMEOUT_S, idempotent=False
        )

    @tool
    async def sync(
        self,
        budget_s: Annotated[
            float,
            Field(
                description="seconds the run may take; it stops between batches",
                json_schema_extra={"minimum": 1, "maximum": MAX_SYNC_BUDGET_S},
            ),
        ] = DEFAULT_SYNC_BUDGET_S,
        chats: ChatSpecs = None,
    ) -> dict[str, Any]:
        """Fetch new messages of the sources from Telegram, within a time budget.

        Returns the report: new, updated, deleted, chats_done, chats_remaining, unavailable,
        stopped_by (budget or flood_wait) and warnings. Run again to continue.
        """
        return await self._calls.sync(
            float_range("budget_s", budget_s, 1, MAX_SYNC_BUDGET_S), specs("chats", chats)
        )
