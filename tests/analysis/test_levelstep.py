"""The pooled lane's guards on a newest-run lead: every run grew (steady), and the newest
runs stepped up from the runs before them (app/analysis/levelstep.py)."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from app.analysis import level as lv
from app.analysis import levelstep as st
from app.analysis.runs import RunData
from tests.analysis.test_level import scaled, week
from tests.runfactory import EVERY, T0

AT = T0 + timedelta(days=7, hours=10)  # a quiet hour after the week of reference


@pytest.mark.parametrize(
    ("weights", "rho", "expected"),
    [
        ([1.0], 0.0, 1.0),  # one value: its own spread
        ([0.5, 0.5], 0.0, math.sqrt(0.5)),  # a mean of two independent values
        ([0.5, 0.5], 1.0, 1.0),  # of two that always move together: no better than one
        ([0.5, 0.5], 0.5, math.sqrt(1.5 / 2)),  # (1 + ρ) / 2
        ([-1.0, 1.0], 0.0, math.sqrt(2.0)),  # a difference of independent values
        ([-1.0, 1.0], 1.0, 0.0),  # a shared load cancels in a difference
        ([-1.0, 1.0], 0.9, math.sqrt(2 * 0.1)),  # 2 (1 − ρ)
        ([-0.5, -0.5, 1.0], 0.0, math.sqrt(1.5)),
    ],
)
def test_the_ar1_spread_of_a_weighted_sum(
    weights: list[float], rho: float, expected: float
) -> None:
    assert st.ar1_spread(weights, rho) == pytest.approx(expected)


def queue_runs(factors: list[float]) -> list[RunData]:
    """Runs 15 min apart from AT, the queue × each factor in turn."""
    return [scaled(AT + i * EVERY, 1.0, queue=factor) for i, factor in enumerate(factors)]


@pytest.fixture(scope="module")
def reference() -> lv.LevelReference:
    built = lv.LevelReference.build(week(load_sigma=0.2, rho=0.7))
    assert built is not None
    return built


@pytest.mark.parametrize(
    ("near", "far", "low", "high"),
    [
        ([3.0, 3.0], [3.0, 3.0], 4.0, math.inf),  # grown alike in every run: the mean's z
        ([3.0, 4.5], [3.0, 3.0], 4.0, math.inf),  # grown in every run, by more in one
        ([20.0, 1.0], [20.0, 1.0], -math.inf, 1.0),  # one wild run beside an ordinary one
        ([1.2, 20.0], [1.2, 20.0], -math.inf, 3.0),  # a wild run after a little busier one
    ],
)
def test_the_steady_evidence_is_the_least_run_of_each_window(
    reference: lv.LevelReference, near: list[float], far: list[float], low: float, high: float
) -> None:
    windows = [queue_runs(near), queue_runs(far)]
    steady = st.steady_z([reference, reference], windows, "queue")
    pooled = lv.pooled_z([reference, reference], windows, "queue")
    assert steady is not None and pooled is not None
    assert low <= steady <= high
    assert steady <= pooled[0] + 1e-9  # a window's least is never above its mean


@pytest.fixture(scope="module")
def correlated() -> lv.LevelReference:
    """A week of a queue under a strongly correlated load (σ 0.45, lag-1 0.9)."""
    built = lv.LevelReference.build(week(load_sigma=0.45, rho=0.9))
    assert built is not None
    return built


CLIMB = [1.0, 1.3, 1.7, 2.2, 2.8, 3.3, 3.8, 4.2, 4.5, 4.5]  # two hours up to × 4.5


@pytest.mark.parametrize(
    ("factors", "low", "high"),
    [
        ([1.0] * 8 + [4.5, 4.5], 4.0, math.inf),  # a step of the whole growth
        (CLIMB, -math.inf, 2.5),  # as high now, hardly above the runs just before
        ([4.5] * 10, -1.0, 1.0),  # as high for two hours: no step at all
        ([4.5] * 8 + [1.0, 1.0], -math.inf, -4.0),  # a step down is no growth
    ],
)
def test_a_step_is_measured_from_the_runs_before(
    correlated: lv.LevelReference, factors: list[float], low: float, high: float
) -> None:
    step = st.step_z([correlated], [queue_runs(factors)], "queue", 2)
    assert step is not None
    assert low <= step <= high


def test_a_climb_and_a_step_to_the_same_height_have_the_same_mean(
    correlated: lv.LevelReference,
) -> None:
    # What the pooled mean cannot tell apart under a correlated load, the step does.
    step, climb = queue_runs([1.0] * 8 + [4.5, 4.5]), queue_runs(CLIMB)
    means = [lv.pooled_z([correlated], [window[-2:]], "queue") for window in (step, climb)]
    assert means[0] is not None and means[1] is not None
    assert means[0][0] == pytest.approx(means[1][0])
    assert means[0][0] >= 4.0  # past pooled_min_z: the mean alone would take both
    steps = [st.step_z([correlated], [window], "queue", 2) for window in (step, climb)]
    assert steps[0] is not None and steps[1] is not None
    assert steps[0] >= 4.0 > 2 * steps[1]


def test_the_step_counts_a_shared_load_once(reference: lv.LevelReference) -> None:
    window = queue_runs([1.0] * 8 + [4.5, 4.5])
    one = st.step_z([reference], [window], "queue", 2)
    both = st.step_z([reference, reference], [window, window], "queue", 2)
    assert one is not None and both == pytest.approx(one)


@pytest.mark.parametrize(
    ("factors", "series"),
    [
        ([1.0] * 7 + [4.5, 4.5], "queue"),  # a run short of the block before the newest two
        ([1.0] * 8 + [4.5, 4.5], "nothing"),  # a series the reference does not have
    ],
)
def test_no_step_without_its_runs_or_its_series(
    reference: lv.LevelReference, factors: list[float], series: str
) -> None:
    assert st.step_z([reference], [queue_runs(factors)], series, 2) is None
