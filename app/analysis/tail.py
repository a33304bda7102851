"""Has the tail got heavier than the reference? A binomial CUSUM, gated by magnitude.

Each run counts its samples above the reference p95. Under no change that count is
binomial with the reference's own exceedance rate *for that hour of the day, on that kind
of day* (weekday or weekend, shrunk towards the hour's rate over all days where a kind has
been seen little): busy hours that come every weekday, and quiet weekends, are part of the
reference, not a change. Samples of one run are not independent (they share the moment),
so the log-likelihood ratio is divided by the reference's overdispersion. A CUSUM over
those per-run steps crosses its threshold only when the excess persists; a separate gate
then requires the shift to matter: the lower 95 % bound of Δp90 or Δp95 above
max(5 % of the reference, 10 ms), **and** the recent runs beyond the reference's worst
stretch of as many consecutive runs at the same hours (runs next to each other share the
moment's load, days share theirs: a slow hour or a slow day is not a change).
With fewer such days than asked (two by default) the gate cannot tell a change from a
day, and holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

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
    # Worked out on first use: (q, runs) → worst_ratio; (q, 0) → each slot's q.
    cache: dict[tuple[float, int], Any] = field(default_factory=dict, compare=False)

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
    worst_ratio: float  # the reference's worst stretch as long, over its hours' normal
    ratio_low: float  # lower 95 % bound of recent over the reference at these hours


def tail_reference(runs: Sequence[RunData]) -> TailReference | None:
    timed = [run for run in runs if run.timed]
    if not timed:
        return None
    totals, sizes = stacked_totals(timed)
    slots = np.repeat(np.array([slot(run.at) for run in timed], dtype=np.int64), sizes)
    days = np.repeat(np.array([run.at.toordinal() for run in timed], dtype=np.int64), sizes)
    run_of = np.repeat(np.arange(len(timed), dtype=np.int64), sizes)
    levels = tuple(_level(name, rate, totals, slots, run_of) for name, rate in (("p95", 0.05),))
    return TailReference(levels, totals, slots, days, run_of, len(timed))


def _level(
    name: str,
    base: float,
    totals: Array,
    slots: NDArray[np.int64],
    run_of: NDArray[np.int64],
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
    return Level(name, threshold, rates, _dispersion(above, slots, run_of, rates))


def _dispersion(
    above: NDArray[np.bool_], slots: NDArray[np.int64], run_of: NDArray[np.int64], rates: Array
) -> float:
    """Variance of the runs' counts above the threshold over the binomial's (≥ 1)."""
    _, starts, n = np.unique(run_of, return_index=True, return_counts=True)
    p = rates[slots[starts]]
    counts = np.bincount(run_of, weights=above)  # run_of numbers the runs 0, 1, …
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
    baseline = reference.totals[chosen]
    gates = [
        _gate(
            name,
            q,
            totals,
            sizes,
            baseline,
            worst_ratio(reference, q, len(sizes)),
            rng,
            min_relative,
            min_ms,
            resamples,
        )
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


def worst_ratio(reference: TailReference, q: float, runs: int) -> float:
    """How far above its hours' normal the worst stretch of ``runs`` consecutive runs of
    the reference got: the stretch's ``q`` over the mean ``q`` of its runs' slots, at
    worst. Runs next to each other share the moment's load, so a normal week holds slow
    hours; a change must go beyond the slowest of them."""
    key = (q, runs)
    if key not in reference.cache:
        reference.cache[key] = _worst_ratio(reference, q, runs)
    return float(reference.cache[key])


def _worst_ratio(reference: TailReference, q: float, runs: int) -> float:
    if (q, 0) not in reference.cache:
        reference.cache[(q, 0)] = _slot_quantiles(reference, q)
    per_slot = reference.cache[(q, 0)]
    _, starts, sizes = np.unique(reference.run_of, return_index=True, return_counts=True)
    normal = per_slot[reference.slots[starts]]
    count = len(starts)
    if count <= runs:
        return float(np.quantile(reference.totals, q) / normal.mean())
    if np.all(sizes == sizes[0]):  # the usual case: one matrix, all stretches at once
        rows = reference.totals.reshape(count, int(sizes[0]))
        stretches = np.lib.stride_tricks.sliding_window_view(rows, runs, axis=0)
        values = row_quantiles(stretches.transpose(0, 2, 1).reshape(count - runs + 1, -1), q)
    else:
        ends = starts + sizes
        values = np.array(
            [
                np.quantile(reference.totals[starts[i] : ends[i + runs - 1]], q)
                for i in range(count - runs + 1)
            ]
        )
    means = np.lib.stride_tricks.sliding_window_view(normal, runs).mean(axis=1)
    return float(np.max(values / means))


def _slot_quantiles(reference: TailReference, q: float) -> Array:
    """``q`` of each slot's samples; a slot seen little takes its hour's over all days,
    an hour seen little the whole reference's."""
    whole = float(np.quantile(reference.totals, q))
    found = np.full(SLOTS, whole)
    for hour in range(HOURS):
        both = reference.slots % HOURS == hour
        hourly = (
            float(np.quantile(reference.totals[both], q))
            if both.sum() >= MIN_DAY_SAMPLES
            else whole
        )
        for kind in (0, HOURS):
            inside = reference.slots == kind + hour
            found[kind + hour] = (
                float(np.quantile(reference.totals[inside], q))
                if inside.sum() >= MIN_DAY_SAMPLES
                else hourly
            )
    return found


def _gate(
    name: str,
    q: float,
    totals: Array,
    sizes: NDArray[np.int64],
    baseline: Array,
    worst: float,
    rng: np.random.Generator,
    min_relative: float,
    min_ms: float,
    resamples: int,
) -> Gate:
    """Recent against the baseline at the same hours (Δ, bootstrapped over recent runs),
    and beyond the reference's worst stretch as long (the ratio's lower bound)."""
    reference_ms = float(np.quantile(baseline, q))

    def quantile(rows: Array) -> Array:
        return row_quantiles(rows, q)

    recent_ms = float(np.quantile(totals, q))
    recent = bootstrap(totals, sizes, quantile, resamples, rng)
    low, high = interval(recent - reference_ms)
    ratio_low, _ = interval(recent / reference_ms)
    needed = max(min_relative * reference_ms, min_ms)
    return Gate(
        low > needed and ratio_low > worst,
        name,
        recent_ms - reference_ms,
        low,
        high,
        needed,
        reference_ms,
        recent_ms,
        worst,
        ratio_low,
    )
