"""Block bootstrap over runs: each resample draws whole runs with replacement (the run is
the unit, as in detection), every sample of a drawn run counting once per draw.

A resample is a vector of counts per run, so a quantile of it is a weighted quantile of
the samples; sorting once and taking cumulative weights keeps it vectorised.

The counts are drawn and used a chunk of resamples at a time (``draws``), so that what a
what-if holds at once is bounded by ``CHUNK_CELLS`` however many runs and resamples it has:
a thousand resamples of 64,000 one-sample runs held 512 MB of counts per copy, and a
request several copies. A Generator's integers continue one stream whatever the sizes asked,
so the counts, and every answer, are the same for any chunk size.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

QUANTILES = np.array([0.5, 0.9, 0.99])
LEVEL = 0.95
# Counts (resamples x runs) held at once, and the widest window of weights summed at once:
# 2M floats are 16 MB; drawing them takes about three times that for a moment.
CHUNK_CELLS = 2_000_000

Floats = NDArray[np.float64]
Counts = NDArray[np.float64]
Runs = NDArray[np.intp]


@dataclass(frozen=True)
class Interval:
    value: float
    lo: float
    hi: float

    def to_json(self) -> dict[str, object]:
        return {"value": self.value, "interval": [self.lo, self.hi]}


@dataclass(frozen=True)
class Spread:
    """One side's resampled statistics: a row of ``QUANTILES`` and a rate per resample."""

    quantiles: Floats  # (resamples, len(QUANTILES))
    rates: Floats  # (resamples,)


def run_counts(runs: int, resamples: int, rng: np.random.Generator) -> Counts:
    """(resamples, runs): how often each run is drawn in each resample (as floats, exact)."""
    if runs == 0 or resamples == 0:
        return np.zeros((0, runs))
    drawn = rng.integers(0, runs, size=(resamples, runs))
    drawn += np.arange(resamples)[:, None] * runs
    flat = np.bincount(drawn.ravel(), minlength=resamples * runs)
    return flat.reshape(resamples, runs).astype(np.float64)


def draws(
    runs: int, resamples: int, seed: int | Sequence[int], cells: int = CHUNK_CELLS
) -> Iterator[Counts]:
    """``run_counts(runs, resamples, default_rng(seed))`` a chunk of rows at a time, each
    chunk at most ``cells`` counts (one row at least)."""
    rng = np.random.default_rng(seed)
    rows = max(1, cells // max(runs, 1))
    for start in range(0, resamples, rows):
        yield run_counts(runs, min(rows, resamples - start), rng)


def spreads(
    chunks: Iterator[Counts], sides: Sequence[tuple[Floats, Floats, Runs]], cells: int = CHUNK_CELLS
) -> list[Spread]:
    """Each side's (values, hits 0/1, run of each sample) under every resample of
    ``chunks``: all sides read one chunk before the next is drawn (paired, and drawn once)."""
    found: list[tuple[list[Floats], list[Floats]]] = [([], []) for _ in sides]
    for counts in chunks:
        for (values, hits, run), (quantiles, rates) in zip(sides, found, strict=True):
            quantiles.append(resampled_quantiles(values, run, counts, cells))
            rates.append(resampled_rates(hits, run, counts))
    return [_joined(quantiles, rates) for quantiles, rates in found]


def _joined(quantiles: list[Floats], rates: list[Floats]) -> Spread:
    if not quantiles:
        return Spread(np.zeros((0, len(QUANTILES))), np.zeros(0))
    return Spread(np.concatenate(quantiles), np.concatenate(rates))


def point_quantiles(values: Floats) -> Floats:
    """The inverted-CDF quantiles: what the weighted ones are at weight 1."""
    return np.asarray(np.quantile(values, QUANTILES, method="inverted_cdf"), np.float64)


def resampled_quantiles(
    values: Floats, run: Runs, counts: Counts, cells: int = CHUNK_CELLS
) -> Floats:
    """(resamples, len(QUANTILES)) weighted inverted-CDF quantiles, one row per resample."""
    order = np.argsort(values, kind="stable")
    ordered, runs_ordered = values[order], run[order]
    totals = _weighted(counts, np.bincount(run, minlength=counts.shape[1]))
    found = np.empty((len(counts), len(QUANTILES)))
    for column, q in enumerate(QUANTILES):
        found[:, column] = ordered[_positions(runs_ordered, counts, q * totals, q, cells)]
    return found


def _positions(runs_ordered: Runs, counts: Counts, targets: Floats, q: float, cells: int) -> Runs:
    """Per resample, the first sorted position whose cumulative weight reaches its target.

    Only a window of positions around the quantile is summed sample by sample (the weight
    below it comes per run, from one product); a resample whose answer falls outside the
    window is searched again in one four times as wide, a block of rows at a time so that
    no more than ``cells`` weights are summed at once.
    """
    n = len(runs_ordered)
    at = np.zeros(len(counts), np.intp)
    pending = np.arange(len(counts))
    half = max(128, int(4 * np.sqrt(n)))
    while pending.size:
        window = (max(0, int(q * n) - half), min(n, int(q * n) + half))
        block = max(1, cells // max(window[1] - window[0], 1))
        missed = [
            _within(runs_ordered, counts, targets, pending[i : i + block], window, at)
            for i in range(0, pending.size, block)
        ]
        pending, half = np.concatenate(missed), half * 4
    return at


def _within(
    runs_ordered: Runs,
    counts: Counts,
    targets: Floats,
    rows: Runs,
    window: tuple[int, int],
    at: Runs,
) -> Runs:
    """Sets ``at`` of the ``rows`` whose position lies in ``window``; returns the others."""
    (lo, hi), n = window, len(runs_ordered)
    weights, wanted = counts[rows], targets[rows]
    below = _weighted(weights, np.bincount(runs_ordered[:lo], minlength=counts.shape[1]))
    cumulative = below[:, None] + np.cumsum(weights[:, runs_ordered[lo:hi]], axis=1)
    inside = ((lo == 0) | (below < wanted)) & ((hi == n) | (cumulative[:, -1] >= wanted))
    position = lo + (cumulative < wanted[:, None]).sum(axis=1)
    at[rows[inside]] = np.minimum(position[inside], n - 1)
    return rows[~inside]


def resampled_rates(hits: Floats, run: Runs, counts: Counts) -> Floats:
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
