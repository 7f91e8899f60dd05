"""The bench lets the machine go quiet before each section, and says how long that took."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import measure, report


def test_settle_reports_the_idle_share_it_waited_for() -> None:
    if measure._cpu_times() is None:
        pytest.skip("no /proc/stat on this system: settle only syncs there")
    quiet = measure.settle(max_wait_s=0.0, window_s=0.05)
    assert set(quiet) == {"waited_s", "idle"}
    assert 0.0 <= quiet["idle"] <= 1.0
    assert quiet["waited_s"] >= 0.0


def test_settle_gives_up_after_its_longest_wait_on_a_busy_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A machine that never idles: every window is all busy time.
    ticks = iter(range(0, 10_000, 100))
    monkeypatch.setattr(measure, "_cpu_times", lambda: (0.0, float(next(ticks))))
    quiet = measure.settle(max_wait_s=0.2, window_s=0.05)
    assert quiet["idle"] == 0.0
    assert quiet["waited_s"] >= 0.2


def test_settle_without_proc_stat_only_syncs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measure, "_cpu_times", lambda: None)
    assert set(measure.settle(window_s=0.01)) == {"waited_s"}


def test_the_report_says_how_long_each_section_waited(tmp_path: Path) -> None:
    results = {
        "stamp": "t",
        "scale": "10k",
        "machine": "test",
        "settle": {"units": {"waited_s": 1.5, "idle": 0.95}, "embed": {"waited_s": 60.0}},
    }
    text = report.markdown(results, {})
    assert "units 1.5 s (idle 95%)" in text
    assert "embed 60.0 s" in text
