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


def test_a_strict_target_shows_the_least_a_split_over_the_cores_can_take() -> None:
    pipe = _scale(1_000_000, 300.0)
    pipe["cpus"] = 2
    pipe["queries"]["strict"]["and_two_words"] = {  # type: ignore[index]
        "in_service": {"p50_ms": 78.5},
        "fts5_bm25": {"p50_ms": 128.9},
        "word_matches_mean": 93_988,
    }

    targets = {t.name: t for t in report._pipeline_targets(pipe, "1m archive", True)}

    assert targets["strict and_two_words p50 inside the service (ms)"].note == (
        "FTS5's own bm25 top-21 on the same index 128.9 ms (93,988 matches a query);"
        " split over 2 cores at best 64.5 ms"
    )


def test_the_word_index_targets_stand_beside_the_floor_of_its_own_rows() -> None:
    pipe = _scale(1_000_000, 300.0)
    pipe["cpus"] = 2
    pipe["lexical"] = {
        "seconds": 60.0,
        "msgs_per_s": 16_667,
        "over_plain_fts5": 4.68,
        "floor": {
            "fts5_s": 26.5,
            "analysis_s": 22.0,
            "fts5_msgs_per_s": 37_736,
            "fts5_over_plain_fts5": 2.07,
            "with_analysis_msgs_per_s": 20_619,
            "with_analysis_over_plain_fts5": 3.79,
        },
    }
    pipe["words_end_to_end"] = {"messages": 1_000_000, "msgs_per_s": 12_275, "cpu_total_s": 139.8}
    pipe["queries"] = {}

    targets = {t.name: t for t in report._pipeline_targets(pipe, "1m archive", True)}
    rows = "\n".join(report._pipeline_md("1m", pipe, {}))

    assert targets["lexical word indexes (msgs/s)"].note == (
        "4.68× plain FTS5 (target ≤ 3×); its own rows' FTS5 inserts alone 37,736 msgs/s"
        " (2.07× plain FTS5), with their analysis 20,619 (3.79×)"
    )
    assert targets["`chatseek import` to every word index caught up (msgs/s)"].note == (
        "139.8 CPU s over every process; 20,000 msgs/s leaves 100 on 2 cores"
    )
    # The stage's time over the floor's: 60 / 26.5 and 60 / (26.5 + 22).
    assert (
        "FTS5 inserting the index's own rows, analysed beforehand, in memory | 37,736 | 2.26"
        in rows
    )
    assert "the same inserts and the analyser cutting their rows | 20,619 | 1.24" in rows
