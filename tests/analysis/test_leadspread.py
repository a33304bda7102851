"""The reference's run-to-run spread of a lead (app/analysis/leadspread.py), and
dominant_shift's lead judged against it: a lead that windows of runs reach by themselves
is no change of leader, however tight the bootstrap over two or three runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.analysis import detectors as d
from app.analysis.detectors import Signal
from app.analysis.dominance import phase_mix
from app.analysis.leadspread import MAX_RHO, MIN_RUNS, ShareSpread, share_spread, window_factor
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


def spread(lag0: list[list[float]], lag1: list[list[float]]) -> ShareSpread:
    return ShareSpread(("a", "b"), np.array(lag0), np.array(lag1), 100)


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
def test_a_lead_s_spread_over_a_window_of_runs(
    given: ShareSpread, pair: tuple[str, str], runs: int, sd: float | None
) -> None:
    found = given.lead_sd(*pair, runs)
    assert found == (None if sd is None else pytest.approx(sd))


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
    found = share_spread(runs[:700])
    assert found is not None and found.runs == 700
    # Measured: the pooled leads of windows of three runs, as dominant_shift reads them.
    leads = []
    for end in range(703, 1500):
        shares = phase_mix(runs[end - 3 : end]).shares
        leads.append(shares["generation"] - shares["queue"])
    sd = found.lead_sd("generation", "queue", 3)
    assert sd == pytest.approx(float(np.std(leads)), rel=0.2)
    single = found.lead_sd("generation", "queue", 1)
    assert single is not None and sd is not None
    if rho == 0.0:
        assert sd == pytest.approx(single / math.sqrt(3), rel=0.15)
    else:  # correlated runs: a window of three is hardly calmer than one run
        assert sd > 0.85 * single


def test_too_few_runs_have_no_spread() -> None:
    assert share_spread(correlated_runs(2, MIN_RUNS - 1, 0.0)) is None
    assert share_spread(correlated_runs(2, MIN_RUNS, 0.0)) is not None


NEAR = LLM | {"generation": 150.0}  # leads the queue by ~10 pp in three runs
REASONING = LLM | {"generation": 400.0}  # leads by ~46 pp


def even(sd_pp: float) -> ShareSpread:
    """Every phase's share moving independently by ``sd_pp`` run to run: a lead by
    ``sd_pp`` · √2, and by that over √3 in a window of three."""
    names = phase_order(LLM)
    return ShareSpread(names, np.eye(len(names)) * (sd_pp / 100) ** 2, 0 * np.eye(len(names)), 500)


def three(seed: int, medians: dict[str, float]) -> list[RunData]:
    rng = np.random.default_rng(seed)
    return [make_run(rng, CHANGE + i * EVERY, medians) for i in range(3)]


@pytest.mark.parametrize(
    ("window", "given", "signal"),
    [
        (three(1, NEAR), None, Signal.HIT),  # the bootstrap alone: three runs agree
        (three(1, NEAR), even(1.0), Signal.HIT),  # runs that move little: the lead is news
        (three(1, NEAR), even(4.0), Signal.HOLD),  # runs that move a lot: windows reach it
        (three(2, REASONING), even(4.0), Signal.HIT),  # a leader change is far beyond it
        (three(2, REASONING), even(20.0), Signal.HOLD),  # only on a target that noisy
    ],
    ids=["no-spread", "calm", "noisy", "large", "very-noisy"],
)
def test_a_lead_must_clear_the_reference_s_run_to_run_spread(
    window: list[RunData], given: ShareSpread | None, signal: Signal
) -> None:
    finding = d.dominant_finding(
        window, "queue", "generation", PARAMS, np.random.default_rng(0), given
    )
    assert finding.signal is signal
    assert finding.numbers["lead_low_pp"] > 0  # the bootstrap over three runs is sure
    if given is not None:
        n = finding.numbers
        sd = given.lead_sd("generation", "queue", 3)
        assert sd is not None and n["spread_pp"] == round(100 * sd, 1)
        assert n["spread_low_pp"] == pytest.approx(n["lead_pp"] - 3.5 * n["spread_pp"], abs=0.2)


def test_the_spread_off_leaves_the_bootstrap_alone() -> None:
    off = PARAMS.model_copy(update={"dominant_spread_z": 0})
    rng = np.random.default_rng(0)
    finding = d.dominant_finding(three(1, NEAR), "queue", "generation", off, rng, even(4.0))
    assert finding.signal is Signal.HIT and "spread_pp" not in finding.numbers
