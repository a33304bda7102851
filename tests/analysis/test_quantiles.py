"""The sort-based quantiles give numpy's numbers bit for bit: the backtest's alerts are the
same with them as with ``np.quantile`` / ``np.median``."""

from __future__ import annotations

import numpy as np
import pytest

from app.analysis.dominance import lead
from app.analysis.quantiles import (
    bootstrap,
    interval,
    row_quantiles,
    sorted_median,
    sorted_quantile,
)
from app.analysis.runs import common_phases, stacked_phases
from tests.runfactory import EVERY, T0, make_run

LEVELS = (0.0, 0.025, 0.5, 0.9, 0.95, 0.975, 0.99, 1.0)


@pytest.mark.parametrize("n", [1, 2, 3, 20, 21, 399, 400])
def test_sorted_quantile_and_median_are_numpys_to_the_bit(n: int) -> None:
    rng = np.random.default_rng(n)
    for values in (rng.lognormal(0, 1, n), np.round(rng.normal(100, 5, n), 1)):
        ordered = np.sort(values)
        for q in LEVELS:
            assert sorted_quantile(ordered, q) == float(np.quantile(values, q))
        assert sorted_median(ordered) == float(np.median(values))


def test_a_nan_makes_every_quantile_nan_as_in_numpy() -> None:
    ordered = np.sort(np.array([3.0, np.nan, 1.0, 2.0]))
    assert np.isnan(sorted_quantile(ordered, 0.5))
    assert np.isnan(sorted_median(ordered))


def test_row_quantiles_are_numpys_along_rows() -> None:
    rows = np.random.default_rng(3).lognormal(0, 1, (50, 37))
    rows[7, 3] = np.nan
    for q in LEVELS:
        np.testing.assert_array_equal(row_quantiles(rows, q), np.quantile(rows, q, axis=1))


def test_the_lead_bootstrap_gives_the_plain_expressions_interval_from_the_same_draws() -> None:
    """``lead`` sorts each phase's draws contiguously; the plain statistic over
    ``bootstrap``'s (replicates × draws × phases) gather gives the same interval."""
    rng = np.random.default_rng(11)
    runs = [make_run(rng, T0 + i * EVERY, run_sigma=0.3) for i in range(3)]
    names = common_phases(runs)
    values, sizes = stacked_phases(runs, names)
    first, second = names.index("generation"), names.index("queue")

    def share_lead(replicates: np.ndarray) -> np.ndarray:
        medians = np.median(replicates, axis=1)
        return (medians[:, first] - medians[:, second]) / medians.sum(axis=1)

    plain = interval(bootstrap(values, sizes, share_lead, 400, np.random.default_rng(5)))
    found = lead(runs, "generation", "queue", np.random.default_rng(5), 400)
    assert (found.low, found.high) == plain
    assert found.value == float(share_lead(values[None])[0])
