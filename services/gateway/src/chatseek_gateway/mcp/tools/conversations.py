"""The conversation tools: find and read reconstructed conversations, and help link them.

Conversation search and the readers (thread, context, evidence) call the gateway's search
service; listing, showing, a message's links and the agent link batches its conversations
service. Conversation ids belong to a chat's current build: a rebuild renumbers them.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field

from chatseek_core.limits import DEFAULT_AROUND, MAX_CONVERSATIONS_FOUND
from chatseek_gateway.mcp.tools.arguments import (
    MAX_ANSWERS,
    MAX_BOUND_CHARS,
    MAX_QUESTION_CHARS,
    NEW_CONVERSATION,
    ChatSpec,
    ChatSpecs,
    MsgId,
    Question,
    Since,
    answers_json,
    bounded_int,
    checked_text,
    int_range,
    invalid,
    spec,
    specs,
)
from chatseek_gateway.mcp.tools.calls import (
    SEARCH_TIMEOUT_S,
    WRITE_TIMEOUT_S,
    GatewayCalls,
    tool,
)

__all__ = ["ConversationTools"]

DEFAULT_CONVERSATIONS = 10
DEFAULT_CONVERSATIONS_LISTED = 50
MAX_CONVERSATIONS_LISTED = 200
MAX_AROUND = 100
MAX_LOCATORS = 50
MAX_EVIDENCE_CHARS = 20000
DEFAULT_BATCH_SIZE = 20
MAX_BATCH_SIZE = 200


class ConversationTools:
    """Conversation search, list and show, a message's links, the readers and link batches.

    Args:
        calls: the gateway calls.
    """

    TOOLS: ClassVar[tuple[str, ...]] = (
        "conversations_search",
        "conversations_list",
        "conversations_show",
        "message_links",
        "thread",
        "context",
        "evidence",
        "link_batches_status",
        "link_batch_get",
        "link_batch_answer",
    )

    def __init__(self, calls: GatewayCalls) -> None:
        self._calls = calls

    # --- conversations ---

    @tool
    async def conversations_search(
        self,
        query: Question,
        chats: ChatSpecs = None,
        since: Since = None,
        limit: Annotated[
            int, bounded_int("number of conversations", 1, MAX_CONVERSATIONS_FOUND)
        ] = DEFAULT_CONVERSATIONS,
    ) -> dict[str, Any]:
        """Find reconstructed conversations (reply-graph discussions) that answer a question.

        Results follow hybrid search's ranking: each names its conversation (chat,
        conversation_id, first/last message, dates, size, participants), its evidence (up to
        three best-matching passages of one continuous stretch, each a unit's messages with
        their ids, none repeated), a link and `by`; a conversation whose passages lie apart or
        are separated by a better one of another conversation is listed again. Read a whole
        conversation with conversations_show.
        Conversation ids change when a chat is rebuilt: re-list rather than keep them.
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.SearchConversationsRequest(
            question=checked_text("query", query, MAX_QUESTION_CHARS),
            chats=specs("chats", chats),
            since=checked_text("since", since, MAX_BOUND_CHARS, required=False),
            k=int_range("limit", limit, 1, MAX_CONVERSATIONS_FOUND),
        )
        return await self._calls.document(
            lambda g: g.search.SearchConversations, request, timeout=SEARCH_TIMEOUT_S
        )

    @tool
    async def conversations_list(
        self,
        chat: ChatSpec,
        since: Since = None,
        limit: Annotated[
            int, bounded_int("number of conversations", 1, MAX_CONVERSATIONS_LISTED)
        ] = DEFAULT_CONVERSATIONS_LISTED,
    ) -> dict[str, Any]:
        """List the conversations of one chat's current build, newest first."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.ListConversationsRequest(
            chat=spec("chat", chat),
            since=checked_text("since", since, MAX_BOUND_CHARS, required=False),
            limit=int_range("limit", limit, 1, MAX_CONVERSATIONS_LISTED),
        )
        return await self._calls.document(lambda g: g.conversations.ListConversations, request)

    @tool
    async def conversations_show(
        self,
        chat: ChatSpec,
        conversation_id: Annotated[
            int, Field(description="from conversations_list/search of the current build")
        ],
    ) -> dict[str, Any]:
        """The messages of one conversation, in order, each with its link and parent."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.ShowConversationRequest(
            chat=spec("chat", chat), conversation_id=conversation_id
        )
        return await self._calls.document(lambda g: g.conversations.ShowConversation, request)

    @tool
    async def message_links(self, chat: ChatSpec, msg_id: MsgId) -> dict[str, Any]:
        """Why a message sits where it does: its candidate parents, the chosen one and the reason.

        Explains the graph (reply, agent answer, mention, same-author rule) with confidences.
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.MessageLinksRequest(chat=spec("chat", chat), msg_id=msg_id)
        return await self._calls.document(lambda g: g.conversations.MessageLinks, request)

    # --- readers ---

    @tool
    async def thread(self, chat: ChatSpec, msg_id: MsgId) -> dict[str, Any]:
        """The whole reply thread a message belongs to, root first.

        For a channel post: the post, then its comments from the discussion group (each message
        names its own chat_id; pass that one back to context).
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.ThreadRequest(chat=spec("chat", chat), msg_id=msg_id)
        return await self._calls.document(lambda g: g.search.Thread, request)

    @tool
    async def context(
        self,
        chat: ChatSpec,
        msg_id: MsgId,
        before: Annotated[int, bounded_int("messages before", 0, MAX_AROUND)] = DEFAULT_AROUND,
        after: Annotated[int, bounded_int("messages after", 0, MAX_AROUND)] = DEFAULT_AROUND,
    ) -> dict[str, Any]:
        """The messages around one, chronologically, within its thread or forum topic."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.ContextRequest(
            chat=spec("chat", chat),
            msg_id=msg_id,
            before=int_range("before", before, 0, MAX_AROUND),
            after=int_range("after", after, 0, MAX_AROUND),
        )
        return await self._calls.document(lambda g: g.search.Context, request)

    @tool
    async def evidence(
        self,
        locators: Annotated[
            list[str],
            Field(
                description="message locators tg:<account>/<chat>/<msg> from results",
                json_schema_extra={"minItems": 1, "maxItems": MAX_LOCATORS},
            ),
        ],
        max_chars: Annotated[
            int, bounded_int("text per message; 0 = default (4000)", 0, MAX_EVIDENCE_CHARS)
        ] = 0,
    ) -> dict[str, Any]:
        """Evidence packets for messages: chat, sender, date, text, link and a fingerprint.

        Says whether the text was truncated and whether the chat's history is complete.
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        if not locators:
            raise invalid("locators", "locators is empty", "pass the locators of the hits")
        request = pb.EvidenceRequest(
            locators=specs("locators", list(locators), MAX_LOCATORS),
            max_chars=int_range("max_chars", max_chars, 0, MAX_EVIDENCE_CHARS),
        )
        return await self._calls.document(lambda g: g.search.Evidence, request)

    # --- agent-assisted linking ---

    @tool
    async def link_batches_status(self, chat: ChatSpec) -> dict[str, Any]:
        """Agent-assisted linking in one chat: messages, answered, uncertain ones without an answer.

        Also counts stale answers (their message or parent changed since); the build id says
        which build the numbers describe.
        """
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.LinkBatchRequest(action="status", chat=spec("chat", chat))
        return await self._calls.document(lambda g: g.conversations.LinkBatch, request)

    @tool
    async def link_batch_get(
        self,
        chat: ChatSpec,
        size: Annotated[int, bounded_int("messages in the batch", 1, MAX_BATCH_SIZE)] = (
            DEFAULT_BATCH_SIZE
        ),
    ) -> dict[str, Any]:
        """A batch of messages the rules could not place, each with its candidate parents."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.LinkBatchRequest(
            action="get",
            chat=spec("chat", chat),
            size=int_range("size", size, 1, MAX_BATCH_SIZE),
        )
        return await self._calls.document(lambda g: g.conversations.LinkBatch, request)

    @tool
    async def link_batch_answer(
        self,
        chat: ChatSpec,
        answers: Annotated[
            list[dict[str, Any]],
            Field(
                description='one per message: {"msg_id": id, "parent": candidate id or "new"}',
                json_schema_extra={
                    "minItems": 1,
                    "maxItems": MAX_ANSWERS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "msg_id": {"type": "integer", "minimum": 1},
                            "parent": {
                                "anyOf": [
                                    {"type": "integer", "minimum": 1},
                                    {"const": NEW_CONVERSATION},
                                ]
                            },
                        },
                        "required": ["msg_id", "parent"],
                    },
                },
            ),
        ],
    ) -> dict[str, Any]:
        """Store the agent's parent choices for a batch; the next conversation build uses them."""
        from chatseek.gateway.v1 import gateway_service_pb2 as pb

        request = pb.LinkBatchRequest(
            action="answer", chat=spec("chat", chat), answer_json=answers_json(answers)
        )
        return await self._calls.document(
            lambda g: g.conversations.LinkBatch, request, timeout=WRITE_TIMEOUT_S, idempotent=False
        )
