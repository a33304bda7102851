"""The backtest's faster spellings of numpy's statistics give numpy's very numbers (bit for
bit: a backtest's alerts must not move), table by table: a run's median, medians of columns
with NaNs, runs' bin counts, counts per slot, and a tail increment beside the member LLR."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from app.analysis.dominance import leader_of, phase_mix
from app.analysis.runs import RunData, median_of, nan_column_medians
from app.analysis.tail import SLOTS, Channel, bin_counts, binned_runs, ratios, slot, slot_sums
from app.analysis.tailcusum import MEMBERS, beyond, increments, member_llr
from tests.runfactory import T0, make_run

NAN = float("nan")


@pytest.mark.parametrize(
    "values",
    [
        [3.0],
        [2.0, 1.0],
        [5.0, 1.0, 4.0],
        [0.1, 0.2, 0.30000000000000004, 1e9],
        [1.0, NAN, 2.0],
        [7.0, 7.0, 7.0, 7.0],
    ],
)
def test_median_of_is_numpys_median(values: list[float]) -> None:
    expected = float(np.median(np.array(values)))
    found = median_of(np.array(values))
    assert found == expected or (np.isnan(found) and np.isnan(expected))


def test_median_of_nothing_is_nan() -> None:
    assert np.isnan(median_of(np.empty(0)))


@pytest.mark.parametrize(
    "rows",
    [
        [[1.0, 2.0], [3.0, 4.0], [5.0, 0.5]],  # odd, no NaN
        [[1.0, 2.0], [3.0, 4.0]],  # even
        [[1.0, NAN], [NAN, NAN], [2.0, 5.0], [4.0, NAN]],  # NaNs left out, column by column
        [[NAN, 1.0], [NAN, 2.0]],  # a column of NaNs only
        [[0.1, -3.0], [0.2, -1.0], [0.7, 2.5], [NAN, 9.0]],
    ],
)
def test_nan_column_medians_is_numpys_nanmedian(rows: list[list[float]]) -> None:
    values = np.array(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's "All-NaN slice"
        expected = np.nanmedian(values, axis=0)
    np.testing.assert_array_equal(nan_column_medians(values), expected)


def test_nan_column_medians_agree_on_random_matrices() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        values = rng.lognormal(0, 1, (int(rng.integers(1, 700)), 4))
        values[rng.random(values.shape) < 0.1] = np.nan
        values[:, 0] = rng.lognormal(0, 1, len(values))  # one column without NaNs
        if np.isnan(values).all(axis=0).any():
            continue
        np.testing.assert_array_equal(nan_column_medians(values), np.nanmedian(values, axis=0))


@pytest.mark.parametrize(
    "runs",
    [
        [[0.5, 1.0, 1.3], [2.0], [9.0, 0.1, 1.2, 1.2]],
        [[1.0], [1.0], [1.0]],  # on an edge: the bin above it
        [[100.0, 3.0]],
    ],
)
def test_binned_runs_are_each_runs_bin_counts(runs: list[list[float]]) -> None:
    edges = np.array([1.0, 1.2, 1.5, 1.8, 2.5, 8.0])
    pooled = np.concatenate([np.array(values) for values in runs])
    sizes = np.array([len(values) for values in runs], dtype=np.int64)
    expected = np.stack([bin_counts(np.array(values), edges) for values in runs])
    np.testing.assert_array_equal(binned_runs(pooled, sizes, edges), expected)


def test_slot_sums_are_add_at_sums() -> None:
    rng = np.random.default_rng(3)
    counts = rng.random((300, 7)) * 20
    slots = rng.integers(0, SLOTS, 300)
    by_slot = np.zeros((SLOTS, 7))
    np.add.at(by_slot, slots, counts)
    np.testing.assert_array_equal(slot_sums(counts, slots), by_slot)


@pytest.mark.parametrize(("slow", "seed"), [(0.0, 1), (0.3, 2), (0.6, 3)])
def test_an_increment_is_the_member_llr_over_the_dispersion(slow: float, seed: int) -> None:
    run = make_run(np.random.default_rng(seed), T0, n=10, slow=slow, slow_ms=400.0)
    edges = np.array([0.9, 1.0, 1.2, 1.5, 2.0, 3.5])
    probs = np.tile(np.array([0.5, 0.25, 0.15, 0.05, 0.04, 0.009, 0.001]), (SLOTS, 1))
    phi = np.linspace(1.0, 3.0, MEMBERS)
    empty = np.zeros(0, dtype=np.int64)
    channel = Channel("total", edges, probs, np.zeros((0, 7)), empty, empty, 100.0, phi)
    counts = bin_counts(ratios(run, "total"), edges)[None, :]
    llr, _ = member_llr(counts, beyond(probs[slot(run.at)])[None, :])
    found = increments(run, channel)
    assert found is not None
    np.testing.assert_array_equal(found, llr[0] / phi)


def _run_of(
    rows: list[list[float]], names: tuple[str, ...] = ("network", "queue", "generation")
) -> RunData:
    phases = np.array(rows, dtype=np.float64).reshape(len(rows), len(names))
    return RunData("r", "t", "v", T0, names, phases, phases.sum(axis=1), 0, 0, len(rows))


@pytest.mark.parametrize(
    "rows",
    [
        [[1.0, 5.0, 2.0], [1.0, 6.0, 2.0]],  # one leader
        [[3.0, 3.0, 1.0], [3.0, 3.0, 1.0]],  # a tie: the first in phase order
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],  # nothing took time: no leader
        [[1e-300, 1e-300 * (1 + 2e-16), 0.0]],  # shares that round together
        [[NAN, 1.0, 2.0], [NAN, 1.0, 2.0]],  # a NaN median
        [],  # no timed sample
    ],
)
def test_leader_of_is_the_dominant_of_one_runs_mix(rows: list[list[float]]) -> None:
    run = _run_of(rows)
    assert leader_of(run) == phase_mix([run]).dominant


def test_leader_of_agrees_on_random_runs() -> None:
    rng = np.random.default_rng(11)
    for _ in range(200):
        medians = {"connect": 1.0, "network": 30.0, "queue": float(rng.uniform(1, 60))}
        run = make_run(rng, medians=medians | {"generation": 35.0}, n=int(rng.integers(1, 12)))
        assert leader_of(run) == phase_mix([run]).dominant
