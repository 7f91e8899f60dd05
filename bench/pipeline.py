"""A generated archive through a private local stack, one stage at a time, then its queries.

Services start in pipeline order and each stage runs alone on the machine: ingest and gateway
for the import (``chatseek import`` as a process), then unitize until its feed is consumed,
then lexical until the word indexes are complete, then embed (fake embedder) and vector until
nothing is pending, then fusion for the queries (``bench.queries``). Each stage's seconds run
from its service answering SERVING (probed every ``START_POLL_S``) to its status saying done
(polled every ``POLL_S``), so small archives carry up to that much error; start-up (spawn to
SERVING) is reported apart.

References measured in the same run, on the same files: the import against ingest's streaming
export reader alone (parse, no store); unitize against ``apply_ingest_feed`` cutting the same
ingest.db in this process; the word index against the lexical indexer run in this process and
against a plain FTS5 (unicode61) table built in memory over the same message texts (SQLite's
floor), and beside the floor of the index as designed (``index_floor``: FTS5 inserting the
indexer's own rows, and the analyser cutting them, each timed alone); the vector stage
against the fake embedder called in-process on the same unit texts. Peak RSS is each
process's ``VmHWM``; the import's is read before any other service starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.measure import ChildPeaks, cpu_count, cpu_seconds, peak_rss_mib, ratio, timed

__all__ = [
    "SCALES",
    "IndexFloor",
    "Stack",
    "index_floor",
    "pipeline_section",
    "stack_env",
    "stage_done",
    "words_end_to_end",
]

SCALES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
STAGE_TIMEOUT_S = 6 * 3600.0
UP_TIMEOUT_S = 180.0
POLL_S = 0.25
START_POLL_S = 0.05
STOP_GRACE_S = 15.0
STAGES = (
    ("import", ("ingest", "gateway")),
    ("unitize", ("unitize",)),
    ("lexical", ("lexical",)),
    ("vector", ("embed", "vector")),
    ("queries", ("fusion",)),
)


class Stack:
    """Service processes this benchmark started, by name; only these are ever stopped."""

    def __init__(self, env: dict[str, str], settings: Any) -> None:
        self.env = env
        self.settings = settings
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.children = ChildPeaks()

    def start(self, names: tuple[str, ...]) -> tuple[float, float]:
        """Start ``names``, wait until each is SERVING; returns (spawned, all SERVING) clocks."""
        from chatseek_core.probe import check

        spawned = time.perf_counter()
        for name in names:
            env = dict(self.env)
            env["CHATSEEK_LISTEN"] = self.settings.addr(name)
            out = open(self.settings.run_dir / f"{name}.out", "ab")  # noqa: SIM115 - child's
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", f"chatseek_{name}"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=str(self.settings.home),
            )
            self.children.watch(name, self.procs[name].pid)
            out.close()
        deadline = time.monotonic() + UP_TIMEOUT_S
        pending = set(names)
        while pending:
            for name in sorted(pending):
                if self.procs[name].poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {self.procs[name].returncode};"
                        f" see {self.settings.run_dir / (name + '.out')}"
                    )
                if check(self.settings.addr(name), timeout=1.0) == "SERVING":
                    pending.discard(name)
            if pending and time.monotonic() > deadline:
                raise RuntimeError(f"not SERVING after {UP_TIMEOUT_S:.0f}s: {sorted(pending)}")
            if pending:
                time.sleep(START_POLL_S)
        return spawned, time.perf_counter()

    def rss(self) -> dict[str, float]:
        """Each service's peak RSS, and beside it the largest of its child processes
        (``<service> children``: ingest's export reader, Tesseract while it reads media)."""
        out = {name: peak_rss_mib(proc.pid) for name, proc in self.procs.items()}
        out.update({f"{name} children": peak for name, peak in self.children.peaks.items()})
        return out

    def cpu(self) -> dict[str, float]:
        """CPU seconds (user + system) each running service has used since it started."""
        return {name: cpu_seconds(proc.pid) for name, proc in self.procs.items()}

    def stop(self) -> None:
        self.children.close()
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=STOP_GRACE_S)


def stack_env(home: Path) -> dict[str, str]:
    """The environment of a private stack under ``home``: free loopback ports, fake embedder."""
    from chatseek_core.settings import SERVICES
    from eval.run import _free_ports  # noqa: PLC2701 - one helper, not worth a module

    env = dict(os.environ)
    env.update(
        {
            "CHATSEEK_HOME": str(home),
            "CHATSEEK_DATA_DIR": str(home / "data"),
            "CHATSEEK_LOG_DIR": str(home / "logs"),
            "CHATSEEK_LOG_FORMAT": "text",
            "CHATSEEK_FAKE_MODELS": "1",
            "CHATSEEK_POLL_INTERVAL_S": "0.5",
            "PYTHONUNBUFFERED": "1",
        }
    )
    for name, port in zip(SERVICES, _free_ports(len(SERVICES)), strict=True):
        env[f"CHATSEEK_{name.upper()}_ADDR"] = f"127.0.0.1:{port}"
    return env


def _status(settings: Any, name: str) -> Any:
    """The ``ServiceStatus`` of service ``name`` (its typed details in the oneof of its name)."""
    import importlib

    from chatseek_core.client import sync_channel

    pb = importlib.import_module(f"chatseek.{name}.v1.{name}_service_pb2")
    grpc_mod = importlib.import_module(f"chatseek.{name}.v1.{name}_service_pb2_grpc")
    channel = sync_channel(settings.addr(name))
    try:
        stub = getattr(grpc_mod, f"{name.capitalize()}ServiceStub")(channel)
        return stub.GetStatus(pb.GetStatusRequest(), timeout=30).status
    finally:
        channel.close()


def stage_done(settings: Any, stage: str) -> bool:
    """Whether ``stage`` (unitize, lexical or vector) has consumed everything it was fed."""
    status = _status(settings, stage)
    lag = dict(status.feed_lag)
    if stage == "unitize":
        return bool(lag) and not any(lag.values())
    if stage == "lexical":
        return bool(status.lexical.words_ready)
    vector = status.vector
    return vector.HasField("model") and not any(lag.values()) and not vector.pending


def _settle(settings: Any, stage: str, since: float) -> float:
    deadline = time.monotonic() + STAGE_TIMEOUT_S
    while time.monotonic() < deadline:
        if stage_done(settings, stage):
            return time.perf_counter() - since
        time.sleep(POLL_S)
    raise RuntimeError(f"{stage} did not finish within {STAGE_TIMEOUT_S:.0f}s")


def _settle_all(settings: Any, stages: tuple[str, ...]) -> float:
    """Seconds until every one of ``stages`` has consumed what it was fed."""
    since = time.perf_counter()
    for stage in stages:
        _settle(settings, stage, since)
    return time.perf_counter() - since


def _count(path: Path, sql: str) -> int:
    from chatseek_core import db

    conn = db.connect(path, readonly=True)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def _parse_only(export: Path) -> tuple[float, int]:
    from chatseek_ingest.export import iter_export, open_export
    from chatseek_ingest.model import ExportMessage

    def run() -> int:
        return sum(1 for r in iter_export(open_export(export)) if isinstance(r, ExportMessage))

    took, count = timed(run)
    return took, int(count)


def _unitize_in_process(data: Path, scratch: Path) -> float:
    """Seconds for ``apply_ingest_feed`` in this process to cut the same ingest.db afresh."""
    from chatseek_core import db
    from chatseek_unitize.schema import MIGRATIONS
    from chatseek_unitize.units import apply_ingest_feed

    conn = db.connect(scratch / "unitize-reference.db")
    db.migrate(conn, "unitize", MIGRATIONS)
    db.attach_readonly(conn, data / "ingest.db", "ingest")

    def drain() -> None:
        while apply_ingest_feed(conn):
            pass

    took, _ = timed(drain)
    conn.close()
    return took


def _lexical_in_process(data: Path, scratch: Path) -> float:
    """Seconds for the lexical indexer in this process to index the same files afresh."""
    from chatseek_lexical import indexer

    conn = indexer.connect_index(
        scratch / "lexical-reference.db",
        ingest_path=data / "ingest.db",
        unitize_path=data / "unitize.db",
    )

    def drain() -> None:
        while indexer.apply_feeds(conn):
            pass

    took, _ = timed(drain)
    conn.close()
    return took


def _fts_reference(ingest_db: Path) -> tuple[float, int]:
    """Seconds to build a plain FTS5 table over every message text, in memory."""
    from chatseek_core import db

    src = db.connect(ingest_db, readonly=True)
    texts = [(r[0],) for r in src.execute("SELECT text FROM messages")]
    src.close()
    mem = db.connect(":memory:")
    mem.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='unicode61')")

    def build() -> None:
        mem.execute("BEGIN")
        mem.executemany("INSERT INTO t (text) VALUES (?)", texts)
        mem.execute("COMMIT")

    took, _ = timed(build)
    mem.close()
    return took, len(texts)


@dataclass(frozen=True, slots=True)
class IndexFloor:
    """What the word index's own rows cost, apart from everything around them.

    Attributes:
        fts5_s: FTS5 inserting every row the lexical indexer writes (messages, units and
            chunks, both columns), the rows analysed beforehand, into lexical.db's own tables
            in memory, a transaction per indexer batch.
        analysis_s: the shared analyser cutting and stemming those rows' texts.
        messages: messages indexed.
    """

    fts5_s: float
    analysis_s: float
    messages: int


def index_floor(ingest_db: Path, unitize_db: Path, *, into: Path | str = ":memory:") -> IndexFloor:
    """The floor of the word index as designed: its FTS5 inserts and its analysis, each timed
    alone over the same files. No fetch, content hash, bookkeeping or feed is counted, so the
    lexical stage can only be slower. Rows are read and analysed a batch at a time; the index
    itself is held in memory, as the plain FTS5 reference's is (about lexical.db's size: 570
    MiB at 1M).

    Args:
        ingest_db, unitize_db: the producers' files the lexical stage indexed.
        into: where the rows go: lexical.db's tables in memory unless a file is named (a
            test reads that back to check the rows are the indexer's own).
    """
    from chatseek_core import db
    from chatseek_lexical import indexer
    from chatseek_lexical.schema import MIGRATIONS, OWNER

    mem = db.connect(into)
    db.migrate(mem, OWNER, MIGRATIONS)
    fts5_s = analysis_s = 0.0

    def insert(table: str, rows: list[tuple[int, str, str]]) -> None:
        nonlocal fts5_s
        started = time.perf_counter()
        with db.transaction(mem):
            mem.executemany(f"INSERT INTO {table} (rowid, raw, stem) VALUES (?, ?, ?)", rows)
        fts5_s += time.perf_counter() - started

    messages = 0
    src = db.connect(ingest_db, readonly=True)
    cursor = src.execute(
        "SELECT m.mid, m.text, md.file_name, md.extracted_text"
        " FROM messages m LEFT JOIN media md ON md.mid = m.mid ORDER BY m.mid"
    )
    while batch := cursor.fetchmany(indexer.DEFAULT_BATCH):
        contents = [(mid, indexer.message_content(t, f, x)) for mid, t, f, x in batch]
        started = time.perf_counter()
        rows = [(mid, *indexer.index_columns(content)) for mid, content in contents]
        analysis_s += time.perf_counter() - started
        insert("msg_fts", rows)
        messages += len(rows)
    src.close()
    src = db.connect(unitize_db, readonly=True)
    cursor = src.execute("SELECT unit_id, kind, text FROM units ORDER BY unit_id")
    while unit_batch := cursor.fetchmany(indexer.UNIT_BATCH_MAX):
        started = time.perf_counter()
        by_table: dict[str, list[tuple[int, str, str]]] = {"unit_fts": [], "chunk_fts": []}
        for unit_id, kind, text in unit_batch:
            by_table[indexer.fts_table(kind)].append((unit_id, *indexer.unit_columns(text)))
        analysis_s += time.perf_counter() - started
        for table, rows in by_table.items():
            insert(table, rows)
    src.close()
    mem.close()
    return IndexFloor(fts5_s=fts5_s, analysis_s=analysis_s, messages=messages)


def _fake_embed_reference(unitize_db: Path) -> tuple[float, int]:
    from chatseek_core import db
    from chatseek_core.fakes import MAX_TEXTS, FakeEmbedder

    src = db.connect(unitize_db, readonly=True)
    texts = [str(r[0]) for r in src.execute("SELECT text FROM units WHERE text != ''")]
    src.close()
    fake = FakeEmbedder()

    def run() -> None:
        for i in range(0, len(texts), MAX_TEXTS):
            fake.embed(texts[i : i + MAX_TEXTS], role="passage")

    took, _ = timed(run)
    return took, len(texts)


def _sizes(data: Path) -> dict[str, float]:
    out = {}
    for path in sorted(data.glob("*.db")):
        size = path.stat().st_size
        wal = path.with_name(path.name + "-wal")
        if wal.exists():
            size += wal.stat().st_size
        out[path.name] = round(size / 2**20, 2)
    return out


def _wal_sizes(data: Path) -> dict[str, float]:
    """MiB of each WAL file left beside its database (0 where none is left)."""
    return {
        path.name: round(path.stat().st_size / 2**20, 2) for path in sorted(data.glob("*.db-wal"))
    }


def pipeline_section(scale: str, progress: Callable[[str], None]) -> dict[str, Any]:
    """Stage throughput, peak RSS, database sizes and query latencies at ``scale``."""
    from bench.generate import generate
    from bench.queries import built_section, queries_section
    from chatseek_core.settings import load_settings

    n = SCALES[scale]
    out: dict[str, Any] = {"messages_requested": n, "cpus": cpu_count()}
    with tempfile.TemporaryDirectory(prefix="chatseek-bench-") as tmp:
        home = Path(tmp) / "home"
        export = Path(tmp) / "export"
        gen_s, counts = timed(lambda: generate(export / "result.json", n))
        size_mib = (export / "result.json").stat().st_size / 2**20
        out["generate"] = {
            "seconds": round(gen_s, 2),
            "msgs_per_s": round(sum(counts.values()) / gen_s),
            "export_mib": round(size_mib, 1),
            "chats": counts,
        }
        progress(f"pipeline {scale}: generated {sum(counts.values())} messages in {gen_s:.1f} s")
        env = stack_env(home)
        settings = load_settings(env=env)
        for folder in (settings.run_dir, settings.log_dir, settings.data_dir):
            folder.mkdir(parents=True, exist_ok=True)
        stack = Stack(env, settings)
        try:
            stack.start(STAGES[0][1])
            took, cli_cpu, stored = _cli_import(export, env)
            parse_s, parsed = _parse_only(export)
            out["messages"] = stored
            out["import"] = {
                "seconds": round(took, 2),
                "msgs_per_s": round(stored / took),
                "cpu_s": {**_rounded(stack.cpu()), "cli": round(cli_cpu, 2)},
                "peak_rss_mib": stack.rss(),
                "reference_parse_only_s": round(parse_s, 2),
                "reference_parse_only_msgs_per_s": round(parsed / parse_s),
                "over_parse_only": ratio(took, parse_s, 2),
            }
            progress(f"pipeline {scale}: import {out['import']}")
            data = settings.data_dir
            scratch = Path(tmp) / "reference"
            scratch.mkdir()
            in_process = {"unitize": _unitize_in_process, "lexical": _lexical_in_process}
            for stage, names in STAGES[1:4]:
                spawned, ready = stack.start(names)
                cpu_before = stack.cpu()
                seconds = _settle(settings, stage, ready)
                cpu_after = stack.cpu()
                out[stage] = {
                    "seconds": round(seconds, 2),
                    "msgs_per_s": round(stored / seconds),
                    "startup_s": round(ready - spawned, 2),
                    "cpu_s": _rounded({n: cpu_after[n] - cpu_before.get(n, 0.0) for n in names}),
                    "peak_rss_mib": {n: v for n, v in stack.rss().items() if n in names},
                }
                if stage in in_process:
                    ref_s = in_process[stage](data, scratch)
                    out[stage]["reference_in_process_s"] = round(ref_s, 2)
                    out[stage]["reference_in_process_msgs_per_s"] = round(stored / ref_s)
                    out[stage]["over_in_process"] = ratio(seconds, ref_s, 2)
                progress(f"pipeline {scale}: {stage} {out[stage]}")
            units = _count(data / "unitize.db", "SELECT COUNT(*) FROM units")
            out["units"] = units
            out["unitize"]["units_per_s"] = round(units / out["unitize"]["seconds"])
            fts_s, fts_n = _fts_reference(data / "ingest.db")
            out["lexical"]["reference_plain_fts5_s"] = round(fts_s, 2)
            out["lexical"]["reference_plain_fts5_msgs_per_s"] = round(fts_n / fts_s)
            out["lexical"]["over_plain_fts5"] = ratio(out["lexical"]["seconds"], fts_s, 2)
            floor = index_floor(data / "ingest.db", data / "unitize.db")
            out["lexical"]["floor"] = {
                "fts5_s": round(floor.fts5_s, 2),
                "analysis_s": round(floor.analysis_s, 2),
                "fts5_msgs_per_s": round(floor.messages / floor.fts5_s),
                "fts5_over_plain_fts5": ratio(floor.fts5_s, fts_s, 2),
                "with_analysis_msgs_per_s": round(
                    floor.messages / (floor.fts5_s + floor.analysis_s)
                ),
                "with_analysis_over_plain_fts5": ratio(floor.fts5_s + floor.analysis_s, fts_s, 2),
            }
            progress(f"pipeline {scale}: the word index's floor {out['lexical']['floor']}")
            embedded = _count(data / "vector.db", "SELECT COUNT(*) FROM embedded_units")
            fake_s, fake_n = _fake_embed_reference(data / "unitize.db")
            out["vector"].update(
                {
                    "units_embedded": embedded,
                    "units_per_s": round(embedded / out["vector"]["seconds"]),
                    "reference_fake_embed_units_per_s": round(fake_n / fake_s),
                    "over_fake_embed": ratio(
                        out["vector"]["seconds"], fake_s * embedded / fake_n, 2
                    ),
                }
            )
            stack.start(STAGES[4][1])
            big = n > SCALES["100k"]
            runs = {"runs": 30 if big else 100, "cli_runs": 10 if big else 20}
            out["queries"] = queries_section(settings, env, progress, **runs)
            out["queries"]["built"] = built_section(
                settings,
                env,
                progress,
                lambda: _settle_all(settings, ("lexical", "vector")),
                **runs,
            )
            out["peak_rss_mib"] = stack.rss()
            out["db_mib"] = _sizes(data)
        finally:
            stack.stop()
        out["db_mib_stopped"] = _sizes(data)
        out["wal_mib_stopped"] = _wal_sizes(data)
        out["words_end_to_end"] = words_end_to_end(export, Path(tmp) / "e2e", progress)
    return out


def _rounded(values: dict[str, float]) -> dict[str, float]:
    return {name: round(value, 2) for name, value in values.items()}


def _cli_import(export: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """``(wall seconds, the CLI's CPU seconds, messages imported)`` of one ``chatseek import``."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    took, proc = timed(
        lambda: subprocess.run(
            [sys.executable, "-m", "chatseek_gateway.cli", "import", str(export), "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=STAGE_TIMEOUT_S,
            check=True,
        )
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cli_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cli_cpu, int(json.loads(proc.stdout)["messages_imported"])


def words_end_to_end(export: Path, tmp: Path, progress: Callable[[str], None]) -> dict[str, Any]:
    """``chatseek import`` on a fresh stack running every word-path service at once, to words.

    Ingest, gateway, unitize and lexical run together as a user's stack does; the clock runs
    from the import's start to lexical reporting every word index complete. CPU is the sum over
    those services and the CLI: what making the archive searchable by words costs.
    """
    from chatseek_core.settings import load_settings

    env = stack_env(tmp / "home")
    settings = load_settings(env=env)
    for folder in (settings.run_dir, settings.log_dir, settings.data_dir):
        folder.mkdir(parents=True, exist_ok=True)
    stack = Stack(env, settings)
    try:
        stack.start(("ingest", "gateway", "unitize", "lexical"))
        cpu_before = stack.cpu()
        started = time.perf_counter()
        imported_s, cli_cpu, stored = _cli_import(export, env)
        # Done when unitize has cut everything stored and lexical has indexed all of it.
        while not (stage_done(settings, "unitize") and stage_done(settings, "lexical")):
            if time.perf_counter() - started > STAGE_TIMEOUT_S:
                raise RuntimeError(f"words not ready within {STAGE_TIMEOUT_S:.0f}s")
            time.sleep(POLL_S)
        seconds = time.perf_counter() - started
        cpu = {n: v - cpu_before.get(n, 0.0) for n, v in stack.cpu().items()}
        out: dict[str, Any] = {
            "messages": stored,
            "seconds": round(seconds, 2),
            "import_s": round(imported_s, 2),
            "msgs_per_s": round(stored / seconds),
            "cpu_s": {**_rounded(cpu), "cli": round(cli_cpu, 2)},
            "cpu_total_s": round(sum(cpu.values()) + cli_cpu, 2),
            "peak_rss_mib": stack.rss(),
        }
        out["peak_rss_total_mib"] = round(sum(out["peak_rss_mib"].values()), 1)
    finally:
        stack.stop()
    out["db_mib_stopped"] = _sizes(settings.data_dir)
    out["wal_mib_stopped"] = _wal_sizes(settings.data_dir)
    progress(f"words end to end: {out}")
    return out
