"""Medians of the run arrays, the same numbers as numpy's, from one sort: numpy's median
and nanmedian cost more in overhead than in work at these sizes (a run's samples, a window's
runs, a bootstrap's replicates), and the replay asks for them millions of times."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


def column_medians(values: Array) -> Array:
    """``median_along(values, 0)``, by plain indexing (a window's mix asks for it often)."""
    n = len(values)
    if n == 0:
        return np.full(values.shape[1:], np.nan)
    ordered = np.sort(values, axis=0)
    half = n // 2
    middle = ordered[half] if n % 2 else (ordered[half - 1] + ordered[half]) / 2
    nan = np.isnan(ordered[-1])
    return np.where(nan, np.nan, middle) if nan.any() else middle


def median_of(values: Array) -> float:
    """``float(np.median(values))`` of a 1-D array, the same number, from a sort (numpy's
    median costs some 20 µs of overhead on a run's ten samples; NaN when one is NaN)."""
    n = len(values)
    if n == 0:
        return float("nan")
    ordered = np.sort(values)
    half = n // 2
    if ordered[-1] != ordered[-1]:  # NaNs sort last
        return float("nan")
    return float(ordered[half] if n % 2 else (ordered[half - 1] + ordered[half]) / 2)


def nan_column_medians(values: Array) -> Array:
    """``np.nanmedian(values, axis=0)`` of a 2-D array, the same numbers (a column's NaNs
    left out; NaN, without numpy's warning, for a column of NaNs only), from one sort:
    numpy's nanmedian of a small matrix goes through masked arrays, ~1 ms a call."""
    n, width = values.shape
    if n == 0:
        return np.full(width, np.nan)
    ordered = np.sort(values, axis=0)  # NaNs sort last
    if not np.isnan(ordered[-1]).any():
        # No NaN at all (the usual case: a reference's levels): every column's middle at
        # one place, the same sum halved as below, without the per-column indexing.
        half = n // 2
        plain: Array = (ordered[half - 1 + n % 2] + ordered[half]) / 2
        return plain
    counts = n - np.isnan(ordered).sum(axis=0)
    half = counts // 2
    low = np.where(counts % 2 == 1, half, half - 1)
    columns = np.arange(width)
    high_values = ordered[np.minimum(half, n - 1), columns]
    # An odd count's middle, added to itself and halved, is itself (numpy does the same).
    middle = (ordered[np.maximum(low, 0), columns] + high_values) / 2
    found: Array = np.where(counts > 0, middle, np.nan)
    return found


def median_along(values: Array, axis: int) -> Array:
    """``np.median(values, axis=axis)``, the same numbers, from a sort: numpy sorts these
    sizes (a window's samples, a bootstrap's replicates) several times faster than its
    median partitions them, and costs less overhead besides."""
    n = values.shape[axis]
    if n == 0:
        return np.full(np.delete(values.shape, axis), np.nan)
    ordered = np.sort(values, axis=axis)
    half = n // 2
    middle = np.take(ordered, half, axis=axis)
    if n % 2 == 0:
        middle = (np.take(ordered, half - 1, axis=axis) + middle) / 2
    nan = np.isnan(np.take(ordered, n - 1, axis=axis))  # NaNs sort last, as numpy checks
    return np.where(nan, np.nan, middle) if nan.any() else middle
