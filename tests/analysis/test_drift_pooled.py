"""baseline_drift's tails over several days: the mean of the newest kept days against
the spread ÷ √days, and the spread never under a day's counting noise."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from app.analysis import drift as dr
from app.analysis.detectors import DetectorParams, Signal
from app.analysis.detectors.drift import drift_finding, sentence
from tests.driftfactory import runs
from tests.runfactory import T0

PARAMS = DetectorParams()
NOW = T0 + timedelta(days=30)
SPREAD = 0.14  # a queue tail's day-to-day spread at 10 samples a run (bench/detection)


def _drift(queue_tail_days: list[float], today: float) -> tuple[dr.Drift, np.ndarray]:
    """A baseline with the queue tail's spread at ``SPREAD`` (the rest calm), kept daily
    values of the queue tail (oldest first, the newest today) and today's value."""
    baseline = dr.freeze(list(runs(1, T0, 7)))
    assert baseline is not None
    k = len(baseline.phases)
    column = 1 + k + baseline.phases.index("queue")
    spread = np.full(baseline.width, 0.01)
    spread[column] = SPREAD
    drift = dr.Drift.start(replace(baseline, spread=spread), 0.0)
    first = NOW - timedelta(days=len(queue_tail_days) - 1)
    for i, tail in enumerate(queue_tail_days):
        value = np.zeros(baseline.width)
        value[column] = tail
        dr.keep_day(drift, first + timedelta(days=i), value)
    value = np.zeros(baseline.width)
    value[column] = today
    return drift, value


@pytest.mark.parametrize(
    ("days", "today", "signal", "tail_days"),
    [
        ([], 0.0, Signal.CLEAR, None),
        ([0.45], 0.45, Signal.HOLD, None),  # one day: 0.45 < 5 × 0.14
        ([0.0, 0.45, 0.45, 0.45], 0.45, Signal.HIT, 3),  # 5 × 0.14 / √3 ≈ ln 1.5
        ([0.45, 0.45], 0.45, Signal.HOLD, None),  # two days: 5 × 0.14 / √2 = 0.49
        ([0.3] * 7, 0.3, Signal.HOLD, None),  # a week's 7.6 σ, but under the least 50 %
        ([0.45] * 3 + [0.0] * 7, 0.0, Signal.CLEAR, None),  # a week ago is no more
        ([0.0, 0.75], 0.75, Signal.HIT, 1),  # a day's own value, past 5 spreads
        ([0.2] * 7, 0.2, Signal.CLEAR, None),  # under half of what each window needs
        ([-0.6] * 7, -0.6, Signal.CLEAR, None),  # fewer samples in the tail is no alert
    ],
)
def test_a_tail_over_its_newest_days(
    days: list[float], today: float, signal: Signal, tail_days: int | None
) -> None:
    drift, value = _drift(days, today)
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
def test_a_tails_spread_is_never_under_its_counting_noise(seed: int) -> None:
    week = list(runs(seed, T0, 7))
    baseline = dr.freeze(week)
    assert baseline is not None
    k = len(baseline.phases)
    per_day = sum(len(run.totals) for run in week) / 7
    counting = np.sqrt((1 - baseline.tail0) / (baseline.tail0 * per_day))
    assert np.all(baseline.spread[1 + k :] >= counting * 0.97)  # a day's count, ± its runs
    assert np.all(np.isfinite(baseline.spread)) and not math.isnan(baseline.tail0.sum())
