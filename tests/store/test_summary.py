"""A run's summary, taken with one ``np.percentile`` over a matrix when the run is stored,
says exactly what percentiles taken phase by phase say."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest

from app.analysis.summary import (
    FAILED,
    QUANTILES,
    TIMED,
    PhaseStats,
    Summary,
    column_percentiles,
    dominant_phase,
    percentiles,
    shares,
    summarize,
)
from app.probe.sample import Status


@dataclass(frozen=True)
class Point:
    status: str
    total_ms: float
    phases: dict[str, float] = field(default_factory=dict)


def phase_by_phase(samples: Sequence[Point]) -> Summary:
    """The summary as it was computed before: one ``percentiles`` call per phase."""
    timed = [s for s in samples if s.status in TIMED]
    names = list(dict.fromkeys(name for s in timed for name in s.phases))
    per_phase = {name: percentiles([s.phases.get(name, 0.0) for s in timed]) for name in names}
    phase_shares = shares({name: q["p50"] for name, q in per_phase.items()})
    return Summary(
        n=len(timed),
        errors=sum(s.status in FAILED for s in samples),
        deadline_exceeded=sum(s.status == Status.DEADLINE_EXCEEDED for s in samples),
        total=percentiles([s.total_ms for s in timed]),
        phases={name: PhaseStats(per_phase[name], phase_shares[name]) for name in names},
        dominant=dominant_phase(phase_shares),
    )


OK, CUT, ERR, HTTP = "ok", "deadline_exceeded", "error", "http_error"

CASES = {
    "no samples": [],
    "only failures": [Point(ERR, 0.0), Point(HTTP, 40.0)],
    "one sample": [Point(OK, 100.0, {"connect": 10.0, "server": 90.0})],
    "integer phases": [Point(OK, 30, {"a": 10, "b": 20}), Point(OK, 31, {"a": 11, "b": 20})],
    "a phase some samples lack": [
        Point(OK, 100.0, {"connect": 10.0, "server": 90.0}),
        Point(OK, 80.0, {"server": 80.0}),
        Point(OK, 95.0, {"server": 85.0, "transfer": 10.0}),
    ],
    "censored and failed mixed in": [
        Point(OK, 100.0, {"connect": 10.0, "server": 90.0}),
        Point(CUT, 500.0, {"connect": 10.0, "server": 490.0}),
        Point(ERR, 0.0),
        Point(OK, 120.0, {"connect": 12.0, "server": 108.0}),
    ],
    "all phases zero": [Point(OK, 0.0, {"a": 0.0, "b": 0.0})] * 3,
}


@pytest.mark.parametrize("samples", CASES.values(), ids=CASES.keys())
def test_summary_equals_the_phase_by_phase_computation(samples: list[Point]) -> None:
    assert summarize(samples, one_run=False) == phase_by_phase(samples)


def random_run(rng: random.Random) -> list[Point]:
    names = rng.sample(["connect", "network", "queue", "prefill", "generation", "transfer"], 4)
    points = []
    for _ in range(rng.choice([1, 2, 5, 20, 100])):
        status = rng.choices([OK, CUT, ERR, HTTP], weights=[90, 4, 3, 3])[0]
        phases = {n: rng.lognormvariate(2, 1) for n in names if rng.random() > 0.05}
        points.append(Point(status, sum(phases.values()), phases if status in TIMED else {}))
    return points


def test_summary_equals_the_phase_by_phase_computation_on_random_runs() -> None:
    rng = random.Random(20261129)
    for _ in range(300):
        samples = random_run(rng)
        assert summarize(samples, one_run=False) == phase_by_phase(samples)
        assert summarize(samples, one_run=False).to_json() == phase_by_phase(samples).to_json()


@pytest.mark.parametrize("count", [1, 2, 3, 5, 20, 21, 100, 301])
def test_column_percentiles_are_numpy_s_to_the_last_bit(count: int) -> None:
    rng = np.random.default_rng(count)
    for trial in range(20):
        matrix = rng.lognormal(3.0, 1.0, size=(count, 1 + trial % 7))
        if trial % 3 == 0:
            matrix = np.round(matrix)  # ties
        if trial % 4 == 0:
            matrix[:, 0] = 0.0  # a phase no sample has
        expected = np.percentile(matrix, list(QUANTILES.values()), axis=0)
        assert np.array_equal(column_percentiles(matrix), expected)


def test_column_percentiles_leave_a_matrix_with_nan_to_numpy() -> None:
    matrix = np.array([[1.0, np.nan], [2.0, 3.0], [4.0, 5.0]])
    expected = np.percentile(matrix, list(QUANTILES.values()), axis=0)
    assert np.array_equal(column_percentiles(matrix), expected, equal_nan=True)
