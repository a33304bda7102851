"""The reference's run-to-run spread of two phases' log ratio (app/analysis/leadspread.py),
and dominant_shift's lead judged against it: a gain that windows of runs make by
themselves is no change of leader, however tight the bootstrap over two or three runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.analysis import detectors as d
from app.analysis.detectors import Signal
from app.analysis.dominance import phase_mix
from app.analysis.leadspread import (
    MAX_RHO,
    MIN_RUNS,
    LogSpread,
    log_ratio,
    log_spread,
    window_factor,
)
from app.analysis.runs import RunData, phase_order
from tests.alerts.test_evaluator import CHANGE, PARAMS
from tests.runfactory import EVERY, LLM, make_run


@pytest.mark.parametrize(
    ("rho", "runs", "factor"),
    [
        (0.0, 1, 1.0),  # one run: its own variance
        (0.0, 3, 1 / 3),  # independent runs average out
        (0.5, 2, (2 + 2 * 0.5) / 4),
        (0.5, 3, (3 + 2 * (2 * 0.5 + 0.25)) / 9),
        (1.0, 3, 1.0),  # runs that move as one: a window is no better than a run
    ],
)
def test_the_window_factor_of_an_ar1_series(rho: float, runs: int, factor: float) -> None:
    assert window_factor(rho, runs) == pytest.approx(factor)


def spread(lag0: list[list[float]], lag1: list[list[float]]) -> LogSpread:
    return LogSpread(("a", "b"), np.array([1.0, 3.0]), np.array(lag0), np.array(lag1), 100)


ZERO = [[0.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize(
    ("given", "pair", "runs", "sd"),
    [
        # var(a − b) = 4 + 2 − 2·1 = 4: a run's lead moves by 2
        (spread([[4, 1], [1, 2]], ZERO), ("a", "b"), 1, 2.0),
        (spread([[4, 1], [1, 2]], ZERO), ("a", "b"), 3, 2 / math.sqrt(3)),
        (spread([[4, 1], [1, 2]], ZERO), ("b", "a"), 3, 2 / math.sqrt(3)),  # either sign
        # lag-1 autocovariance 2 + 1 = 3 of 4: ρ = 0.75, two runs barely average out
        (spread([[4, 1], [1, 2]], [[2, 0], [0, 1]]), ("a", "b"), 2, 2 * math.sqrt(0.875)),
        # runs that alternate are not counted on to cancel: ρ taken as 0
        (spread([[4, 1], [1, 2]], [[-2, 0], [0, -1]]), ("a", "b"), 2, 2 / math.sqrt(2)),
        # a trend more than MAX_RHO: capped
        (
            spread([[4, 1], [1, 2]], [[4, 0], [0, 4]]),
            ("a", "b"),
            2,
            2 * math.sqrt(window_factor(MAX_RHO, 2)),
        ),
        (spread([[1, 1], [1, 1]], ZERO), ("a", "b"), 3, 0.0),  # phases that move as one
        (spread([[4, 1], [1, 2]], ZERO), ("a", "queue"), 3, None),  # never timed
    ],
)
def test_a_log_ratio_s_spread_over_a_window_of_runs(
    given: LogSpread, pair: tuple[str, str], runs: int, sd: float | None
) -> None:
    found = given.sd(*pair, runs)
    assert found == (None if sd is None else pytest.approx(sd))


@pytest.mark.parametrize(
    ("pair", "usual"), [(("a", "b"), -2.0), (("b", "a"), 2.0), (("a", "queue"), None)]
)
def test_the_usual_log_ratio(pair: tuple[str, str], usual: float | None) -> None:
    assert spread(ZERO, ZERO).usual(*pair) == usual


@pytest.mark.parametrize(
    ("medians", "ratio"),
    [
        ({"a": 200.0, "b": 100.0}, math.log(2)),
        ({"a": 100.0, "b": 200.0}, -math.log(2)),
        ({"a": 0.0, "b": 1.0}, math.log(1e-3)),  # a phase at 0: the floor, never −∞
        ({"b": 1.0}, math.log(1e-3)),  # a phase the window lacks: likewise
    ],
)
def test_a_window_s_log_ratio(medians: dict[str, float], ratio: float) -> None:
    assert log_ratio(medians, "a", "b") == pytest.approx(ratio)


def correlated_runs(seed: int, count: int, rho: float) -> list[RunData]:
    """Runs whose queue is scaled by an AR(1) load shared by the run's samples (ρ between
    runs): the queue's share, and so its lead, moves in stretches."""
    rng = np.random.default_rng(seed)
    load, runs = 0.0, []
    for i in range(count):
        load = rho * load + math.sqrt(1 - rho**2) * rng.normal(0.0, 0.4)
        medians = LLM | {"queue": LLM["queue"] * math.exp(load)}
        runs.append(make_run(rng, CHANGE + i * EVERY, medians, n=10))
    return runs


@pytest.mark.parametrize("rho", [0.0, 0.8])
def test_the_spread_from_single_runs_is_that_of_windows_of_them(rho: float) -> None:
    runs = correlated_runs(1, 1500, rho)
    found = log_spread(runs[:700])
    assert found is not None and found.runs == 700
    # Measured: the log ratios of windows of three runs' pooled medians, as dominant_shift
    # reads them.
    ratios = []
    for end in range(703, 1500):
        ratios.append(log_ratio(phase_mix(runs[end - 3 : end]).medians, "generation", "queue"))
    sd = found.sd("generation", "queue", 3)
    assert sd == pytest.approx(float(np.std(ratios)), rel=0.2)
    # The usual ratio is the reference's own: its windows' mean.
    own = [
        log_ratio(phase_mix(runs[end - 3 : end]).medians, "generation", "queue")
        for end in range(3, 701)
    ]
    assert found.usual("generation", "queue") == pytest.approx(float(np.mean(own)), abs=0.03)
    single = found.sd("generation", "queue", 1)
    assert single is not None and sd is not None
    if rho == 0.0:
        assert sd == pytest.approx(single / math.sqrt(3), rel=0.15)
    else:  # correlated runs: a window of three is hardly calmer than one run
        assert sd > 0.85 * single


def test_too_few_runs_have_no_spread() -> None:
    assert log_spread(correlated_runs(2, MIN_RUNS - 1, 0.0)) is None
    assert log_spread(correlated_runs(2, MIN_RUNS, 0.0)) is not None


NEAR = LLM | {"generation": 150.0}  # leads the queue by ~10 pp in three runs
REASONING = LLM | {"generation": 400.0}  # leads by ~46 pp


def even(sd: float) -> LogSpread:
    """Every phase's log median moving independently by ``sd`` run to run around LLM's:
    a log ratio by ``sd`` · √2, and by that over √3 in a window of three."""
    names = phase_order(LLM)
    means = np.log(np.array([LLM[name] for name in names]))
    return LogSpread(names, means, np.eye(len(names)) * sd**2, 0 * np.eye(len(names)), 500)


def three(seed: int, medians: dict[str, float]) -> list[RunData]:
    rng = np.random.default_rng(seed)
    return [make_run(rng, CHANGE + i * EVERY, medians) for i in range(3)]


# NEAR moves generation/queue by log(150/80) ≈ 0.63; REASONING by log(400/80) ≈ 1.6.
@pytest.mark.parametrize(
    ("window", "given", "signal"),
    [
        (three(1, NEAR), None, Signal.HIT),  # the bootstrap alone: three runs agree
        (three(1, NEAR), even(0.05), Signal.HIT),  # runs that move little: the gain is news
        (three(1, NEAR), even(0.2), Signal.HOLD),  # runs that move a lot: windows make it
        (three(2, REASONING), even(0.2), Signal.HIT),  # a leader change is far beyond it
        (three(2, REASONING), even(0.5), Signal.HOLD),  # only on a target that noisy
    ],
    ids=["no-spread", "calm", "noisy", "large", "very-noisy"],
)
def test_a_gain_must_clear_the_reference_s_run_to_run_spread(
    window: list[RunData], given: LogSpread | None, signal: Signal
) -> None:
    rng = np.random.default_rng(0)
    finding = d.dominant_finding(window, "queue", "generation", PARAMS, rng, given)
    assert finding.signal is signal
    assert finding.numbers["lead_low_pp"] > 0  # the bootstrap over three runs is sure
    if given is not None:
        sd = given.sd("generation", "queue", 3)
        usual = given.usual("generation", "queue")
        assert sd is not None and usual is not None
        ratio = log_ratio(phase_mix(window).medians, "generation", "queue")
        assert finding.numbers["moved_spreads"] == round((ratio - usual) / sd, 1)


def test_the_spread_off_leaves_the_bootstrap_alone() -> None:
    off = PARAMS.model_copy(update={"dominant_spread_z": 0})
    rng = np.random.default_rng(0)
    finding = d.dominant_finding(three(1, NEAR), "queue", "generation", off, rng, even(0.15))
    assert finding.signal is Signal.HIT and "moved_spreads" not in finding.numbers


def drifting_runs(seed: int, count: int, drift: float) -> list[RunData]:
    """Runs whose generation shrinks steadily by the factor ``drift`` over ``count`` runs."""
    rng = np.random.default_rng(seed)
    runs = []
    for i in range(count):
        medians = LLM | {"generation": LLM["generation"] * drift ** (i / count)}
        runs.append(make_run(rng, CHANGE + i * EVERY, medians, n=10))
    return runs


@pytest.mark.parametrize("drift", [0.5, 0.2])
def test_a_slow_drift_in_the_reference_is_not_counted_as_run_to_run_noise(drift: float) -> None:
    steady = log_spread(drifting_runs(3, 600, 1.0))
    drifting = log_spread(drifting_runs(3, 600, drift))
    assert steady is not None and drifting is not None
    sd, with_drift = steady.sd("generation", "queue", 3), drifting.sd("generation", "queue", 3)
    assert sd is not None and with_drift == pytest.approx(sd, rel=0.15)
