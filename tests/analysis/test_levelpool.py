"""app/analysis/levelpool.py: runs of two vantages met in time, the share of noise they
have in common, the weight each vantage's increment gets in the pooled CUSUM, and the
check that a phase grew at every vantage."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pytest

from app.analysis import levelpool as lp
from app.analysis.level import LevelReference
from app.analysis.runs import RunData
from tests.runfactory import EVERY, LLM, T0, make_run


@pytest.mark.parametrize(
    ("a", "b", "tolerance", "expected"),
    [
        ([0, 900, 1800], [240, 1140, 2040], 450, ([0, 1, 2], [0, 1, 2])),  # 4 min apart
        ([0, 900, 1800], [600, 1500], 450, ([1, 2], [0, 1])),  # 0 is 600 s from the nearest
        ([0, 900], [890, 910], 450, ([1], [0])),  # a tie: the earlier
        ([0, 900], [], 450, ([], [])),
        ([], [5.0], 450, ([], [])),
        ([100], [0, 1000], 450, ([0], [0])),  # nearest is below
    ],
)
def test_runs_meet_their_nearest_within_the_tolerance(
    a: list[float], b: list[float], tolerance: float, expected: tuple[list[int], list[int]]
) -> None:
    i, j = lp.met(np.array(a, dtype=float), np.array(b, dtype=float), tolerance)
    assert (i.tolist(), j.tolist()) == expected


RNG = np.random.default_rng(7)
X = RNG.normal(size=400)
NOISE = RNG.normal(size=400)


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [
        (X, X, 1.0),
        (X, -X, -1.0),
        (X, NOISE, 0.0),  # independent: about 0
        (X, 0.6 * X + 0.8 * NOISE, 0.6),  # a share of 0.6 in common
        (X, np.zeros(400), 0.0),  # no spread: nothing shared
        (np.append(X, 1e6), np.append(NOISE, 1e6), 0.0),  # one wild run in both: still apart
        (np.array([1.0, np.nan]), np.array([1.0, 2.0]), math.nan),  # too few pairs
    ],
)
def test_the_correlation_is_robust_to_a_wild_run(
    x: np.ndarray, y: np.ndarray, expected: float
) -> None:
    found = lp.correlation(x, y)
    if math.isnan(expected):
        assert math.isnan(found)
    else:
        assert found == pytest.approx(expected, abs=0.1)


def vantage(
    name: str, offset: timedelta, load: np.ndarray, own_sigma: float, seed: int, days: int = 4
) -> list[RunData]:
    """A run every 15 min; the queue × ``load`` (the server's, the same at every vantage),
    the transfer × its own noise (this vantage's path: ``own_sigma``)."""
    rng = np.random.default_rng(seed)
    runs = []
    for i in range(days * 96):
        medians = dict(LLM, queue=LLM["queue"] * math.exp(load[i]), transfer=40.0)
        medians["transfer"] *= math.exp(rng.normal(0.0, own_sigma))
        at = T0 + i * EVERY + offset
        runs.append(make_run(rng, at, medians, sigma=0.02, run_sigma=0.0, vantage=name))
    return runs


def two_vantages(days: int = 4) -> tuple[LevelReference, LevelReference]:
    load = np.random.default_rng(3).normal(0.0, 0.3, size=days * 96)
    near = LevelReference.build(vantage("eu", timedelta(0), load, 0.3, 1, days))
    far = LevelReference.build(vantage("us", timedelta(minutes=4), load, 0.3, 2, days))
    assert near is not None and far is not None
    return near, far


@pytest.mark.parametrize(
    ("series", "low", "high"),
    [
        ("queue", 0.9, 1.0),  # the server's load, seen alike from both
        ("transfer", 0.0, 0.25),  # each vantage's own noise
        ("server", 1.0, 1.0),  # a phase neither has: unknown, taken as whole
    ],
)
def test_the_share_of_noise_two_vantages_have_in_common(
    series: str, low: float, high: float
) -> None:
    near, far = two_vantages()
    assert low <= lp.shared(near, far, series, EVERY.total_seconds() / 2) <= high


def test_runs_that_never_meet_share_all_they_might() -> None:
    # A vantage half an interval off, and a tolerance of a minute: no run meets another.
    near, _ = two_vantages()
    apart = LevelReference.build(vantage("us", timedelta(minutes=7), np.zeros(4 * 96), 0.3, 2))
    assert apart is not None
    assert lp.shared(near, apart, "transfer", 60.0) == 1.0


def test_a_phase_one_vantage_lacks_is_not_pooled() -> None:
    near, far = two_vantages()
    weight = lp.weights([near, far])
    by_name = dict(zip(lp.POOLED, weight, strict=True))
    assert by_name["prefill"] > 0 and by_name["transfer"] > 0
    assert by_name["server"] == 0  # neither sees a "server" phase: nothing to pool
    assert by_name["queue"] == 0  # shared noise: two vantages count for one, not pooled
    assert by_name["transfer"] >= 0.8  # independent noise: both vantages' evidence adds up
    assert lp.weights([near]).tolist() == [0.0] * len(lp.POOLED)  # one vantage: no pooling


@pytest.mark.parametrize(
    ("steps", "weight", "expected"),
    [
        # series of a reference of LLM phases: end-to-end, connect, network, queue, prefill,
        # generation, transfer
        ([9, 9, 9, 1, 2, 3, 4], [1, 1, 1, 1, 1], [1, 2, 3, 0, 4]),
        ([9, 9, 9, 1, 2, 3, 4], [0.5, 1, 0, 1, 0.9], [0.5, 2, 0, 0, 3.6]),
    ],
)
def test_a_vantages_increments_as_the_pooled_row(
    steps: list[float], weight: list[float], expected: list[float]
) -> None:
    near, _ = two_vantages()
    assert near.series == ("end-to-end", "connect", "network", *lp.POOLED[:3], "transfer")
    row = lp.pooled_steps(near, np.array(steps, dtype=float), np.array(weight, dtype=float))
    assert row.tolist() == pytest.approx(expected)


@pytest.mark.parametrize(
    ("means", "allowances", "expected"),
    [
        ([0.6, 0.5], [0.11, 0.11], True),  # grew at both
        ([0.6, 0.02], [0.11, 0.11], False),  # one vantage's path: not the server's
        ([0.12, 0.2], [0.11, 0.15], True),
        ([0.12, 0.14], [0.11, 0.15], False),  # under the far vantage's own least slowdown
        ([], [], False),
    ],
)
def test_a_pooled_crossing_is_the_services_only_where_every_vantage_saw_growth(
    means: list[float], allowances: list[float], expected: bool
) -> None:
    assert lp.grew_everywhere(means, allowances) is expected


@pytest.mark.parametrize(
    ("vantages", "rho", "expected"),
    [
        (2, 0.0, 1.0),  # independent: two vantages' evidence adds up
        (2, 0.3, 1 / 1.3),  # 2 / 1.3 = 1.54 vantages' worth
        (2, 0.4, 0.0),  # 1.43: under MIN_GAIN, not pooled
        (3, 0.5, 0.5),  # 1.5 exactly
        (3, 0.8, 0.0),
        (2, 1.0, 0.0),  # all of it shared
    ],
)
def test_a_vantages_weight_is_what_its_noise_of_its_own_is_worth(
    monkeypatch: pytest.MonkeyPatch, vantages: int, rho: float, expected: float
) -> None:
    monkeypatch.setattr(lp, "shared", lambda *_args: rho)
    near, far = two_vantages()
    weight = lp.weights([near, far, near][:vantages])
    assert dict(zip(lp.POOLED, weight, strict=True))["transfer"] == pytest.approx(expected)
