"""The comments of a channel's posts, fetched from its discussion group along with the posts.

A batch of posts may be committed only up to the first post whose thread was not fetched (a
budget, flood wait or refusal stopped it); a re-read fetches at most ``REREAD_THREADS`` threads
whole, so that edits and deletions in them are seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from telethon import utils
from telethon.tl import types

from chatseek_core.aio import to_thread
from chatseek_ingest.sync.chat import SyncChat
from chatseek_ingest.sync.context import BudgetSpent, RunContext
from chatseek_ingest.sync.writes import (
    Discussion,
    Thread,
    link_discussion,
    stored_threads,
    unlink,
)
from chatseek_ingest.telegram import chat_record, get_linked_chat, to_records, unavailable_reason

__all__ = ["REREAD_THREADS", "Comments"]

# A re-read fetches whole comment threads of at most this many of its newest posts with
# comments: one request each, every run.
REREAD_THREADS = 20


class Comments:
    """Fetches comments for one run; each channel's discussion group is looked up once."""

    def __init__(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._discussions: dict[int, Discussion | None] = {}

    async def fetch(
        self, chat: SyncChat, peer: Any, messages: Sequence[Any], *, whole: bool = False
    ) -> tuple[list[Thread], int, BaseException | None]:
        """Fetch the comments of ``messages`` (posts) that Telegram reports comments on.

        By default only the comments after the newest stored one, and only of threads whose
        reply count grew; with ``whole`` (a re-read) every thread of the posts that have or
        had comments, whole, so that edits and deletions in them are seen.

        Returns the comments per post, how many of ``messages`` may be committed (every one
        whose thread was fetched), and the stop (budget, flood wait, refusal) that cut it short.
        """
        if not chat.comments or chat.type != "channel":
            return [], len(messages), None
        candidates = [
            (i, m)
            for i, m in enumerate(messages)
            if isinstance(m, types.Message) and m.replies is not None and m.replies.comments
        ]
        if whole:
            candidates = candidates[:REREAD_THREADS]
        if not candidates:
            return [], len(messages), None
        disc = await self._discussion(chat, peer)
        if disc is None:
            return [], len(messages), None
        stored = await to_thread(stored_threads, self._ctx, disc.record.chat_id, chat.chat_id)
        out: list[Thread] = []
        fetched = 0
        for index, post in candidates:
            count, newest = stored.get(post.id, (0, 0))
            if whole:
                if post.replies.replies <= 0 and count == 0:
                    continue
                newest = 0
            elif post.replies.replies <= count:
                continue
            if fetched and self._ctx.over_budget():
                return out, index, BudgetSpent()
            thread = await self._ctx.fetch(
                peer, None, reverse=True, reply_to=post.id, min_id=newest
            )
            fetched += 1
            group_id = disc.record.chat_id
            records = [
                to_records(m, disc.record)
                for m in thread.messages
                if utils.get_peer_id(m.peer_id) == group_id
            ]
            out.append(Thread(post.id, records, whole=whole and thread.stop is None))
            if thread.stop is not None:
                return out, index, thread.stop
        return out, len(messages), None

    async def _discussion(self, chat: SyncChat, peer: Any) -> Discussion | None:
        if chat.chat_id in self._discussions:
            return self._discussions[chat.chat_id]
        found: Discussion | None = None
        try:
            linked = await self._ctx.policy.call(lambda: get_linked_chat(self._ctx.client, peer))
        except Exception as exc:
            reason = unavailable_reason(exc)
            if reason is None:
                raise
            linked = None
            self._ctx.report.warnings.append(
                f"the discussion group of {chat.title!r} could not be read ({reason}); "
                "its comments were skipped"
            )
        if isinstance(linked, types.Channel):
            group = chat_record(linked)
            found = await to_thread(link_discussion, self._ctx, chat, group, linked.access_hash)
        elif linked is not None:
            self._ctx.report.warnings.append(
                f"the discussion group of {chat.title!r} cannot be opened by this account; "
                "its comments were skipped"
            )
        elif chat.linked_chat_id is not None:
            await to_thread(unlink, self._ctx, chat)
        self._discussions[chat.chat_id] = found
        return found
