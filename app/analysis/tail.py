"""Has the tail got heavier than the reference? A binomial CUSUM, gated by magnitude.

Each run counts its samples above the reference p95. Under no change that count is
binomial with the reference's own exceedance rate *for that hour of the day*: busy hours
that come every day are part of the reference, not a change. Samples of one run are not
independent (they share the moment), so the log-likelihood ratio is divided by the
reference's overdispersion. A CUSUM over those per-run steps crosses its threshold only
when the excess persists; a separate gate then requires the shift to matter: the lower
95 % bound of Δp90 or Δp95 above max(5 % of the reference, 10 ms).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from app.analysis.quantiles import DEFAULT_RESAMPLES, bootstrap, interval, row_quantiles
from app.analysis.runs import Array, RunData, stacked_totals

HOURS = 24
PRIOR_WEIGHT = 40.0  # pseudo-samples pulling a thin hour's rate towards BASE_RATE
MAX_DISPERSION = 8.0


@dataclass(frozen=True, slots=True)
class Level:
    """One exceedance level of the reference: its threshold and how often it is exceeded."""

    name: str
    threshold_ms: float
    rate_by_hour: NDArray[np.float64]  # share of samples above it, per UTC hour
    dispersion: float  # variance of per-run counts over the binomial's (≥ 1)


@dataclass(frozen=True, slots=True)
class TailReference:
    levels: tuple[Level, ...]  # the p95 (a p99 CUSUM was tried: more false alarms, no gain)
    totals: Array  # every reference sample's end-to-end time ...
    hours: NDArray[np.int64]  # ... and the UTC hour of its run
    runs: int

    @property
    def threshold_ms(self) -> float:
        return self.levels[0].threshold_ms


@dataclass(frozen=True, slots=True)
class Gate:
    passed: bool
    quantile: str  # the one that passed, or the closer one
    delta_ms: float
    low_ms: float
    high_ms: float
    needed_ms: float
    reference_ms: float
    recent_ms: float


def tail_reference(runs: Sequence[RunData]) -> TailReference | None:
    timed = [run for run in runs if run.timed]
    if not timed:
        return None
    totals, sizes = stacked_totals(timed)
    hours = np.repeat(np.array([run.at.hour for run in timed], dtype=np.int64), sizes)
    levels = tuple(_level(name, rate, timed, totals, hours) for name, rate in (("p95", 0.05),))
    return TailReference(levels, totals, hours, len(timed))


def _level(
    name: str, base: float, runs: Sequence[RunData], totals: Array, hours: NDArray[np.int64]
) -> Level:
    threshold = float(np.quantile(totals, 1 - base))
    counts = np.bincount(hours, weights=totals > threshold, minlength=HOURS)
    seen = np.bincount(hours, minlength=HOURS)
    rates = (counts + PRIOR_WEIGHT * base) / (seen + PRIOR_WEIGHT)
    rates = np.clip(rates, base / 10, 0.5)
    return Level(name, threshold, rates, _dispersion(runs, threshold, rates))


def _dispersion(runs: Sequence[RunData], threshold: float, rates: Array) -> float:
    expected = np.array([run.timed * rates[run.at.hour] for run in runs])
    counts = np.array([int(np.sum(run.totals > threshold)) for run in runs])
    variance = np.array([run.timed * rates[run.at.hour] * (1 - rates[run.at.hour]) for run in runs])
    ratio = float(np.sum((counts - expected) ** 2) / max(np.sum(variance), 1e-9))
    return min(max(ratio, 1.0), MAX_DISPERSION)


def cusum_step(score: float, run: RunData, level: Level, ratio: float) -> float:
    """The CUSUM after ``run``: evidence that ``level`` is exceeded ``ratio``-fold as often."""
    if not run.timed:
        return score
    p0 = float(level.rate_by_hour[run.at.hour])
    p1 = min(0.9, p0 * ratio)
    above = int(np.sum(run.totals > level.threshold_ms))
    llr = above * math.log(p1 / p0) + (run.timed - above) * math.log((1 - p1) / (1 - p0))
    return max(0.0, score + llr / level.dispersion)


def magnitude_gate(
    recent: Sequence[RunData],
    reference: TailReference,
    rng: np.random.Generator,
    *,
    min_relative: float = 0.05,
    min_ms: float = 10.0,
    resamples: int = DEFAULT_RESAMPLES,
) -> Gate | None:
    """Δp90 and Δp95 of ``recent`` against the reference at the same hours of the day."""
    totals, sizes = stacked_totals([run for run in recent if run.timed])
    if len(totals) == 0:
        return None
    baseline = _same_hours(reference, {run.at.hour for run in recent})
    gates = [
        _gate(name, q, totals, sizes, baseline, rng, min_relative, min_ms, resamples)
        for name, q in (("p90", 0.90), ("p95", 0.95))
    ]
    passed = [gate for gate in gates if gate.passed]
    return passed[0] if passed else max(gates, key=lambda gate: gate.low_ms - gate.needed_ms)


def _same_hours(reference: TailReference, hours: set[int]) -> Array:
    near = {(hour + shift) % HOURS for hour in hours for shift in (-1, 0, 1)}
    chosen = reference.totals[np.isin(reference.hours, list(near))]
    # Too few samples at those hours: the whole day is a better reference than noise.
    return chosen if len(chosen) >= 200 else reference.totals


def _gate(
    name: str,
    q: float,
    totals: Array,
    sizes: NDArray[np.int64],
    baseline: Array,
    rng: np.random.Generator,
    min_relative: float,
    min_ms: float,
    resamples: int,
) -> Gate:
    reference_ms = float(np.quantile(baseline, q))

    def shift(rows: Array) -> Array:
        return np.asarray(row_quantiles(rows, q) - reference_ms, dtype=np.float64)

    recent_ms = float(np.quantile(totals, q))
    low, high = interval(bootstrap(totals, sizes, shift, resamples, rng))
    needed = max(min_relative * reference_ms, min_ms)
    return Gate(
        low > needed, name, recent_ms - reference_ms, low, high, needed, reference_ms, recent_ms
    )
