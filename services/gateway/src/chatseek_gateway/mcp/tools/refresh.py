"""The refresh before a search: a short budgeted sync of the searched chats that went stale.

``AutoRefresh.refresh`` reads the user config's ``[search]`` table on each call (when a chat is
stale, the budget) and syncs only chats synced before, never a chat's first sync; whatever
stops it becomes a warning beside the hits. ``index_age_min`` is the age a search reports.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chatseek_core import config as config_file
from chatseek_core.aio import to_thread
from chatseek_core.errors import ChatseekError, FloodWait, SyncRunning
from chatseek_gateway.mcp.tools.calls import GatewayCalls

__all__ = ["AutoRefresh", "Refresh", "index_age_min"]

SECONDS_PER_MINUTE = 60.0
AGE_DECIMALS = 1


def _warning(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": message}


@dataclass
class Refresh:
    """What the automatic refresh before a search did."""

    report: dict[str, Any] | None = None
    warnings: list[dict[str, str]] = field(default_factory=list)


def index_age_min(result: dict[str, Any], now: float) -> float | None:
    """Minutes since the least recently synced chat of the result's coverage was synced.

    Imported chats are never synced and do not count; None when no covered chat was synced.
    """
    fetched: list[float] = [
        float(chat["last_fetched_at"])
        for chat in (result.get("coverage") or {}).get("chats", [])
        if chat.get("last_fetched_at")
    ]
    if not fetched:
        return None
    return round(max(0.0, now - min(fetched)) / SECONDS_PER_MINUTE, AGE_DECIMALS)


class AutoRefresh:
    """Refreshes the stale chats of a search result, as the user config says.

    Args:
        calls: the gateway calls (the refresh runs the gateway's sync).
        config_path: the user config file, read on each refresh.
    """

    def __init__(self, calls: GatewayCalls, config_path: Path) -> None:
        self._calls = calls
        self._config_path = config_path

    async def refresh(self, result: dict[str, Any]) -> Refresh:
        """Sync the searched chats that are older than ``auto_sync_after_min``, within budget.

        Only chats synced before take part, so this never starts a chat's first sync; an
        ``auto_sync_after_min`` of 0 turns the refresh off. A running sync, a flood wait or a
        gateway that cannot sync becomes a warning, never a failed search.
        """
        out = Refresh()
        try:
            settings = (await to_thread(config_file.load, self._config_path)).search
        except ChatseekError as exc:
            out.warnings.append(
                _warning("AUTO_SYNC_SKIPPED", f"the index was not refreshed: {exc.message}")
            )
            return out
        if settings.auto_sync_after_min <= 0:
            return out
        now = time.time()
        cutoff = now - settings.auto_sync_after_min * SECONDS_PER_MINUTE
        stale = [
            str(chat["id"])
            for chat in (result.get("coverage") or {}).get("chats", [])
            if chat.get("last_fetched_at") and chat["last_fetched_at"] < cutoff
        ]
        if not stale:
            return out
        age = index_age_min(result, now)
        try:
            out.report = await self._calls.sync(settings.auto_sync_budget_s, stale)
        except SyncRunning:
            out.warnings.append(
                _warning(
                    "SYNC_RUNNING",
                    f"the index is {age} min old and another sync is running; searched it as it is",
                )
            )
        except FloodWait as exc:
            wait = f" for {exc.retry_after_s:.0f} s" if exc.retry_after_s is not None else ""
            out.warnings.append(
                _warning(
                    "FLOOD_WAIT",
                    f"Telegram asked to wait{wait}; the index ({age} min old) was not refreshed",
                )
            )
        except ChatseekError as exc:
            out.warnings.append(
                _warning(
                    "AUTO_SYNC_SKIPPED",
                    f"the index is {age} min old and could not be refreshed ({exc.reason}); "
                    "searched it as it is",
                )
            )
        else:
            if out.report.get("stopped_by") == "flood_wait":
                out.warnings.append(
                    _warning(
                        "FLOOD_WAIT",
                        "Telegram asked to wait; the refresh stopped early and some chats are "
                        f"still stale (wait {out.report.get('flood_wait_s', 0):.0f} s)",
                    )
                )
            elif out.report.get("chats_remaining"):
                out.warnings.append(
                    _warning(
                        "AUTO_SYNC_INCOMPLETE",
                        f"the refresh ran out of its {settings.auto_sync_budget_s:g} s budget; "
                        f"{out.report['chats_remaining']} chat(s) are still stale (run sync)",
                    )
                )
        return out
