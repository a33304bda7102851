"""Quantiles with confidence intervals from a hierarchical bootstrap.

Resample runs with replacement, then samples within each chosen run. Pooling samples of
different runs as if independent would make intervals far too narrow: samples of one run
share the server's load at that moment. scipy's ``bootstrap`` has no nested resampling,
so the index drawing is here; the statistics themselves are numpy's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from app.analysis.runs import Array

DEFAULT_RESAMPLES = 400
LEVEL = 0.95


@dataclass(frozen=True, slots=True)
class Estimate:
    value: float | None
    low: float | None
    high: float | None
    n: int


def resample_indices(
    sizes: NDArray[np.int64], resamples: int, rng: np.random.Generator
) -> NDArray[np.int64]:
    """Row indices into the stacked samples: (resamples × runs·m), m the mean run size.

    Every replicate draws as many runs as there are, then m samples inside each drawn run
    (runs of a window have nearly equal sizes; a fixed m keeps this one numpy gather).
    """
    runs = len(sizes)
    offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    per_run = max(1, int(round(float(sizes.mean())))) if runs else 1
    chosen = rng.integers(0, runs, size=(resamples, runs))
    within = rng.random(size=(resamples, runs, per_run))
    # In place, with the sizes as floats: the same numbers as the plain expression
    # offsets[chosen] + (within * sizes[chosen]).astype(int), without its temporaries.
    within *= sizes[chosen].astype(np.float64)[:, :, None]
    picks = within.astype(np.int64)
    picks += offsets[chosen][:, :, None]
    return picks.reshape(resamples, runs * per_run)


def bootstrap(
    values: Array,
    sizes: NDArray[np.int64],
    statistic: Callable[[Array], Array],
    resamples: int,
    rng: np.random.Generator,
) -> Array:
    """``statistic`` of every replicate; it gets (resamples × draws [× columns]) values."""
    return statistic(values[resample_indices(sizes, resamples, rng)])


def interval(replicates: Array, level: float = LEVEL) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates."""
    tail = (1 - level) / 2
    low, high = np.quantile(replicates, [tail, 1 - tail])
    return float(low), float(high)


def row_quantiles(rows: Array, q: float) -> Array:
    """``np.quantile(rows, q, axis=1)`` (linear, numpy's default), the same numbers: the
    same neighbours and numpy's own interpolation, from a sort, which numpy does several
    times faster than the partition its quantile makes on a bootstrap's replicates."""
    below, above, gamma = _neighbours(rows.shape[1], q)
    ordered = np.sort(rows, axis=1)
    low, high = ordered[:, below], ordered[:, above]
    gap = high - low
    found = high - gap * (1 - gamma) if gamma >= 0.5 else low + gap * gamma
    nan = np.isnan(ordered[:, -1])
    if nan.any():
        found[nan] = np.nan
    return np.asarray(found, dtype=np.float64)


def sorted_quantile(ordered: Array, q: float) -> float:
    """``np.quantile(values, q)`` from ``ordered``, the values sorted (NaNs last, as
    ``np.sort`` puts them), the same number: a caller that needs several quantiles of one
    set of values sorts it once."""
    below, above, gamma = _neighbours(len(ordered), q)
    low, high, last = float(ordered[below]), float(ordered[above]), float(ordered[-1])
    if math.isnan(last):
        return math.nan
    gap = high - low
    return high - gap * (1 - gamma) if gamma >= 0.5 else low + gap * gamma


def sorted_median(ordered: Array) -> float:
    """``np.median(values)`` from ``ordered``, the values sorted (NaNs last): the middle
    value, or the mean of the middle two."""
    n = len(ordered)
    if math.isnan(ordered[-1]):
        return math.nan
    half = n // 2
    return float(ordered[half] if n % 2 else (ordered[half - 1] + ordered[half]) / 2)


@functools.lru_cache(maxsize=1024)
def _neighbours(n: int, q: float) -> tuple[int, int, float]:
    """numpy's linear method: the sorted positions below and above ``q`` (-1 for the last
    value) and the weight of the one above, with numpy's float64 arithmetic (Python's
    floats are the same doubles)."""
    virtual = (n - 1) * float(q)
    below = -1 if virtual >= n - 1 else math.floor(virtual)
    above = -1 if below == -1 else below + 1
    return below, above, virtual - below
