"""Has the tail got heavier than the reference? A binomial CUSUM, gated by magnitude.

Each run counts its samples above the reference p95. Under no change that count is
binomial with the reference's own exceedance rate *for that hour of the day, on that kind
of day* (weekday or weekend, shrunk towards the hour's rate over all days where a kind has
been seen little): busy hours that come every weekday, and quiet weekends, are part of the
reference, not a change. Samples of one run are not independent (they share the moment),
so the log-likelihood ratio is divided by the reference's overdispersion. A CUSUM over
those per-run steps crosses its threshold only when the excess persists; a separate gate
then requires the shift to matter: the lower 95 % bound of Δp90 or Δp95 above
max(5 % of the reference, 10 ms) **and** above the worst day of the reference at the same
hours (how far a normal day strays: days share their load, so a slow day is not a change).
With fewer such days than asked (two by default) the gate cannot tell a change from a
day, and holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from app.analysis.quantiles import DEFAULT_RESAMPLES, bootstrap, interval, row_quantiles
from app.analysis.runs import Array, RunData, stacked_totals

HOURS = 24
SLOTS = 2 * HOURS  # (weekday or weekend) × hour of day, UTC
PRIOR_WEIGHT = 40.0  # pseudo-samples pulling a thin slot's rate towards its hour's
MAX_DISPERSION = 8.0
MIN_BASELINE = 200  # samples at the same hours: fewer, and a wider baseline is taken
MIN_DAY_SAMPLES = 40  # a day's samples at those hours, to count as one of the normal days


def slot(at: datetime) -> int:
    """Weekday hours 0–23, weekend hours 24–47 (UTC)."""
    return (HOURS if at.weekday() >= 5 else 0) + at.hour


@dataclass(frozen=True, slots=True)
class Level:
    """One exceedance level of the reference: its threshold and how often it is exceeded."""

    name: str
    threshold_ms: float
    rate_by_slot: NDArray[np.float64]  # share of samples above it, per ``slot``
    dispersion: float  # variance of per-run counts over the binomial's (≥ 1)


@dataclass(frozen=True, slots=True)
class TailReference:
    levels: tuple[Level, ...]  # the p95 (a p99 CUSUM was tried: more false alarms, no gain)
    totals: Array  # every reference sample's end-to-end time ...
    slots: NDArray[np.int64]  # ... the ``slot`` of its run ...
    days: NDArray[np.int64]  # ... its run's UTC day (ordinal) ...
    run_of: NDArray[np.int64]  # ... and which run it is (0, 1, …, in order)
    runs: int

    @property
    def threshold_ms(self) -> float:
        return self.levels[0].threshold_ms


@dataclass(slots=True)
class TailState:
    """A vantage's CUSUM between runs (the detector's only memory)."""

    scores: tuple[float, ...] = (0.0,)  # the CUSUM above each reference level
    runs: int = 0  # runs since the CUSUMs were last all at 0

    def reset(self) -> None:
        """An episode ended: the evidence for it is spent."""
        self.scores, self.runs = (0.0,), 0


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
    day_noise_ms: float  # the worst normal day's excess at these hours
    beyond_day_low_ms: float  # lower 95 % bound of recent minus that day


def tail_reference(runs: Sequence[RunData]) -> TailReference | None:
    timed = [run for run in runs if run.timed]
    if not timed:
        return None
    totals, sizes = stacked_totals(timed)
    slots = np.repeat(np.array([slot(run.at) for run in timed], dtype=np.int64), sizes)
    days = np.repeat(np.array([run.at.toordinal() for run in timed], dtype=np.int64), sizes)
    run_of = np.repeat(np.arange(len(timed), dtype=np.int64), sizes)
    levels = tuple(_level(name, rate, timed, totals, slots) for name, rate in (("p95", 0.05),))
    return TailReference(levels, totals, slots, days, run_of, len(timed))


def _level(
    name: str, base: float, runs: Sequence[RunData], totals: Array, slots: NDArray[np.int64]
) -> Level:
    threshold = float(np.quantile(totals, 1 - base))
    above = totals > threshold
    counts = np.bincount(slots, weights=above, minlength=SLOTS)
    seen = np.bincount(slots, minlength=SLOTS)
    by_hour_counts, by_hour_seen = counts[:HOURS] + counts[HOURS:], seen[:HOURS] + seen[HOURS:]
    hourly = (by_hour_counts + PRIOR_WEIGHT * base) / (by_hour_seen + PRIOR_WEIGHT)
    # A kind of day seen little at an hour leans on that hour's rate over all days.
    rates = (counts + PRIOR_WEIGHT * np.tile(hourly, 2)) / (seen + PRIOR_WEIGHT)
    rates = np.clip(rates, base / 10, 0.5)
    return Level(name, threshold, rates, _dispersion(runs, threshold, rates))


def _dispersion(runs: Sequence[RunData], threshold: float, rates: Array) -> float:
    p = np.array([rates[slot(run.at)] for run in runs])
    n = np.array([run.timed for run in runs], dtype=np.float64)
    counts = np.array([int(np.sum(run.totals > threshold)) for run in runs])
    ratio = float(np.sum((counts - n * p) ** 2) / max(np.sum(n * p * (1 - p)), 1e-9))
    return min(max(ratio, 1.0), MAX_DISPERSION)


def cusum_step(score: float, run: RunData, level: Level, ratio: float) -> float:
    """The CUSUM after ``run``: evidence that ``level`` is exceeded ``ratio``-fold as often."""
    if not run.timed:
        return score
    p0 = float(level.rate_by_slot[slot(run.at)])
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
    min_days: int = 2,
    resamples: int = DEFAULT_RESAMPLES,
) -> Gate | None:
    """Δp90 and Δp95 of ``recent`` against the reference at the same hours of the same kind
    of day; None when there is nothing to compare, or too few normal days to know how far
    a day strays."""
    totals, sizes = stacked_totals([run for run in recent if run.timed])
    if len(totals) == 0:
        return None
    chosen = _same_hours(reference, {slot(run.at) for run in recent}, min_days)
    if _days(reference.days[chosen]) < min_days:
        return None
    baseline = _Baseline(reference.totals[chosen], reference.days[chosen], reference.run_of[chosen])
    gates = [
        _gate(name, q, totals, sizes, baseline, rng, min_relative, min_ms, resamples)
        for name, q in (("p90", 0.90), ("p95", 0.95))
    ]
    passed = [gate for gate in gates if gate.passed]
    return passed[0] if passed else max(gates, key=lambda gate: gate.low_ms - gate.needed_ms)


def _same_hours(reference: TailReference, slots: set[int], min_days: int) -> NDArray[np.bool_]:
    """The reference samples to compare with: the same hours (±1) of the same kind of day,
    else the same hours of every day, else the whole reference."""
    near = {
        (s // HOURS) * HOURS + (s % HOURS + shift) % HOURS for s in slots for shift in (-1, 0, 1)
    }
    same_kind = np.isin(reference.slots, list(near))
    any_day = np.isin(reference.slots % HOURS, [s % HOURS for s in near])
    for chosen in (same_kind, any_day):
        if chosen.sum() >= MIN_BASELINE and _days(reference.days[chosen]) >= min_days:
            return chosen
    return np.ones(len(reference.totals), dtype=bool)


def _days(days: NDArray[np.int64]) -> int:
    _, counts = np.unique(days, return_counts=True)
    return int(np.sum(counts >= MIN_DAY_SAMPLES))


@dataclass(frozen=True, slots=True)
class _Baseline:
    totals: Array
    days: NDArray[np.int64]
    run_of: NDArray[np.int64]

    def worst_day(self, q: float) -> tuple[Array, NDArray[np.int64]]:
        """The samples of the day whose ``q`` was highest, and the sizes of its runs."""
        days = [day for day in np.unique(self.days) if np.sum(self.days == day) >= MIN_DAY_SAMPLES]
        worst = max(days, key=lambda day: float(np.quantile(self.totals[self.days == day], q)))
        inside = self.days == worst
        _, sizes = np.unique(self.run_of[inside], return_counts=True)
        return self.totals[inside], sizes.astype(np.int64)


def _gate(
    name: str,
    q: float,
    totals: Array,
    sizes: NDArray[np.int64],
    baseline: _Baseline,
    rng: np.random.Generator,
    min_relative: float,
    min_ms: float,
    resamples: int,
) -> Gate:
    """Recent against the baseline (Δ, bootstrapped over recent runs) and against the
    baseline's worst day (both bootstrapped over their runs: two noisy estimates)."""
    reference_ms = float(np.quantile(baseline.totals, q))
    day_totals, day_sizes = baseline.worst_day(q)

    def quantile(rows: Array) -> Array:
        return row_quantiles(rows, q)

    recent_ms = float(np.quantile(totals, q))
    recent = bootstrap(totals, sizes, quantile, resamples, rng)
    low, high = interval(recent - reference_ms)
    day = bootstrap(day_totals, day_sizes, quantile, resamples, rng)
    beyond_day, _ = interval(recent - day)
    needed = max(min_relative * reference_ms, min_ms)
    return Gate(
        low > needed and beyond_day > 0,
        name,
        recent_ms - reference_ms,
        low,
        high,
        needed,
        reference_ms,
        recent_ms,
        float(np.quantile(day_totals, q)) - reference_ms,
        beyond_day,
    )
