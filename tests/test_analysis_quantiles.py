"""The sort-based quantiles give numpy's numbers bit for bit: the backtest's alerts are the
same with them as with ``np.quantile`` / ``np.median``."""

from __future__ import annotations

import numpy as np
import pytest

from app.analysis.quantiles import row_quantiles, sorted_median, sorted_quantile

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
