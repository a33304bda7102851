"""The oracle's statistics (bench/detection/oracle): LLRs, CUSUM delays, calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.detection.oracle.cusum import (
    Stream,
    alarms,
    calibrate,
    cusum_paths,
    excursion_peaks,
    first_alarm,
)
from bench.detection.oracle.events import arl
from bench.detection.oracle.statistic import (
    Gauss,
    Hypothesis,
    RunStats,
    bin_counts,
    information,
    llr,
)

ONE_BIN = (np.array([1.0]),)


def normal(mean: float, var: float) -> Hypothesis:
    return Hypothesis(Gauss(np.array([mean]), np.array([[var]])), ONE_BIN)


def siegmund_arl(delta: float, h: float, drift_sign: int) -> float:
    """Siegmund's approximation of a Gaussian LLR CUSUM's ARL (unit variance, shift δ):
    under the change (+1) or before it (−1)."""
    b = drift_sign * (h + 1.166 * delta)
    return (math.exp(-b) + b - 1) / (delta**2 / 2)


@pytest.mark.parametrize(
    ("pre", "post", "x", "expected"),
    [
        ((0.0, 1.0), (1.0, 1.0), 0.0, -0.5),  # δx − δ²/2
        ((0.0, 1.0), (1.0, 1.0), 2.0, 1.5),
        ((0.0, 1.0), (-2.0, 1.0), 1.0, -4.0),
        ((1.0, 0.25), (1.0, 1.0), 1.0, -math.log(2)),  # wider: −½ ln(4)
        ((0.0, 1.0), (0.0, 4.0), 2.0, 2 - 0.5 - math.log(2)),
    ],
)
def test_gaussian_llr_is_the_log_density_ratio(
    pre: tuple[float, float], post: tuple[float, float], x: float, expected: float
) -> None:
    got = llr(normal(*pre), normal(*post), np.array([[x]]), (np.array([[20.0]]),))
    assert got[0] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("counts", "p", "q", "expected"),
    [
        ([10, 10], [0.5, 0.5], [0.5, 0.5], 0.0),
        ([18, 2], [0.9, 0.1], [0.8, 0.2], 18 * math.log(8 / 9) + 2 * math.log(2)),
        ([0, 20], [0.9, 0.1], [0.8, 0.2], 20 * math.log(2)),
    ],
)
def test_tail_bin_llr_is_multinomial(
    counts: list[float], p: list[float], q: list[float], expected: float
) -> None:
    gauss = Gauss(np.zeros(1), np.eye(1))
    pre, post = Hypothesis(gauss, (np.array(p),)), Hypothesis(gauss, (np.array(q),))
    got = llr(pre, post, np.zeros((1, 1)), (np.array([counts], dtype=float),))
    assert got[0] == pytest.approx(expected)


@pytest.mark.parametrize(("delta", "samples"), [(1.0, 20), (0.3, 20), (2.0, 10)])
def test_information_is_the_expected_llr_after_the_change(delta: float, samples: int) -> None:
    p, q = np.array([0.9, 0.1]), np.array([0.7, 0.3])
    pre = Hypothesis(Gauss(np.zeros(1), np.eye(1)), (p,))
    post = Hypothesis(Gauss(np.array([delta]), np.eye(1)), (q,))
    expected = delta**2 / 2 + samples * float(q @ np.log(q / p))
    assert information(pre, post, samples) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("ratios", "edges", "expected"),
    [
        ([0.5, 1.0, 1.5, 3.0], [1.0, 2.0], [1, 2, 1]),
        ([0.5, math.nan, 9.0], [1.0, 2.0], [1, 0, 1]),
    ],
)
def test_bin_counts_leave_untimed_samples_out(
    ratios: list[float], edges: list[float], expected: list[int]
) -> None:
    got = bin_counts(np.array([ratios]), np.array(edges))
    assert got[0].tolist() == expected


@pytest.mark.parametrize(
    ("increments", "threshold", "delay"),
    [
        ([3, 3, 3], 8.0, 3),
        ([-5, 4, 4, 4], 8.0, 3),  # the CUSUM never goes below 0
        ([9], 8.0, 1),
        ([4, -4, 4, -4], 5.0, None),
    ],
)
def test_first_alarm_counts_runs_from_one(
    increments: list[float], threshold: float, delay: int | None
) -> None:
    assert first_alarm(np.array(increments, dtype=float), threshold) == delay


@pytest.mark.parametrize(
    ("increments", "expected"),
    [
        ([5.0, 5, 5, 5, -1, 10], 1),  # one excursion, however high
        ([5.0, 5, -20, 10, -20, 9], 2),
        ([], 0),
    ],
)
def test_alarms_count_excursions_that_reach_the_threshold(
    increments: list[float], expected: int
) -> None:
    assert alarms(np.array(increments), 10.0) == expected


def test_excursion_peaks_one_per_excursion() -> None:
    increments = np.array([[1.0, 1, -5, 2, -1, -3]])
    assert cusum_paths(increments)[0].tolist() == [1, 2, 0, 2, 1, 0]
    assert excursion_peaks(increments).tolist() == [2, 2, 0]


@pytest.mark.parametrize(
    ("interval_s", "pooled", "expected"), [(900, False, 34560), (900, True, 17280)]
)
def test_budget_accounting(interval_s: float, pooled: bool, expected: float) -> None:
    assert arl(interval_s, pooled) == pytest.approx(expected)


def gaussian_stream(delta: float) -> Stream:
    """Unit-variance runs resampled from 50,000 draws, no shared load, one tail bin."""
    draws = np.random.default_rng(4).standard_normal((50000, 1))
    null = RunStats(draws, np.full((50000, 1), 20.0))
    return Stream(normal(0.0, 1.0), normal(delta, 1.0), (), 0.0, 0.0, 0.0, 96, (null,))


def first_passages(delta: float, h: float, mean: float, shape: tuple[int, int]) -> float:
    """The mean run of the first alarm of many CUSUMs of N(mean, δ²) increments."""
    increments = mean + delta * np.random.default_rng(6).standard_normal(shape)
    crossed = cusum_paths(increments) >= h
    assert crossed.any(axis=1).all()
    return float((np.argmax(crossed, axis=1) + 1).mean())


@pytest.mark.parametrize(("delta", "target"), [(1.0, 300.0), (2.0, 150.0)])
def test_calibrated_threshold_gives_the_asked_arl(delta: float, target: float) -> None:
    h = calibrate(gaussian_stream(delta), target, seed=5)
    assert siegmund_arl(delta, h, -1) == pytest.approx(target, rel=0.3)
    measured = first_passages(delta, h, -(delta**2) / 2, (1000, 4000))
    assert measured == pytest.approx(target, rel=0.25)


@pytest.mark.parametrize(("delta", "h"), [(1.0, 5.0), (0.5, 4.0), (2.0, 8.3)])
def test_delay_on_a_step_change_is_siegmunds(delta: float, h: float) -> None:
    measured = first_passages(delta, h, delta**2 / 2, (4000, 200))
    assert measured == pytest.approx(siegmund_arl(delta, h, +1), rel=0.08)
