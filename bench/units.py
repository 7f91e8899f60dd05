"""Unitize in-process: the full cut of one big chat, and the cost of one appended message.

One generated supergroup is parsed by ingest's export reader and stored through ingest's store
into a fresh ``ingest.db`` (not timed); ``apply_ingest_feed`` then cuts it whole. The reference
is ``loader.load_chat``: reading the same messages back as the cutter sees them (the I/O and
row-decoding floor of a whole cut). Then messages are appended one at a time, each stored and
then applied; the median apply is compared with an apply on an empty feed (the fixed cost of a
transaction and a cursor read) and with the whole cut's per-message cost.
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from bench.measure import cpu_seconds, ratio, timed

__all__ = ["APPENDS", "INCREMENTAL_CHAT", "units_section"]

APPENDS = 1_000
INCREMENTAL_CHAT = 100_000
STORE_BATCH = 5_000
ACCOUNT = "default"
CHAT_ID = 1900000001


def _export(path: Path, count: int, seed: int) -> None:
    from bench.generate import MAIN_ID, NAMES, _chat_messages, _Text, _write_chat

    rng = random.Random(seed)
    senders = [(1_000_000 + i, name) for i, name in enumerate(NAMES)]
    with open(path, "w", encoding="utf-8") as out:
        header = {"name": "Bench City Expats", "type": "public_supergroup", "id": MAIN_ID}
        _write_chat(out, header, _chat_messages(rng, _Text(rng), count, 1, senders))


def _records(path: Path) -> Iterator[Any]:
    from chatseek_ingest.export import iter_export, open_export

    yield from iter_export(open_export(path))


def _stores(root: Path) -> tuple[Any, Any]:
    from chatseek_core import db
    from chatseek_ingest.schema import MIGRATIONS as INGEST_MIGRATIONS
    from chatseek_unitize.schema import MIGRATIONS as UNITIZE_MIGRATIONS

    ingest = db.connect(root / "ingest.db")
    db.migrate(ingest, "ingest", INGEST_MIGRATIONS)
    unitize = db.connect(root / "unitize.db")
    db.migrate(unitize, "unitize", UNITIZE_MIGRATIONS)
    db.attach_readonly(unitize, root / "ingest.db", "ingest")
    return ingest, unitize


def _drain(unitize: Any) -> int:
    from chatseek_unitize.units import apply_ingest_feed

    total = 0
    while True:
        done = apply_ingest_feed(unitize)
        total += done
        if not done:
            return total


def _one_chat(
    count: int, appends: int, seed: int, progress: Callable[[str], None]
) -> dict[str, Any]:
    from chatseek_core import db
    from chatseek_ingest import store
    from chatseek_ingest.model import ExportChat, ExportMessage
    from chatseek_unitize import loader

    with tempfile.TemporaryDirectory(prefix="chatseek-units-") as tmp:
        root = Path(tmp)
        _export(root / "result.json", count + appends, seed)
        ingest, unitize = _stores(root)
        records = _records(root / "result.json")
        stored = 0
        batch: list[ExportMessage] = []
        held: list[ExportMessage] = []
        store_s = 0.0
        for record in records:
            if isinstance(record, ExportChat):
                with db.transaction(ingest):
                    store.ensure_account(ingest, ACCOUNT)
                    store.upsert_chat(ingest, ACCOUNT, record, source_id=None, is_import=True)
                continue
            if not isinstance(record, ExportMessage):
                continue
            if stored + len(batch) >= count:
                held.append(record)
                continue
            batch.append(record)
            if len(batch) == STORE_BATCH:
                took, _ = timed(partial(_store, ingest, batch))
                store_s += took
                stored += len(batch)
                batch = []
        if batch:
            took, _ = timed(partial(_store, ingest, batch))
            store_s += took
            stored += len(batch)
        chat_id = int(
            ingest.execute("SELECT chat_id FROM chats WHERE account = ?", (ACCOUNT,)).fetchone()[0]
        )
        progress(f"units: {stored} messages stored in ingest.db in {store_s:.1f} s; cutting")
        cut_s, events = timed(lambda: _drain(unitize))
        read_s, msgs = timed(lambda: loader.load_chat(unitize, ACCOUNT, chat_id))
        progress(f"units: cut in {cut_s:.1f} s; building conversations")
        links = _conversations(msgs)
        units = int(unitize.execute("SELECT COUNT(*) FROM units").fetchone()[0])
        empty = [timed(lambda: _drain(unitize))[0] for _ in range(50)]
        applies = []
        for message in held[:appends]:
            _store(ingest, [message])
            applies.append(timed(lambda: _drain(unitize))[0])
        ingest.close()
        unitize.close()
    per_message_cut_ms = cut_s * 1000 / max(stored, 1)
    median_ms = statistics.median(applies) * 1000 if applies else 0.0
    empty_ms = statistics.median(empty) * 1000
    return {
        "messages": stored,
        "units": units,
        "feed_events": events,
        "ingest_store_msgs_per_s": round(stored / store_s) if store_s else None,
        "full_cut_s": round(cut_s, 2),
        "full_cut_msgs_per_s": round(stored / cut_s),
        "reference_load_chat_s": round(read_s, 2),
        "reference_load_chat_msgs_per_s": round(len(msgs) / read_s) if read_s else None,
        "full_cut_over_load_chat": ratio(cut_s, read_s, 2),
        **links,
        "appends": len(applies),
        "append_median_ms": round(median_ms, 3),
        "append_p95_ms": round(sorted(applies)[int(0.95 * (len(applies) - 1))] * 1000, 3)
        if applies
        else None,
        "reference_empty_apply_ms": round(empty_ms, 3),
        "append_over_empty_apply": ratio(median_ms, empty_ms, 2),
        "append_over_cut_per_message": ratio(median_ms, per_message_cut_ms, 1),
    }


def _conversations(msgs: list[Any]) -> dict[str, Any]:
    """Linking and grouping one chat with the shipped model, against the rule scorer.

    Wall and CPU time both: the CPU figure is what the model costs on a machine of its own.
    """
    from chatseek_unitize.linking import LearnedScorer, RuleScorer, build_links, conversations

    def run(scorer: Any) -> tuple[float, float, list[Any], int]:
        def build() -> tuple[list[Any], int]:
            links = build_links(msgs, agent_answers={}, scorer=scorer)
            return links, len(conversations(links))

        # The child that computes the learned scorer's static blocks ahead counts too (it is
        # reaped when the build ends).
        cpu = cpu_seconds(os.getpid())
        wall, (links, groups) = timed(build)
        return wall, cpu_seconds(os.getpid()) - cpu, links, groups

    wall, cpu, links, groups = run(LearnedScorer())
    rules_wall, _, _, _ = run(RuleScorer())
    scored = sum(1 for link in links if link.reason in ("scored", "new"))
    return {
        "conversation_build_s": round(wall, 2),
        "conversation_build_msgs_per_s": round(len(msgs) / wall),
        "conversation_build_cpu_msgs_per_s": round(len(msgs) / cpu) if cpu else None,
        "conversation_scored_messages": scored,
        "conversations": groups,
        "reference_rules_build_msgs_per_s": round(len(msgs) / rules_wall),
        "conversation_build_over_rules": ratio(wall, rules_wall, 2),
    }


def _store(ingest: Any, batch: list[Any]) -> None:
    from chatseek_core import db
    from chatseek_ingest import store

    with db.transaction(ingest):
        store.store_messages(ingest, ACCOUNT, batch)


def units_section(messages: int, progress: Callable[[str], None]) -> dict[str, Any]:
    """The full cut of a ``messages``-message chat and appends to a ``min(messages, 100k)`` one."""
    out: dict[str, Any] = {}
    chat = min(messages, INCREMENTAL_CHAT)
    if messages > chat:
        out["full_cut"] = _one_chat(messages, 0, seed=17, progress=progress)
        out["incremental"] = _one_chat(chat, APPENDS, seed=18, progress=progress)
    else:
        both = _one_chat(messages, APPENDS, seed=17, progress=progress)
        out["full_cut"] = out["incremental"] = both
    progress(
        f"units: full cut {out['full_cut']['full_cut_msgs_per_s']} msgs/s,"
        f" append median {out['incremental']['append_median_ms']} ms"
    )
    return out
