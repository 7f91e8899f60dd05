"""The embedding loop: follow the unitize feed, then embed pending units through ``embed``.

One pass at a time (an ``asyncio.Lock``): the background loop and ``chatseek embed`` never
embed the same unit twice. The embedder's identity is read before every pass; a pass never
writes into a space of another model. Texts leave the machine only through a local embedder,
unless the user confirmed a hosted one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from chatseek.embed.v1 import embed_service_pb2
from chatseek_core import db
from chatseek_core.aio import to_thread
from chatseek_core.client import call
from chatseek_core.errors import ChatseekError, ConfirmationRequired
from chatseek_vector import index, spaces

__all__ = ["EMBED_BATCH", "EmbedPass", "Worker"]

log = logging.getLogger(__name__)

EMBED_BATCH = 32
EMBED_TIMEOUT_S = 300.0
MODELS_TIMEOUT_S = 10.0
ERROR_BACKOFF_S = 5.0
# Asking before a hosted embedder sees more than this many units.
CONFIRM_ABOVE_UNITS = 200
MAX_STALLED_BATCHES = 3


@dataclass
class EmbedPass:
    """What one pass did."""

    embedded: int = 0
    cached: int = 0
    skipped: int = 0
    remaining: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "embedded": self.embedded,
            "cached": self.cached,
            "skipped": self.skipped,
            "remaining": self.remaining,
        }


def _store(
    conn_of: Callable[[], db.Connection],
    space: spaces.Space,
    items: list[tuple[index.PendingUnit, np.ndarray]],
) -> int:
    return index.store_vectors(conn_of(), space, items)


class Worker:
    """Follows the feed and embeds pending units; shared by the background loop and RPCs."""

    def __init__(self, pool: db.ThreadConnections, embed: Any, poll_interval_s: float) -> None:
        self._pool = pool
        self._embed = embed
        self._poll = poll_interval_s
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self.last_error: str = ""

    def nudge(self) -> None:
        """Wake the background loop."""
        self._wake.set()

    def ready(self) -> bool:
        """Whether unitize.db exists and is attached (blocking: SQLite; call it off the loop)."""
        return self._pool.attached("unitize")

    async def identity(self) -> tuple[spaces.Identity, bool]:
        """The embedder's identity and whether it sends text off the machine."""
        reply = await call(
            self._embed.ListModels,
            embed_service_pb2.ListModelsRequest(),
            timeout=MODELS_TIMEOUT_S,
            idempotent=True,
            peer="embed",
        )
        model = reply.embedder
        return (
            spaces.Identity(model.name, model.revision, model.dim, model.normalized),
            model.device == "remote",
        )

    async def embed_texts(self, texts: list[str], role: int) -> np.ndarray:
        """Vectors for ``texts`` from the embed service, as an ``(n, dim)`` array."""
        reply = await call(
            self._embed.Embed,
            embed_service_pb2.EmbedRequest(texts=texts, role=role),  # type: ignore[arg-type]
            timeout=EMBED_TIMEOUT_S,
            idempotent=True,
            peer="embed",
        )
        matrix = np.frombuffer(reply.vectors, dtype="<f4")
        return matrix.reshape(len(texts), reply.dim) if texts else matrix.reshape(0, reply.dim)

    async def follow_feed(self) -> int:
        """Consume every pending unitize event; returns how many."""
        if not await to_thread(self.ready):
            return 0
        total = 0
        while True:
            done = await to_thread(lambda: index.apply_unit_feed(self._pool.get()))
            total += done
            if done == 0:
                return total

    async def run_pass(
        self,
        *,
        chat_ids: list[int] | None = None,
        reembed: bool = False,
        confirmed: bool = False,
        background: bool = False,
        on_progress: Callable[[int, int], Awaitable[None]] | None = None,
    ) -> EmbedPass:
        """Embed pending units (of ``chat_ids``), one batch per transaction.

        Raises:
            EmbeddingSpaceMismatch: the stored vectors come from another model (and not reembed).
            ConfirmationRequired: a hosted embedder and a large amount of work, not confirmed.
        """
        async with self._lock:
            await self.follow_feed()
            identity, remote = await self.identity()
            conn_of = self._pool.get

            def prepare() -> tuple[spaces.Space, int]:
                conn = conn_of()
                with db.transaction(conn):
                    current = spaces.current_space(conn)
                    if reembed:
                        for (space_id,) in conn.execute("SELECT space_id FROM spaces").fetchall():
                            spaces.drop_space(conn, int(space_id))
                        space = spaces.create_space(conn, identity)
                        index.requeue_all(conn)
                    elif current is None:
                        space = spaces.create_space(conn, identity)
                    else:
                        space = spaces.require_current(conn, identity)
                index.drop_orphan_pending(conn)
                return space, index.pending_count(conn, chat_ids)

            space, total = await to_thread(prepare)
            if remote and total > CONFIRM_ABOVE_UNITS and not confirmed:
                raise ConfirmationRequired(
                    f"{total} units would be sent to the hosted embedder {identity.model}",
                    hint="re-run with --yes to send them, or configure a local model",
                    metadata={"units": str(total)},
                )
            if remote and background:
                return EmbedPass(remaining=total)
            result = EmbedPass()
            done = 0
            stalled = 0
            while stalled < MAX_STALLED_BATCHES:
                batch = await to_thread(
                    lambda: index.take_pending(conn_of(), space, EMBED_BATCH, chat_ids)
                )
                if not batch:
                    break
                fresh = [u for u in batch if u.cached is None]
                vectors: dict[int, np.ndarray] = {
                    u.unit_id: np.frombuffer(u.cached, dtype="<f4")
                    for u in batch
                    if u.cached is not None
                }
                if fresh:
                    matrix = await self.embed_texts(
                        [u.text for u in fresh], embed_service_pb2.ROLE_PASSAGE
                    )
                    for unit, row in zip(fresh, matrix, strict=True):
                        vectors[unit.unit_id] = row
                items = [(u, vectors[u.unit_id]) for u in batch]
                written = await to_thread(_store, conn_of, space, items)
                result.embedded += len(fresh)
                result.cached += len(batch) - len(fresh)
                result.skipped += len(batch) - written
                done += len(batch)
                if written == 0:
                    # Every unit of the batch changed under us; the feed re-queues them.
                    stalled += 1
                    await self.follow_feed()
                else:
                    stalled = 0
                if on_progress is not None:
                    await on_progress(done, total)
            result.remaining = await to_thread(lambda: index.pending_count(conn_of(), chat_ids))
            return result

    async def run(self) -> None:
        """The background loop: follow the feed and embed, until cancelled."""
        while True:
            self._wake.clear()
            try:
                if await to_thread(self.ready):
                    await self.run_pass(background=True)
                    self.last_error = ""
            except ChatseekError as exc:
                if exc.message != self.last_error:
                    log.warning("embedding paused: %s (%s)", exc.message, exc.reason)
                self.last_error = exc.message
            except Exception:
                log.exception("embedding pass failed")
                await asyncio.sleep(ERROR_BACKOFF_S)
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=self._poll)
            except TimeoutError:
                pass
