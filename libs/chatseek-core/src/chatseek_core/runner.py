"""What every ``python -m chatseek_<svc>`` does after reading its settings.

``run`` tunes the C allocator for a long-lived process (``memory``), sets up logging, builds the
service through its ``start`` coroutine (which opens and migrates the database, loads models,
binds the server and returns background jobs), starts the server, marks it SERVING only then,
and serves until SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chatseek_core import memory
from chatseek_core.errors import ChatseekError
from chatseek_core.log import setup_logging
from chatseek_core.server import ServerHandle, serve_forever
from chatseek_core.settings import Settings, load_settings

__all__ = ["Running", "main_for", "run"]

log = logging.getLogger(__name__)


@dataclass
class Running:
    """A built service: its bound server, its background jobs and how to close it."""

    handle: ServerHandle
    background: list[Callable[[], Coroutine[Any, Any, None]]] = field(default_factory=list)
    on_stop: Callable[[], Awaitable[None]] | None = None


async def _serve(settings: Settings, start: Callable[[Settings], Awaitable[Running]]) -> None:
    running = await start(settings)
    await running.handle.server.start()
    running.handle.set_serving(True)
    log.info("serving on port %d", running.handle.port)
    quiet = await serve_forever(
        running.handle, on_stop=running.on_stop, background=running.background
    )
    if not quiet:
        # Threads still writing would keep the interpreter alive until they finish; stopping
        # now is a kill at a point every operation survives (tests/test_faults.py).
        log.warning("exiting without waiting for the work still running")
        logging.shutdown()
        os._exit(0)


def run(
    service: str,
    start: Callable[[Settings], Awaitable[Running]],
    *,
    inference: bool = False,
) -> None:
    """Configure logging from the environment and serve ``service`` until SIGTERM.

    ``inference`` is ``memory.tune``'s: True where every request needs big fresh buffers.
    """
    memory.tune(inference=inference)
    settings = load_settings(service)
    log_dir = os.environ.get("CHATSEEK_LOG_DIR")
    setup_logging(
        service=service,
        level=settings.log_level,
        fmt=settings.log_format,
        log_dir=Path(log_dir) if log_dir else None,
    )
    try:
        asyncio.run(_serve(settings, start))
    except ChatseekError as exc:
        # A service that cannot start says why in one line (its .out file and log), no traceback.
        log.error("%s cannot start: %s (%s); %s", service, exc.message, exc.reason, exc.hint)
        raise SystemExit(1) from None


def main_for(
    service: str,
    start: Callable[[Settings], Awaitable[Running]],
    *,
    inference: bool = False,
) -> Callable[[], None]:
    """A ``main()`` for a service's ``__main__`` module (``inference``: see ``run``)."""

    def main() -> None:
        run(service, start, inference=inference)

    return main
