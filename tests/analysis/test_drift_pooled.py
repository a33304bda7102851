"""baseline_drift's tails over several days: the mean of the newest kept days against
the spread ÷ √days, and the spread never under a day's counting noise."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from app.analysis import drift as dr
from app.analysis import driftpack as dp
from app.analysis.detectors import DetectorParams, Signal
from app.analysis.detectors.drift import drift_finding, sentence
from tests.driftfactory import runs
from tests.runfactory import T0

PARAMS = DetectorParams()
NOW = T0 + timedelta(days=30)
SPREAD = 0.14  # a queue tail's day-to-day spread at 10 samples a run (bench/detection)


def _drift(
    queue_tail_days: list[float], today: float, counting: float = 0.0
) -> tuple[dr.Drift, np.ndarray]:
    """A baseline with the queue tail's spread at ``SPREAD`` (the rest calm) and its
    counting noise at ``counting``, kept daily values of the queue tail (oldest first, the
    newest today) and today's value."""
    baseline = dr.freeze(list(runs(1, T0, 7)))
    assert baseline is not None
    k = len(baseline.phases)
    column = 1 + k + baseline.phases.index("queue")
    spread = np.full(baseline.width, 0.01)
    spread[column] = SPREAD
    noise = np.zeros(k)
    noise[baseline.phases.index("queue")] = counting
    drift = dr.Drift.start(replace(baseline, spread=spread, counting=noise), 0.0)
    first = NOW - timedelta(days=len(queue_tail_days) - 1)
    for i, tail in enumerate(queue_tail_days):
        value = np.zeros(baseline.width)
        value[column] = tail
        dr.keep_day(drift, first + timedelta(days=i), value)
    value = np.zeros(baseline.width)
    value[column] = today
    return drift, value


@pytest.mark.parametrize(
    ("days", "today", "signal", "tail_days", "counting"),
    [
        ([], 0.0, Signal.CLEAR, None, 0.0),
        ([0.45], 0.45, Signal.HOLD, None, 0.0),  # one day: 0.45 < 5 × 0.14
        ([0.0, 0.45, 0.45, 0.45], 0.45, Signal.HIT, 3, 0.0),  # 5 × 0.14 / √3 ≈ ln 1.5
        ([0.45, 0.45], 0.45, Signal.HOLD, None, 0.0),  # two days: 5 × 0.14 / √2 = 0.49
        # A week at +35 %: under the least 50 %, but its excess over drifttail.K sums to 8
        # of the 0.14 (the CUSUM over kept days tells it, over the 7 days it holds):
        ([0.3] * 7, 0.3, Signal.HIT, 7, 0.0),
        ([0.45] * 3 + [0.0] * 7, 0.0, Signal.CLEAR, None, 0.0),  # a week ago is no more
        ([0.0, 0.75], 0.75, Signal.HIT, 1, 0.0),  # a day's own value, past 5 spreads
        ([0.13] * 7, 0.13, Signal.CLEAR, None, 0.0),  # under half of each window's, under K
        ([0.21] * 7, 0.21, Signal.HOLD, None, 0.0),  # the CUSUM at 3.5 of its 6: past half
        ([-0.6] * 7, -0.6, Signal.CLEAR, None, 0.0),  # fewer samples in the tail is no alert
        # A calm week's spread is not trusted under the counting noise (5 × 0.25 / √3):
        ([0.0, 0.45, 0.45, 0.45], 0.45, Signal.HOLD, None, 0.25),
        ([0.0, 0.75], 0.75, Signal.HIT, 1, 0.25),  # … the day's own test keeps its spread
    ],
)
def test_a_tail_over_its_newest_days(
    days: list[float], today: float, signal: Signal, tail_days: int | None, counting: float
) -> None:
    drift, value = _drift(days, today, counting)
    finding = drift_finding(drift, value, PARAMS, NOW)
    assert finding.signal is signal
    if tail_days is not None:
        assert finding.numbers["leading"] == "queue tail"
        assert finding.numbers["tail_days"] == tail_days


def test_the_pooled_tail_says_over_how_many_days() -> None:
    drift, value = _drift([0.0, 0.5, 0.5, 0.5], 0.5)
    n = drift_finding(drift, value, PARAMS, NOW).numbers

    class Who:
        target, from_phase, to_phase = "chat", None, None

    then = n["baseline_over_p95_pct"]["queue"]
    assert f"samples over the last 3 days are over their p95 ({then:g} % then)" in sentence(
        Who(), n
    )
    del n["tail_days"]  # an alert stored before the pooled tails: a day's value
    assert "over the last" not in sentence(Who(), n)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_tails_counting_noise_is_binomial_over_a_days_samples(seed: int) -> None:
    week = list(runs(seed, T0, 7))
    baseline = dr.freeze(week)
    assert baseline is not None
    per_day = sum(len(run.totals) for run in week) / 7
    counting = np.sqrt((1 - baseline.tail0) / (baseline.tail0 * per_day))
    assert baseline.counting == pytest.approx(counting, rel=0.05)  # a day's count, ± its runs
    assert 0.05 < float(baseline.counting.max()) < 0.2  # 20 samples, a run every 15 min


def test_a_version_2_state_reads_with_no_counting_noise() -> None:
    drift, _ = _drift([0.1, 0.2], 0.2, counting=0.25)
    floats = dp.pack(drift)
    k = len(drift.baseline.phases)
    at = 2 + k + 5 + k + k + drift.baseline.width  # the counting noise's place
    old = [2.0, *floats[1:at], *floats[at + k :]]
    back = dp.unpack(old)
    assert back is not None and np.all(back.baseline.counting == 0.0)
    assert np.array_equal(back.days, drift.days)
    assert np.array_equal(back.baseline.spread, drift.baseline.spread)
