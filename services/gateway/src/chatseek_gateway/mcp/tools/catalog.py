"""The catalog of MCP tools: their names in listing order, CLI twins and hints.

``CLI_TWINS`` names the CLI command behind each tool (its order is the order ``tools/list``
answers in) and ``CLI_ONLY`` the commands deliberately left without one. The hint sets say
which tools change nothing the user chose, which delete data and which reach Telegram.
"""

from __future__ import annotations

__all__ = ["CLI_ONLY", "CLI_TWINS", "DESTRUCTIVE", "OPEN_WORLD", "READ_ONLY", "TOOL_NAMES"]

# Tool name → the CLI command (subcommand path in ``chatseek_gateway.cli.build_parser()``).
CLI_TWINS: dict[str, tuple[str, ...]] = {
    "search": ("search",),
    "messages_search": ("messages", "search"),
    "messages_stats": ("messages", "stats"),
    "conversations_search": ("conversations", "search"),
    "conversations_list": ("conversations", "list"),
    "conversations_show": ("conversations", "show"),
    "message_links": ("messages", "links"),
    "thread": ("thread",),
    "context": ("context",),
    "evidence": ("evidence",),
    "status": ("status",),
    "sources": ("sources", "ls"),
    "dialogs": ("dialogs",),
    "sources_add": ("sources", "add"),
    "sources_remove": ("sources", "rm"),
    "sync": ("sync",),
    "link_batches_status": ("conversations", "batches", "status"),
    "link_batch_get": ("conversations", "batches", "get"),
    "link_batch_answer": ("conversations", "batches", "answer"),
}
TOOL_NAMES = tuple(CLI_TWINS)
# Deliberately terminal-only: they read local paths, run long network passes or delete history.
CLI_ONLY: tuple[tuple[str, ...], ...] = (
    ("import",),
    ("extract",),
    ("prune-deleted",),
    ("sources", "prune"),
    ("reindex",),
)
# Tools that change nothing the user chose (the read-only hint): search's refresh only fetches
# new messages of chats already synced. The rest write config, delete data or store answers.
READ_ONLY = frozenset(TOOL_NAMES) - {
    "sources_add",
    "sources_remove",
    "sync",
    "link_batch_answer",
}
DESTRUCTIVE = frozenset({"sources_remove"})
# Tools that reach Telegram.
OPEN_WORLD = frozenset({"search", "dialogs", "sources_add", "sync"})
