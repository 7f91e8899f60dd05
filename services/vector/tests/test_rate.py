"""The embedding rate behind the ETA of ``chatseek embed status``, on a hand-driven clock."""

from __future__ import annotations

from chatseek_vector.worker import (
    EMBED_BATCH,
    EMBED_BATCH_MIN,
    RATE_BATCHES,
    REQUEST_TARGET_S,
    Rate,
    batch_size,
)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_eta_is_the_remaining_units_at_the_rate_of_the_recent_batches() -> None:
    clock = _Clock()
    rate = Rate(clock)
    assert rate.estimate(10) == {"units_per_s": None, "eta_s": None, "last_write_s_ago": None}
    rate.begin()
    for _ in range(3):
        clock.now += 2.0
        rate.wrote(100)
    clock.now += 5.0
    assert rate.estimate(600) == {"units_per_s": 50.0, "eta_s": 12.0, "last_write_s_ago": 5.0}
    assert rate.estimate(0)["eta_s"] == 0.0


def test_with_the_queues_text_known_the_eta_is_its_characters_at_the_recent_pace() -> None:
    """Long posts first, short windows after: by units the ETA would read 12 s, by the text
    the remaining units hold (a fifth of the characters a unit so far) 2.4 s."""
    clock = _Clock()
    rate = Rate(clock)
    rate.begin()
    for _ in range(3):
        clock.now += 2.0
        rate.wrote(100, 100_000)
    assert rate.chars_per_s() == 50_000.0
    assert rate.estimate(600)["eta_s"] == 12.0
    assert rate.estimate(600, 120_000.0)["eta_s"] == 2.4
    assert rate.estimate(0, 0.0)["eta_s"] == 0.0


def test_without_characters_written_the_eta_falls_back_to_units() -> None:
    clock = _Clock()
    rate = Rate(clock)
    rate.begin()
    clock.now += 2.0
    rate.wrote(100)
    assert rate.chars_per_s() is None
    assert rate.estimate(300, 5_000.0)["eta_s"] == 6.0


def test_the_time_between_passes_does_not_lower_the_rate() -> None:
    clock = _Clock()
    rate = Rate(clock)
    rate.begin()
    clock.now += 1.0
    rate.wrote(10)
    clock.now += 3600.0
    rate.begin()
    clock.now += 1.0
    rate.wrote(10)
    assert rate.units_per_s() == 10.0


def test_only_the_most_recent_batches_count() -> None:
    clock = _Clock()
    rate = Rate(clock)
    rate.begin()
    clock.now += 100.0
    rate.wrote(1)
    for _ in range(RATE_BATCHES):
        clock.now += 1.0
        rate.wrote(20)
    assert rate.units_per_s() == 20.0


def test_a_batch_holds_a_few_seconds_of_work_at_the_recent_rate() -> None:
    assert batch_size(None) == EMBED_BATCH_MIN
    assert batch_size(2.0) == EMBED_BATCH_MIN
    assert batch_size(20.0) == int(20.0 * REQUEST_TARGET_S)
    assert batch_size(5000.0) == EMBED_BATCH
