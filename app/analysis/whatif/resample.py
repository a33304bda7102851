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
from dataclasses import dataclass, field

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
# Per sample, a share's numerator and denominator (0/1 each): an objective's good samples
# and the samples it counts (app.analysis.whatif.objectiveshares).
Ratio = tuple[Floats, Floats]


@dataclass(frozen=True)
class Interval:
    value: float
    lo: float
    hi: float

    def to_json(self) -> dict[str, object]:
        return {"value": self.value, "interval": [self.lo, self.hi]}


@dataclass(frozen=True)
class Spread:
    """One side's resampled statistics: a row of ``QUANTILES``, a rate and a row of
    ``ratios`` per resample."""

    quantiles: Floats  # (resamples, len(QUANTILES))
    rates: Floats  # (resamples,)
    ratios: Floats = field(default_factory=lambda: np.zeros((0, 0)))  # (resamples, ratios)


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
    chunks: Iterator[Counts],
    sides: Sequence[tuple[Floats, Floats, Runs]],
    cells: int = CHUNK_CELLS,
    ratios: Sequence[Sequence[Ratio]] = (),
) -> list[Spread]:
    """Each side's (values, hits 0/1, run of each sample) under every resample of
    ``chunks``, and its ``ratios`` (one list per side, or none): all sides read one chunk
    before the next is drawn (paired, and drawn once)."""
    shares = ratios or [() for _ in sides]
    found: list[tuple[list[Floats], list[Floats], list[Floats]]] = [([], [], []) for _ in sides]
    for counts in chunks:
        for (values, hits, run), pairs, (quantiles, rates, parts) in zip(
            sides, shares, found, strict=True
        ):
            quantiles.append(resampled_quantiles(values, run, counts, cells))
            rates.append(resampled_rates(hits, run, counts))
            parts.append(resampled_ratios(pairs, run, counts))
    return [_joined(*lists, len(pairs)) for lists, pairs in zip(found, shares, strict=True)]


def _joined(quantiles: list[Floats], rates: list[Floats], parts: list[Floats], k: int) -> Spread:
    if not quantiles:
        return Spread(np.zeros((0, len(QUANTILES))), np.zeros(0), np.zeros((0, k)))
    return Spread(np.concatenate(quantiles), np.concatenate(rates), np.concatenate(parts))


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


def resampled_ratios(pairs: Sequence[Ratio], run: Runs, counts: Counts) -> Floats:
    """(resamples, len(pairs)): per resample, each pair's weighted numerator over its
    weighted denominator; NaN where a resample draws nothing the pair counts."""
    runs = counts.shape[1]
    found = np.empty((len(counts), len(pairs)))
    for column, (good, counted) in enumerate(pairs):
        top = _weighted(counts, np.bincount(run, weights=good, minlength=runs))
        bottom = _weighted(counts, np.bincount(run, weights=counted, minlength=runs))
        with np.errstate(invalid="ignore", divide="ignore"):
            found[:, column] = np.where(bottom > 0, top / bottom, np.nan)
    return found


def _weighted(counts: Counts, per_run: NDArray[np.float64] | NDArray[np.intp]) -> Floats:
    """``counts @ per_run``, on this thread: BLAS would run a matrix-vector product on a
    pool of threads that then spin for the CPU the probe and the web server need."""
    return np.asarray(np.einsum("ij,j->i", counts, per_run.astype(np.float64)), np.float64)


def interval(value: float, resampled: Floats) -> Interval:
    """The percentile interval of ``resampled`` around ``value``; resamples that drew
    nothing to count (NaN) are left out."""
    resampled = resampled[~np.isnan(resampled)]
    if len(resampled) == 0:
        return Interval(value, value, value)
    tail = (1 - LEVEL) / 2 * 100
    lo, hi = np.percentile(resampled, [tail, 100 - tail])
    return Interval(value, float(lo), float(hi))
