"""The embedding loop: follow the unitize feed, then embed pending units through ``embed``.

One pass at a time (an ``asyncio.Lock``): the background loop and ``chatseek embed`` never
embed the same unit twice. Its blocking steps run on ``WRITER_THREADS`` threads of its own, so
vector.db's writing connections (and their page caches) are those few, never the query
threads'. A pass sweeps the queue in ``unit_id`` order: while one batch is
written to vector.db the next is taken and embedded, with at most ``EMBED_AHEAD`` batches held.
The embedder's identity is read before every pass; a pass never writes into a space of another
model. Texts leave the machine only through a local embedder, unless the user confirmed a
hosted one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

import numpy as np

from chatseek.embed.v1 import embed_service_pb2, embed_service_pb2_grpc
from chatseek_core import db
from chatseek_core.aio import run_in, woken
from chatseek_core.client import call
from chatseek_core.errors import ChatseekError, ConfirmationRequired
from chatseek_vector import index, spaces

__all__ = ["EMBED_BATCH", "EmbedPass", "Rate", "Worker", "batch_size"]

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

EMBED_BATCH = 256
# A batch holds about REQUEST_TARGET_S of work at the recent rate, between EMBED_BATCH_MIN and
# EMBED_BATCH units: a fast embedder gets few large requests, a slow one (a real model on a
# small CPU) stays far from EMBED_TIMEOUT_S and reports progress often.
EMBED_BATCH_MIN = 32
REQUEST_TARGET_S = 5.0
# Text in one embed request at most (characters): long units make smaller batches.
EMBED_BATCH_CHARS = 512 * 1024
EMBED_TIMEOUT_S = 300.0
MODELS_TIMEOUT_S = 10.0
ERROR_BACKOFF_S = 5.0
# Asking before a hosted embedder sees more than this many units.
CONFIRM_ABOVE_UNITS = 200
# Sweeps over the queue after one in which every written batch was skipped (units re-cut
# while they were embedded): the feed re-queues them, the next sweep embeds the new text.
MAX_STALLED_SWEEPS = 3
# Batches embedded ahead of the one being written: the embed service works while vector.db
# is written, and at most this many batches wait in memory.
EMBED_AHEAD = 1
# The embedding rate (and the ETA of `chatseek embed status`) covers this many written batches.
RATE_BATCHES = 32
# Query vectors kept (about 1.5 KB each at 384 dimensions): one hybrid search asks for units and
# for conversation chunks with the same question, and agents repeat questions.
QUERY_CACHE_ENTRIES = 256
# A pass takes the next batch while it writes the last one: two threads, two connections.
WRITER_THREADS = 2


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


class Rate:
    """Units and characters of text written per second over the most recent batches, for the
    ETA.

    Each written batch counts the seconds since the previous write of the same sweep (or since
    the sweep began), so the time between passes is never counted as slowness. An embedder's
    time follows the length of the texts, not their number: a queue whose first units were
    long and the next ones short, counted in units, promised about twice the time it took
    (``make bench-meaning``). So the ETA is the characters left at the recent characters per
    second, where both are known, and the units left at units per second otherwise.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._batches: deque[tuple[float, int, int]] = deque(maxlen=RATE_BATCHES)
        self._since = clock()
        self._last_write: float | None = None

    def begin(self) -> None:
        """A sweep starts: the next batch's time runs from now."""
        self._since = self._clock()

    def wrote(self, units: int, chars: int = 0) -> None:
        """A batch of ``units`` holding ``chars`` characters of text was written."""
        now = self._clock()
        self._batches.append((now - self._since, units, chars))
        self._since = now
        self._last_write = now

    def units_per_s(self) -> float | None:
        """The recent rate, or None before anything was written."""
        seconds = sum(b[0] for b in self._batches)
        units = sum(b[1] for b in self._batches)
        return units / seconds if units and seconds > 0 else None

    def chars_per_s(self) -> float | None:
        """The recent rate in characters of text, or None before any was written."""
        seconds = sum(b[0] for b in self._batches)
        chars = sum(b[2] for b in self._batches)
        return chars / seconds if chars and seconds > 0 else None

    def estimate(
        self, remaining: int, remaining_chars: float | None = None
    ) -> dict[str, float | None]:
        """``units_per_s``, ``eta_s`` (0 when nothing remains, None without a rate) and
        ``last_write_s_ago`` (None before the first write); ``remaining_chars`` is the text the
        ``remaining`` units hold, where known."""
        rate = self.units_per_s()
        by_chars = self.chars_per_s()
        if remaining <= 0:
            eta: float | None = 0.0
        elif remaining_chars is not None and by_chars is not None:
            eta = remaining_chars / by_chars
        else:
            eta = None if rate is None else remaining / rate
        ago = None if self._last_write is None else self._clock() - self._last_write
        return {
            "units_per_s": None if rate is None else round(rate, 1),
            "eta_s": None if eta is None else round(eta, 1),
            "last_write_s_ago": None if ago is None else round(ago, 1),
        }


@dataclass(frozen=True)
class _Embedded:
    """A batch ready to write: each unit with its vector, and how many were embedded now."""

    items: list[tuple[index.PendingUnit, np.ndarray]]
    fresh: int

    @property
    def chars(self) -> int:
        """Characters of text in the batch (cached ones too: the queue's length counts them)."""
        return sum(len(u.text) for u, _ in self.items)


class _Progress:
    """Units handled so far in a pass, reported to the caller after each written batch."""

    def __init__(self, total: int, report: Callable[[int, int], Awaitable[None]] | None) -> None:
        self.total = total
        self.done = 0
        self.swept = 0
        self._report = report

    async def advance(self, count: int) -> None:
        self.done += count
        if self._report is not None:
            await self._report(self.done, self.total)


def _take(
    conn_of: Callable[[], db.Connection],
    space: spaces.Space,
    chat_ids: list[int] | None,
    after: int,
    limit: int,
) -> list[index.PendingUnit]:
    return index.take_pending(
        conn_of(), space, limit, chat_ids, after=after, max_chars=EMBED_BATCH_CHARS
    )


def batch_size(units_per_s: float | None) -> int:
    """Units in the next batch: ``REQUEST_TARGET_S`` of work at the recent rate, clamped."""
    if units_per_s is None:
        return EMBED_BATCH_MIN
    return max(EMBED_BATCH_MIN, min(EMBED_BATCH, int(units_per_s * REQUEST_TARGET_S)))


def _store(
    conn_of: Callable[[], db.Connection],
    space: spaces.Space,
    items: list[tuple[index.PendingUnit, np.ndarray]],
) -> int:
    return index.store_vectors(conn_of(), space, items)


class Worker:
    """Follows the feed and embeds pending units; shared by the background loop and RPCs."""

    def __init__(
        self,
        pool: db.ThreadConnections,
        embed: embed_service_pb2_grpc.EmbedServiceAsyncStub,
        poll_interval_s: float,
    ) -> None:
        self._pool = pool
        self._embed = embed
        self._poll = poll_interval_s
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self.waiting = asyncio.Event()
        """Set while the background loop waits to be woken (between passes)."""
        self.last_error: str = ""
        self.rate = Rate()
        self.totals = EmbedPass()
        self._queries: OrderedDict[tuple[spaces.Identity, str], asyncio.Future[np.ndarray]] = (
            OrderedDict()
        )
        self._threads = ThreadPoolExecutor(WRITER_THREADS, thread_name_prefix="vector-embed")

    async def _blocking(self, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``func`` on the worker's own threads (their connections are the writers)."""
        return await run_in(self._threads, func, *args, **kwargs)

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
            spaces.Identity(
                model.name, spaces.space_revision(model.revision), model.dim, model.normalized
            ),
            model.device == "remote",
        )

    async def embed_query(self, identity: spaces.Identity, text: str) -> np.ndarray:
        """The query vector of ``text`` under ``identity``: embedded once, shared by concurrent
        askers and kept for the last ``QUERY_CACHE_ENTRIES`` questions; a failure is not kept."""
        key = (identity, text)
        pending = self._queries.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self.embed_texts([text], embed_service_pb2.ROLE_QUERY))
            self._queries[key] = pending
            while len(self._queries) > QUERY_CACHE_ENTRIES:
                self._queries.popitem(last=False)
        else:
            self._queries.move_to_end(key)
        try:
            vectors = await asyncio.shield(pending)
        except BaseException:
            if pending.done() and self._queries.get(key) is pending:
                del self._queries[key]
            raise
        return np.asarray(vectors[0])

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
        if not await self._blocking(self.ready):
            return 0
        total = 0
        while True:
            done = await self._blocking(lambda: index.apply_unit_feed(self._pool.get()))
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
        """Embed pending units (of ``chat_ids``), one batch per transaction, in sweeps.

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

            space, total = await self._blocking(prepare)
            if remote and total > CONFIRM_ABOVE_UNITS and not confirmed:
                raise ConfirmationRequired(
                    f"{total} units would be sent to the hosted embedder {identity.model}",
                    hint="re-run with --yes to send them, or configure a local model",
                    metadata={"units": str(total)},
                )
            if remote and background:
                return EmbedPass(remaining=total)
            result = EmbedPass()
            progress = _Progress(total, on_progress)
            for _ in range(MAX_STALLED_SWEEPS):
                written = await self._sweep(space, chat_ids, result, progress)
                if written == progress.swept:
                    break
                # Some units changed under us; the feed re-queues them with their new text.
                await self.follow_feed()
            result.remaining = await self._blocking(
                lambda: index.pending_count(conn_of(), chat_ids)
            )
            return result

    async def _sweep(
        self,
        space: spaces.Space,
        chat_ids: list[int] | None,
        result: EmbedPass,
        progress: _Progress,
    ) -> int:
        """Embed and write every unit pending at the start, once; returns how many were written.

        A producer takes and embeds batches while this coroutine writes them; a failure on either
        side stops both and is raised here.
        """
        conn_of = self._pool.get
        ready: asyncio.Queue[_Embedded | Exception | None] = asyncio.Queue(EMBED_AHEAD)
        progress.swept = 0

        async def produce() -> None:
            after = 0
            try:
                while True:
                    limit = batch_size(self.rate.units_per_s())
                    batch = await self._blocking(_take, conn_of, space, chat_ids, after, limit)
                    if not batch:
                        break
                    after = batch[-1].unit_id
                    await ready.put(await self._vectors(batch))
                await ready.put(None)
            except Exception as exc:  # handed to the writer, which raises it
                await ready.put(exc)

        self.rate.begin()
        producer = asyncio.create_task(produce())
        written_total = 0
        try:
            while True:
                item = await ready.get()
                if item is None:
                    break
                if isinstance(item, Exception):
                    raise item
                written = await self._blocking(_store, conn_of, space, item.items)
                written_total += written
                self.rate.wrote(written, item.chars)
                for tally in (result, self.totals):
                    tally.embedded += item.fresh
                    tally.cached += len(item.items) - item.fresh
                    tally.skipped += len(item.items) - written
                progress.swept += len(item.items)
                await progress.advance(len(item.items))
        finally:
            if not producer.done():
                producer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await producer
        return written_total

    async def _vectors(self, batch: list[index.PendingUnit]) -> _Embedded:
        """The batch with a vector for each unit: cached ones as stored, the rest embedded."""
        fresh = [u for u in batch if u.cached is None]
        vectors: dict[int, np.ndarray] = {
            u.unit_id: np.frombuffer(u.cached, dtype="<f4") for u in batch if u.cached is not None
        }
        if fresh:
            matrix = await self.embed_texts(
                [spaces.passage_text(u.text) for u in fresh], embed_service_pb2.ROLE_PASSAGE
            )
            for unit, row in zip(fresh, matrix, strict=True):
                vectors[unit.unit_id] = row
        return _Embedded([(u, vectors[u.unit_id]) for u in batch], len(fresh))

    def report(
        self, pending: int, pending_chars: float | None = None, not_queued: int = 0
    ) -> dict[str, object]:
        """The rate and ETA (``Rate.estimate``) and what this process embedded or found cached.

        ``pending_chars`` is the text of the ``pending`` queued units and the ``not_queued``
        ones together, where known.

        ``since_start`` counts units written since the service started: ``embedded`` went to the
        embedder, ``cached`` reused the vector of an identical text (the content-hash cache).
        """
        since = self.totals.to_dict()
        del since["remaining"]
        return {
            **self.rate.estimate(pending + not_queued, pending_chars),
            "not_queued": not_queued,
            "since_start": since,
        }

    async def run(self) -> None:
        """The background loop: follow the feed and embed, until cancelled."""
        while True:
            self._wake.clear()
            self.waiting.clear()
            try:
                if await self._blocking(self.ready):
                    await self.run_pass(background=True)
                    self.last_error = ""
            except ChatseekError as exc:
                if exc.message != self.last_error:
                    log.warning("embedding paused: %s (%s)", exc.message, exc.reason)
                self.last_error = exc.message
            except Exception:
                log.exception("embedding pass failed")
                await asyncio.sleep(ERROR_BACKOFF_S)
            self.waiting.set()
            await woken(self._wake, self._poll)
