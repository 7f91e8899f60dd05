"""Test helpers: settings over a temp directory and a service served in-process.

Fakes of the system's edges live in ``chatseek_core.fakes`` (models, selectable in production
with ``CHATSEEK_FAKE_MODELS``) and ``chatseek_testing.telegram`` (Telegram); nothing here
replaces the thing under test.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from chatseek_core.runner import Running
from chatseek_core.server import shut_down
from chatseek_core.settings import Settings, load_settings

__all__ = ["serving", "temp_settings"]


def temp_settings(
    home: Path, service: str | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Settings rooted at ``home``, listening on an ephemeral loopback port, fake models."""
    values = {
        "CHATSEEK_HOME": str(home),
        "CHATSEEK_LISTEN": "127.0.0.1:0",
        "CHATSEEK_FAKE_MODELS": "1",
        "CHATSEEK_POLL_INTERVAL_S": "0.2",
    }
    values.update(env or {})
    return load_settings(service, env=values)


@contextlib.asynccontextmanager
async def serving(running: Running) -> AsyncIterator[str]:
    """Start a built service, mark it SERVING, run its background jobs; yield its address."""
    await running.handle.server.start()
    running.handle.set_serving(True)
    tasks = [asyncio.create_task(job()) for job in running.background]
    try:
        yield f"127.0.0.1:{running.handle.port}"
    finally:
        await shut_down(running.handle, tasks, on_stop=running.on_stop, grace_s=None)
