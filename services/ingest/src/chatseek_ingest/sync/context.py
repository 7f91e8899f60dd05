"""What every step of one sync run shares: connection, client, budget, report and progress.

The client is called through the run's flood policy, whose deadline is the budget's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Unpack

from chatseek_core import db
from chatseek_ingest.sync.report import Progress, SyncProgress, SyncReport
from chatseek_ingest.telegram import (
    FetchArgs,
    Fetched,
    FloodPolicy,
    TelegramClientLike,
    collect,
    fetch_messages,
)

__all__ = ["BudgetSpent", "RunContext"]


class BudgetSpent(Exception):
    """The run's budget ran out between two batches."""


class RunContext:
    """The shared state of one sync run; ``current`` names the chat being fetched now."""

    def __init__(
        self,
        conn: db.Connection,
        client: TelegramClientLike,
        account: str,
        *,
        budget_s: float | None,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
        now: Callable[[], float],
        on_progress: Progress | None,
        flood_threshold_s: float,
    ) -> None:
        self.conn = conn
        self.client = client
        self.account = account
        self.clock = clock
        self.now = now
        self.on_progress = on_progress
        self.deadline = clock() + budget_s if budget_s and budget_s > 0 else None
        self.policy = FloodPolicy(
            threshold_s=flood_threshold_s,
            sleep=sleep,
            clock=clock,
            deadline=self.deadline,
            on_wait=self._waiting,
        )
        self.report = SyncReport()
        self.current = ""
        self.current_count = 0
        self.total = 0
        self.dialogs: list[Any] | None = None
        self.self_id: int | None = None

    def over_budget(self) -> bool:
        """Whether the budget has run out (never without one)."""
        return self.deadline is not None and self.clock() >= self.deadline

    def progress(self, note: str, *, wait_s: float = 0.0) -> None:
        """Tell ``on_progress`` where the run stands, with ``note``."""
        if self.on_progress is not None:
            self.on_progress(
                SyncProgress(
                    chats_done=self.report.chats_done,
                    chats_total=self.total,
                    note=note,
                    chat=self.current,
                    chat_messages=self.current_count,
                    messages=self.report.new,
                    wait_s=wait_s,
                    account=self.account,
                )
            )

    def _waiting(self, seconds: float) -> None:
        where = f" ({self.current})" if self.current else ""
        if seconds > 0:
            self.progress(f"Telegram asked to wait {seconds:.0f} s{where}", wait_s=seconds)
        else:
            self.progress(f"flood wait over{where}")

    async def load_dialogs(self) -> list[Any]:
        """The account's dialogs, fetched once per run."""
        if self.dialogs is None:
            self.dialogs = await self.policy.call(lambda: collect(self.client.iter_dialogs()))
        return self.dialogs

    async def fetch(
        self, peer: Any, limit: int | None, *, reverse: bool = False, **kwargs: Unpack[FetchArgs]
    ) -> Fetched:
        """One resumable ``iter_messages`` (see ``fetch_messages``) under the flood policy."""
        return await fetch_messages(
            self.client, self.policy, peer, limit, reverse=reverse, **kwargs
        )

    async def me_id(self) -> int:
        """The signed-in user's id, asked once per run."""
        if self.self_id is None:
            me = await self.policy.call(self.client.get_me)
            self.self_id = int(me.id)
        return self.self_id
