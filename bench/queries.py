"""Warm query latencies on a settled stack, each beside its in-process reference.

Ranked search (lexical, dense, hybrid without and with rerank): the gateway's ``Search`` RPC,
the ``chatseek search`` process (wall time, start-up included), and ``chatseek_fusion.hybrid
.search`` called in this process with the same lists computed in-process (lexical ``ranked``,
``chatseek_vector.knn`` with the fake embedder, the fake reranker) — so ``grpc / in-process``
is what the RPC hops cost. Strict search (two-word AND, phrase, field-filtered date range,
prefix wildcard): ``chatseek_lexical.query.search`` in-process on the same lexical.db (inside
the service, its relevance pages scored in rowid ranges on every core as the service does), the
lexical service's RPC, the gateway's RPC and ``chatseek messages search``.
SQLite's floor for a relevance page is FTS5's own ``bm25`` over every match of the compiled word
query, the best 21 kept, nothing joined; a query's cost grows with its matches, which the report
gives. The CLI's floor is ``chatseek --help`` (interpreter and imports, no RPC). Each RPC and its
in-process reference are timed in alternation, so a noisy spell hits both.

Before the first query every database file is read through once. The latencies are those of a
stack in use, whose files sit in the OS page cache; the hosts these benchmarks run on reclaim
idle page cache within minutes, and a 1M stack's first hybrid query after the vector stage
then read its word index from disk for longer than fusion's 10 s list deadline.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.measure import interleaved, latency, ratio, run_wall, timings

__all__ = ["RANKED", "STRICT", "built_section", "bytecode_cached", "queries_section"]

RUNS = 100
CLI_RUNS = 20
WARM = 3
WARM_CHUNK = 8 * 2**20
LIMIT = 20
TIMEZONE = "UTC"
RANKED = (
    "аренда квартиры залог",
    "bank account fee",
    "виза документы консульство",
    "cheap flight ticket",
    "сантехник ремонт",
    "internet router plan",
    "врач страховка",
    "moving district market",
)
STRICT: dict[str, tuple[str, ...]] = {
    "and_two_words": ("квартира AND залог", "flat AND deposit", "банк AND карта", "rent AND fee"),
    "phrase": ('"квартира аренда"', '"flat rent"', '"аренда залог"', '"rent deposit"'),
    "field_date_range": (
        "from:Anna AND date:[2024-01-01 TO 2024-01-31]",
        "from:Boris AND date:[2024-01-10 TO 2024-02-10]",
        'chat:"Bench Forum" AND date:[2024-01-01 TO 2024-01-20]',
        "from:Clara AND date:[2024-01-05 TO 2024-02-05]",
    ),
    "prefix_wildcard": ("банк*", "rent*", "докум*", "insur*"),
}
MODES = (("lexical", False), ("dense", False), ("hybrid", False), ("hybrid", True))


def _kind(mode: str, rerank: bool) -> str:
    return f"{mode}_rerank" if rerank else mode


class _LocalSignals:
    """``hybrid.Signals`` computed in this process, as the services compute them."""

    def __init__(self, lexical: Any, vector: Any, space: Any) -> None:
        from chatseek_core.fakes import FakeEmbedder, FakeReranker

        self.lexical = lexical
        self.vector = vector
        self.space = space
        self.embedder = FakeEmbedder()
        self.reranker = FakeReranker()

    def _filter(self, flt: Any) -> dict[str, Any]:
        return {
            "account_scope": list(flt.accounts) or None,
            "chat_ids": list(flt.chat_ids) or None,
            "since": flt.since or None,
            "until": flt.until or None,
        }

    async def words(self, query: str, flt: Any, limit: int) -> list[tuple[int, float, int]]:
        from chatseek_lexical import ranked, readiness

        found = ranked.unit_list(
            self.lexical, query, kinds=list(flt.kinds) or None, limit=limit, **self._filter(flt)
        )
        readiness.words_ready(self.lexical)
        return [(u, s, 0) for u, s in found]

    async def messages(self, query: str, flt: Any, limit: int) -> list[tuple[int, float, int]]:
        from chatseek_lexical import ranked, readiness

        found = ranked.message_list(
            self.lexical, query, kinds=list(flt.kinds) or None, limit=limit, **self._filter(flt)
        )
        readiness.words_ready(self.lexical)
        return list(found)

    async def chunks(
        self, query: str, flt: Any, limit: int, any_word: bool
    ) -> list[tuple[int, float, int]]:
        from chatseek_lexical import ranked, readiness

        found = ranked.chunk_list(self.lexical, query, limit=limit, **self._filter(flt))
        readiness.words_ready(self.lexical)
        return [(u, s, 0) for u, s in found]

    async def meaning(
        self, query: str, flt: Any, limit: int, *, current_chunks_only: bool = False
    ) -> Any:
        from chatseek_fusion.hybrid import Neighbours
        from chatseek_vector import index, knn

        vector = self.embedder.embed([query], role="query")[0]
        found = knn.knn(
            self.vector,
            self.space,
            vector,
            knn.KnnFilter(
                accounts=tuple(flt.accounts),
                chat_ids=tuple(flt.chat_ids),
                since=flt.since,
                until=flt.until,
                kinds=tuple(flt.kinds),
                current_chunks_only=current_chunks_only,
            ),
            limit,
        )
        index.pending_count(self.vector)
        return Neighbours(units=[(u, c) for u, c, _ in found])

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        return self.reranker.rerank(query, list(texts))


def _in_process(settings: Any) -> tuple[Callable[[str, str, bool], Any], Callable[[], None]]:
    """A function running one hybrid search in-process, and a closer."""
    from chatseek.common.v1 import common_pb2
    from chatseek.ingest.v1 import ingest_service_pb2_grpc
    from chatseek_core import config as config_file
    from chatseek_core import db
    from chatseek_core.client import aio_channel
    from chatseek_fusion import hybrid
    from chatseek_fusion.scope import resolve_scope
    from chatseek_vector import spaces

    data = {name: settings.db_path(name) for name in ("ingest", "unitize", "lexical", "vector")}
    fusion = db.connect(":memory:")
    for name in ("ingest", "unitize", "lexical"):
        db.attach_readonly(fusion, data[name], name)
    lexical = db.connect(data["lexical"], readonly=True)
    db.attach_readonly(lexical, data["unitize"], "unitize")
    db.attach_readonly(lexical, data["ingest"], "ingest")
    vector = db.connect(data["vector"], readonly=True, vec=True)
    db.attach_readonly(vector, data["unitize"], "unitize")
    space = spaces.current_space(vector)
    signals = _LocalSignals(lexical, vector, space)
    config = config_file.load(settings.config_path).search
    loop = asyncio.new_event_loop()

    async def scope() -> Any:
        channel = aio_channel(settings.addr("ingest"))
        try:
            flt, _ = await resolve_scope(
                ingest_service_pb2_grpc.IngestServiceStub(channel),
                chats=[],
                source=common_pb2.SOURCE_ACTIVE,
                account="",
                default_account=settings.account,
                since=0,
                until=0,
                kinds=list(hybrid.DEFAULT_KINDS),
            )
            return flt
        finally:
            await channel.close()

    flt = loop.run_until_complete(scope())

    def run(query: str, mode: str, rerank: bool) -> Any:
        params = hybrid.SearchParams(query=query, flt=flt, mode=mode, k=10, rerank=rerank)
        return loop.run_until_complete(hybrid.search(lambda: fusion, signals, params, config))

    def close() -> None:
        loop.close()
        for conn in (fusion, lexical, vector):
            conn.close()

    return run, close


def _ranked(
    settings: Any,
    env: Mapping[str, str],
    progress: Callable[[str], None],
    runs: int = RUNS,
    cli_runs: int = CLI_RUNS,
    modes: Sequence[tuple[str, bool]] = MODES,
) -> Any:
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek.gateway.v1 import search_service_pb2_grpc
    from chatseek_core.client import sync_channel
    from chatseek_core.wire_json import parse_mode

    channel = sync_channel(settings.addr("gateway"))
    stub = search_service_pb2_grpc.SearchServiceStub(channel)
    run, close = _in_process(settings)
    cached = bytecode_cached(env, settings.home)
    out: dict[str, Any] = {}
    try:
        for mode, rerank in modes:
            kind = _kind(mode, rerank)

            def grpc_call(i: int, mode: str = mode, rerank: bool = rerank) -> None:
                q = RANKED[i % len(RANKED)]
                stub.Search(
                    pb.SearchRequest(query=q, mode=parse_mode(mode), k=10, rerank=rerank),
                    timeout=60,
                )

            def local(i: int, mode: str = mode, rerank: bool = rerank) -> None:
                run(RANKED[i % len(RANKED)], mode, rerank)

            argv = [sys.executable, "-m", "chatseek_gateway.cli", "search", "--mode", mode]
            argv += ["--rerank" if rerank else "--no-rerank", "--json", "--"]

            def cli(i: int, argv: list[str] = argv) -> None:
                run_wall([*argv, RANKED[i % len(RANKED)]], env)

            def cli_cached(i: int, argv: list[str] = argv) -> None:
                run_wall([*argv, RANKED[i % len(RANKED)]], cached)

            interleaved({"grpc": grpc_call, "in_process": local}, WARM)
            took = interleaved({"grpc": grpc_call, "in_process": local}, runs)
            entry: dict[str, Any] = {
                "grpc": latency(took["grpc"]),
                "in_process": latency(took["in_process"]),
                "cli_wall": latency(timings(cli, cli_runs)),
                "cli_wall_cached": latency(timings(cli_cached, cli_runs)),
            }
            grpc_p50 = entry["grpc"]["p50_ms"]
            local_p50 = entry["in_process"]["p50_ms"]
            entry["grpc_over_in_process"] = ratio(grpc_p50, local_p50)
            entry["grpc_overhead_pct"] = round((grpc_p50 / local_p50 - 1) * 100, 1)
            entry["cli_over_grpc"] = ratio(entry["cli_wall"]["p50_ms"], grpc_p50, 2)
            hits = run(RANKED[0], mode, rerank)
            entry["hits_first_query"] = len(hits.get("hits", []))
            out[kind] = entry
            progress(
                f"queries {kind}: grpc p50 {grpc_p50} ms, in-process {local_p50} ms,"
                f" cli {entry['cli_wall']['p50_ms']} ms"
                f" ({entry['cli_wall_cached']['p50_ms']} ms with bytecode cached)"
            )
    finally:
        close()
        channel.close()
    return out


def _strict(
    settings: Any,
    env: Mapping[str, str],
    progress: Callable[[str], None],
    runs: int = RUNS,
    cli_runs: int = CLI_RUNS,
) -> Any:
    from chatseek.common.v1 import common_pb2
    from chatseek.gateway.v1 import gateway_service_pb2 as pb
    from chatseek.gateway.v1 import search_service_pb2_grpc
    from chatseek.lexical.v1 import lexical_service_pb2 as lpb
    from chatseek.lexical.v1 import lexical_service_pb2_grpc
    from chatseek_core import db
    from chatseek_core.client import sync_channel
    from chatseek_lexical import readiness
    from chatseek_lexical.query import SearchRequest, search
    from chatseek_lexical.query.execute import prepare
    from chatseek_lexical.query.limits import Deadline
    from chatseek_lexical.query.split import Splitter

    conn = db.connect(settings.db_path("lexical"), readonly=True)
    splitter = Splitter(settings.db_path("lexical"))  # as the service scores a relevance page
    db.attach_readonly(conn, settings.db_path("ingest"), "ingest")
    db.attach_readonly(conn, settings.db_path("unitize"), "unitize")
    gw_channel = sync_channel(settings.addr("gateway"))
    lx_channel = sync_channel(settings.addr("lexical"))
    gateway = search_service_pb2_grpc.SearchServiceStub(gw_channel)
    lexical = lexical_service_pb2_grpc.LexicalServiceStub(lx_channel)
    cached = bytecode_cached(env, settings.home)
    out: dict[str, Any] = {}
    try:
        for kind, queries in STRICT.items():

            def request(i: int, queries: tuple[str, ...] = queries) -> Any:
                return SearchRequest(
                    query=queries[i % len(queries)],
                    account=settings.account,
                    source="active",
                    timezone=TIMEZONE,
                    limit=LIMIT,
                    words_ready=readiness.message_lag(conn).caught_up,
                )

            def in_service(i: int) -> Any:
                return search(conn, request(i), splitter=splitter)

            # SQLite's own floor for a relevance page: FTS5's bm25 over every match of the
            # compiled word query, best LIMIT + 1 kept, nothing joined (None: ordered by date).
            ranks = []
            for i in range(len(queries)):
                prepared = prepare(conn, request(i), Deadline(request(i).budgets.time_ms))
                ranks.append(prepared.compiler.rank_query(prepared.tree.root))

            def via_lexical(i: int, queries: tuple[str, ...] = queries) -> None:
                lexical.SearchMessages(
                    lpb.SearchMessagesRequest(
                        query=queries[i % len(queries)],
                        source=common_pb2.SOURCE_ACTIVE,
                        timezone=TIMEZONE,
                        limit=LIMIT,
                    ),
                    timeout=60,
                )

            def via_gateway(i: int, queries: tuple[str, ...] = queries) -> None:
                gateway.SearchMessages(
                    pb.SearchMessagesRequest(
                        query=queries[i % len(queries)],
                        source=common_pb2.SOURCE_ACTIVE,
                        timezone=TIMEZONE,
                        limit=LIMIT,
                    ),
                    timeout=60,
                )

            def fts5_bm25(i: int, ranks: list[str | None] = ranks) -> None:
                conn.execute(
                    "SELECT rowid, bm25(msg_fts, 1.0, 0.0) AS score FROM msg_fts"
                    " WHERE msg_fts MATCH ? ORDER BY score LIMIT ?",
                    (ranks[i % len(ranks)], LIMIT + 1),
                ).fetchall()

            variants = {"in_service": in_service, "lexical_grpc": via_lexical, "grpc": via_gateway}
            if all(ranks):
                variants["fts5_bm25"] = fts5_bm25
            interleaved(variants, WARM)
            took = interleaved(variants, runs)
            entry: dict[str, Any] = {"queries": list(queries)}
            if all(ranks):
                entry["word_matches_mean"] = round(
                    statistics.mean(
                        conn.execute(
                            "SELECT count(*) FROM msg_fts WHERE msg_fts MATCH ?", (r,)
                        ).fetchone()[0]
                        for r in ranks
                    )
                )
            entry.update({name: latency(values) for name, values in took.items()})
            argv = [sys.executable, "-m", "chatseek_gateway.cli", "messages", "search"]
            argv += ["--timezone", TIMEZONE, "--limit", str(LIMIT), "--json", "--"]
            for name, cli_env in (("cli_wall", env), ("cli_wall_cached", cached)):
                entry[name] = latency(
                    [run_wall([*argv, queries[i % len(queries)]], cli_env) for i in range(cli_runs)]
                )
            envelope = in_service(0).to_json()
            entry["hits_first_query"] = len(envelope.get("items", []))
            entry["grpc_over_in_service"] = ratio(
                entry["grpc"]["p50_ms"], entry["in_service"]["p50_ms"]
            )
            entry["cli_over_grpc"] = ratio(entry["cli_wall"]["p50_ms"], entry["grpc"]["p50_ms"], 2)
            if "fts5_bm25" in entry:
                entry["in_service_over_fts5"] = ratio(
                    entry["in_service"]["p50_ms"], entry["fts5_bm25"]["p50_ms"], 2
                )
            out[kind] = entry
            progress(
                f"queries strict {kind}: in-service p50 {entry['in_service']['p50_ms']} ms,"
                f" grpc {entry['grpc']['p50_ms']} ms, cli {entry['cli_wall']['p50_ms']} ms,"
                f" {entry['hits_first_query']} hits"
            )
    finally:
        splitter.close()
        conn.close()
        gw_channel.close()
        lx_channel.close()
    return out


def bytecode_cached(env: Mapping[str, str], home: Path) -> dict[str, str]:
    """``env`` as a user's machine runs the CLI: bytecode written once under ``home`` and read
    back (these machines set ``PYTHONDONTWRITEBYTECODE``, so every start recompiles)."""
    out = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out["PYTHONPYCACHEPREFIX"] = str(home / "pycache")
    return out


def _warm_page_cache(data_dir: Path) -> tuple[float, float]:
    """Read every database file under ``data_dir`` once; ``(seconds, MiB read)``."""
    started = time.perf_counter()
    total = 0
    for path in sorted(data_dir.glob("*.db*")):
        with path.open("rb") as f:
            while chunk := f.read(WARM_CHUNK):
                total += len(chunk)
    return time.perf_counter() - started, total / 2**20


def queries_section(
    settings: Any,
    env: Mapping[str, str],
    progress: Callable[[str], None],
    *,
    runs: int = RUNS,
    cli_runs: int = CLI_RUNS,
) -> dict[str, Any]:
    """Ranked and strict query latencies through gRPC, the CLI and in-process.

    ``runs`` calls per variant (``cli_runs`` CLI processes): fewer at 1M, where a call costs
    more and a p50 of 30 says as much as one of 100.
    """
    warmed_s, warmed_mib = _warm_page_cache(settings.data_dir)
    progress(f"queries: read {warmed_mib:.0f} MiB of databases in {warmed_s:.1f} s")
    floor = [
        run_wall([sys.executable, "-m", "chatseek_gateway.cli", "--help"], env)
        for _ in range(cli_runs // 2)
    ]
    # One untimed search of each kind writes the cached variant's bytecode.
    for command in (["search", "--json", "--", RANKED[0]], ["messages", "search", "--", "rent"]):
        run_wall(
            [sys.executable, "-m", "chatseek_gateway.cli", *command],
            bytecode_cached(env, settings.home),
        )
    return {
        "runs": runs,
        "page_cache_warmup": {"seconds": round(warmed_s, 2), "mib": round(warmed_mib, 1)},
        "cli_floor_help": latency(floor),
        "ranked": _ranked(settings, env, progress, runs, cli_runs),
        "strict": _strict(settings, env, progress, runs, cli_runs),
    }


def built_section(
    settings: Any,
    env: Mapping[str, str],
    progress: Callable[[str], None],
    settle: Callable[[], float],
    *,
    runs: int = RUNS,
    cli_runs: int = CLI_RUNS,
) -> dict[str, Any]:
    """Build every chat's conversations (``chatseek conversations build --all``), wait until
    ``settle`` says their chunks are indexed by words and embedded, read the databases through
    again, and time hybrid search again: with builds it also ranks the chunks and weighs each
    unit's conversation."""
    import subprocess
    import time

    argv = [sys.executable, "-m", "chatseek_gateway.cli", "conversations", "build", "--all"]
    started = time.perf_counter()
    subprocess.run([*argv, "--json"], env=dict(env), check=True, capture_output=True)
    built = time.perf_counter() - started
    embedded = settle()
    progress(f"queries: conversations built in {built:.1f} s, chunks indexed in {embedded:.1f} s")
    _warm_page_cache(settings.data_dir)
    ranked = _ranked(settings, env, progress, runs, cli_runs, modes=(("hybrid", False),))
    # The same builds again, as after new agent answers or a model update: every chat's
    # chunks are looked up against its previous build and kept, and its peak is unitize's.
    started = time.perf_counter()
    again = subprocess.run([*argv, "--json"], env=dict(env), check=True, capture_output=True)
    rebuilt = time.perf_counter() - started
    chats = json.loads(again.stdout)["chats"]
    progress(f"queries: conversations rebuilt in {rebuilt:.1f} s")
    return {
        "build_s": round(built, 2),
        "chunks_embedded_s": round(embedded, 2),
        "ranked": ranked,
        "rebuild_s": round(rebuilt, 2),
        "rebuild_chunks": sum(int(c["chunks"]) for c in chats),
        "rebuild_chunks_reused": sum(int(c["chunks_reused"]) for c in chats),
    }
