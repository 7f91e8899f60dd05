"""The bench report's growth charts: one per figure the issue asks for, memory included."""

from __future__ import annotations

from pathlib import Path

from bench import report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _scale(messages: int, unitize_mib: float) -> dict[str, object]:
    return {
        "messages_requested": messages,
        "messages": messages,
        "peak_rss_mib": {"ingest": 90.0, "unitize": unitize_mib, "lexical": 120.0},
        "import": {"msgs_per_s": 12_000.0, "reference_parse_only_msgs_per_s": 38_000.0},
        "unitize": {"msgs_per_s": 20_000.0},
        "lexical": {"msgs_per_s": 12_500.0},
        "vector": {"units_per_s": 3_000.0},
        "queries": {
            "ranked": {"hybrid": {"grpc": {"p50_ms": messages / 10_000}}},
            "strict": {"phrase": {"in_service": {"p50_ms": messages / 20_000}}},
        },
    }


def test_growth_charts_include_peak_memory_per_service(tmp_path: Path) -> None:
    results = {"pipeline": {"100k": _scale(100_000, 300.0), "10k": _scale(10_000, 120.0)}}

    images = report.charts(results, tmp_path / "run")

    assert images["peak RSS per service against archive size"] == "run-memory.png"
    assert images["latency against archive size"] == "run-latency.png"
    for name in images.values():
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)


def test_one_scale_draws_no_growth_chart(tmp_path: Path) -> None:
    images = report.charts({"pipeline": {"10k": _scale(10_000, 120.0)}}, tmp_path / "run")

    assert "peak RSS per service against archive size" not in images
    assert not (tmp_path / "run-memory.png").exists()


def test_a_strict_target_stands_beside_sqlites_own_bm25_floor() -> None:
    pipe = _scale(1_000_000, 300.0)
    pipe["queries"]["strict"]["phrase"] = {  # type: ignore[index]
        "in_service": {"p50_ms": 84.0},
        "fts5_bm25": {"p50_ms": 80.0},
        "word_matches_mean": 27_311,
    }

    targets = {t.name: t for t in report._pipeline_targets(pipe, "1m archive", True)}

    phrase = targets["strict phrase p50 inside the service (ms)"]
    assert (phrase.value, phrase.met) == (84.0, False)
    assert phrase.note == (
        "FTS5's own bm25 top-21 on the same index 80.0 ms (27,311 matches a query)"
    )
    # A kind the run did not time says so rather than standing beside a floor.
    assert targets["strict and_two_words p50 inside the service (ms)"].note == (
        "not measured in this run"
    )
