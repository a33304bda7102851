"""Block bootstrap over runs: each resample draws whole runs with replacement (the run is
the unit, as in detection), every sample of a drawn run counting once per draw.

A resample is a vector of counts per run, so a quantile of it is a weighted quantile of
the samples; sorting once and taking cumulative weights keeps it vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

QUANTILES = np.array([0.5, 0.9, 0.99])
LEVEL = 0.95

Floats = NDArray[np.float64]
Counts = NDArray[np.float64]


@dataclass(frozen=True)
class Interval:
    value: float
    lo: float
    hi: float

    def to_json(self) -> dict[str, object]:
        return {"value": self.value, "interval": [self.lo, self.hi]}


def run_counts(runs: int, resamples: int, rng: np.random.Generator) -> Counts:
    """(resamples, runs): how often each run is drawn in each resample (as floats, exact)."""
    if runs == 0 or resamples == 0:
        return np.zeros((0, runs))
    drawn = rng.integers(0, runs, size=(resamples, runs))
    drawn += np.arange(resamples)[:, None] * runs
    flat = np.bincount(drawn.ravel(), minlength=resamples * runs)
    return flat.reshape(resamples, runs).astype(np.float64)


def point_quantiles(values: Floats) -> Floats:
    """The inverted-CDF quantiles: what the weighted ones are at weight 1."""
    return np.asarray(np.quantile(values, QUANTILES, method="inverted_cdf"), np.float64)


def resampled_quantiles(values: Floats, run: NDArray[np.intp], counts: Counts) -> Floats:
    """(resamples, len(QUANTILES)) weighted inverted-CDF quantiles, one row per resample."""
    order = np.argsort(values, kind="stable")
    ordered, runs_ordered = values[order], run[order]
    totals = _weighted(counts, np.bincount(run, minlength=counts.shape[1]))
    found = np.empty((len(counts), len(QUANTILES)))
    for column, q in enumerate(QUANTILES):
        found[:, column] = ordered[_positions(runs_ordered, counts, q * totals, q)]
    return found


def _positions(
    runs_ordered: NDArray[np.intp], counts: Counts, targets: Floats, q: float
) -> NDArray[np.intp]:
    """Per resample, the first sorted position whose cumulative weight reaches its target.

    Only a window of positions around the quantile is summed sample by sample (the weight
    below it comes per run, from one product); a resample whose answer falls outside the
    window is searched again in one four times as wide.
    """
    n = len(runs_ordered)
    at = np.zeros(len(counts), np.intp)
    pending = np.arange(len(counts))
    half = max(128, int(4 * np.sqrt(n)))
    while pending.size:
        lo, hi = max(0, int(q * n) - half), min(n, int(q * n) + half)
        rows, wanted = counts[pending], targets[pending]
        below = _weighted(rows, np.bincount(runs_ordered[:lo], minlength=counts.shape[1]))
        cumulative = below[:, None] + np.cumsum(rows[:, runs_ordered[lo:hi]], axis=1)
        inside = ((lo == 0) | (below < wanted)) & ((hi == n) | (cumulative[:, -1] >= wanted))
        position = lo + (cumulative < wanted[:, None]).sum(axis=1)
        at[pending[inside]] = np.minimum(position[inside], n - 1)
        pending, half = pending[~inside], half * 4
    return at


def resampled_rates(hits: Floats, run: NDArray[np.intp], counts: Counts) -> Floats:
    """Per resample: the weighted share of samples with ``hits`` (0/1 per sample)."""
    runs = counts.shape[1]
    per_run = np.bincount(run, weights=hits, minlength=runs)
    sizes = np.bincount(run, minlength=runs).astype(np.float64)
    return np.asarray(_weighted(counts, per_run) / _weighted(counts, sizes), np.float64)


def _weighted(counts: Counts, per_run: NDArray[np.float64] | NDArray[np.intp]) -> Floats:
    """``counts @ per_run``, on this thread: BLAS would run a matrix-vector product on a
    pool of threads that then spin for the CPU the probe and the web server need."""
    return np.asarray(np.einsum("ij,j->i", counts, per_run.astype(np.float64)), np.float64)


def interval(value: float, resampled: Floats) -> Interval:
    if len(resampled) == 0:
        return Interval(value, value, value)
    tail = (1 - LEVEL) / 2 * 100
    lo, hi = np.percentile(resampled, [tail, 100 - tail])
    return Interval(value, float(lo), float(hi))
