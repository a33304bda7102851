"""Has the tail got heavier than the reference? A binomial CUSUM on the tail's *shape*.

A sample's **excess** is its end-to-end time over its own run's median. Samples of one run
share the moment's load: when the shared queue is busy the whole run is slower, body and
tail alike. Dividing by the run's median takes that moment out, so what is left is the
tail proper: how far a run's slow samples stray from its typical one. A busy hour, a slow
day or a stretch of correlated runs moves the body and leaves the excess alone; a heavier
tail (a share of requests waiting much longer) moves the excess. The level itself is other
detectors' business (the deadline SLO, the dominant phase).

Each run counts its samples whose excess is above the reference's p95 excess. Under no
change that count is binomial with the reference's own exceedance rate *for that hour of
the day, on that kind of day* (weekday or weekend, shrunk towards the hour's rate over all
days where a kind has been seen little): busy hours that widen the tail every weekday are
part of the reference. The log-likelihood ratio is divided by the counts' overdispersion.
A CUSUM over the per-run steps crosses its threshold only when the excess persists; a
gate then requires the shift to matter: the lower 95 % bound of the p90 or p95 excess
above the reference's by a share (5 %) **and** by a time (10 ms, at the recent median).
With fewer normal days than asked (two by default) the gate cannot tell a change from a
day, and holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from app.analysis.quantiles import DEFAULT_RESAMPLES, bootstrap, interval, row_quantiles
from app.analysis.runs import Array, RunData

HOURS = 24
SLOTS = 2 * HOURS  # (weekday or weekend) × hour of day, UTC
PRIOR_WEIGHT = 40.0  # pseudo-samples pulling a thin slot's rate towards its hour's
MAX_DISPERSION = 8.0
MIN_BASELINE = 200  # samples at the same hours: fewer, and a wider baseline is taken
MIN_DAY_SAMPLES = 40  # a day's samples at those hours, to count as one of the normal days
MIN_RUN_SAMPLES = 5  # a run's median from fewer says little about its body


def slot(at: datetime) -> int:
    """Weekday hours 0–23, weekend hours 24–47 (UTC)."""
    return (HOURS if at.weekday() >= 5 else 0) + at.hour


@dataclass(frozen=True, slots=True)
class Level:
    """One exceedance level of the reference: its threshold and how often it is exceeded."""

    name: str
    threshold: float  # an excess: end-to-end over the run's median
    rate_by_slot: NDArray[np.float64]  # share of samples above it, per ``slot``
    dispersion: float  # variance of per-run counts over the binomial's (≥ 1)


@dataclass(frozen=True, slots=True)
class Baseline:
    """The reference at the recent runs' hours: its quantiles of excess and of end-to-end
    time (``QUANTILES`` order), and how many normal days it holds."""

    excess: tuple[float, ...]
    totals: tuple[float, ...]
    days: int


QUANTILES = (("p90", 0.90), ("p95", 0.95))


@dataclass(frozen=True, slots=True)
class TailReference:
    levels: tuple[Level, ...]  # the p95 excess (a p99 CUSUM was tried: more false alarms)
    excess: Array  # every reference sample's excess (end-to-end over its run's median) ...
    totals: Array  # ... its end-to-end time ...
    slots: NDArray[np.int64]  # ... the ``slot`` of its run ...
    days: NDArray[np.int64]  # ... and its run's UTC day (ordinal)
    runs: int
    # Baselines by the recent runs' slots: the same hours are asked for run after run.
    baselines: dict[tuple[frozenset[int], int], Baseline] = field(
        default_factory=dict, compare=False
    )

    @property
    def threshold(self) -> float:
        return self.levels[0].threshold


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
    reference_excess: float  # the quantile's excess in the reference at these hours
    recent_excess: float  # ... and in the recent runs
    ratio_low: float  # lower 95 % bound of recent over reference excess
    body_ms: float  # the recent runs' median: the excess in milliseconds is over it
    delta_ms: float  # how much longer the tail got at that median, with its interval
    low_ms: float
    high_ms: float
    needed_ms: float
    reference_ms: float  # the quantile of end-to-end time, for the reader
    recent_ms: float


def excess(run: RunData) -> Array:
    """Each timed sample's end-to-end time over the run's median; empty for a run too
    small to have a body."""

    def compute() -> Array:
        if run.timed < MIN_RUN_SAMPLES:
            return np.empty(0)
        ordered, half = np.sort(run.totals), run.timed // 2
        body = float(ordered[half] if run.timed % 2 else (ordered[half - 1] + ordered[half]) / 2)
        return run.totals / body if body > 0 else np.empty(0)

    return run.memo("excess", compute)


def tail_reference(runs: Sequence[RunData]) -> TailReference | None:
    shaped = [(run, excess(run)) for run in runs]
    shaped = [(run, values) for run, values in shaped if len(values)]
    if not shaped:
        return None
    sizes = np.array([len(values) for _, values in shaped], dtype=np.int64)
    values = np.concatenate([values for _, values in shaped])
    totals = np.concatenate([run.totals for run, _ in shaped])
    slots = np.repeat(np.array([slot(run.at) for run, _ in shaped], dtype=np.int64), sizes)
    days = np.repeat(np.array([run.at.toordinal() for run, _ in shaped], dtype=np.int64), sizes)
    run_of = np.repeat(np.arange(len(shaped), dtype=np.int64), sizes)
    levels = tuple(_level(name, rate, values, slots, run_of) for name, rate in (("p95", 0.05),))
    return TailReference(levels, values, totals, slots, days, len(shaped))


def _level(
    name: str,
    base: float,
    values: Array,
    slots: NDArray[np.int64],
    run_of: NDArray[np.int64],
) -> Level:
    threshold = float(np.quantile(values, 1 - base))
    above = values > threshold
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
    values = excess(run)
    if not len(values):
        return score
    p0 = float(level.rate_by_slot[slot(run.at)])
    p1 = min(0.9, p0 * ratio)
    above = int(np.sum(values > level.threshold))
    llr = above * math.log(p1 / p0) + (len(values) - above) * math.log((1 - p1) / (1 - p0))
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
    """The p90 and p95 excess of ``recent`` against the reference's at the same hours of the
    same kind of day; None when there is nothing to compare, or too few normal days to know
    how far a day strays."""
    shaped = [(run, excess(run)) for run in recent]
    shaped = [(run, values) for run, values in shaped if len(values)]
    if not shaped:
        return None
    baseline = _baseline(reference, frozenset(slot(run.at) for run, _ in shaped), min_days)
    if baseline.days < min_days:
        return None
    sample = _Recent(
        np.concatenate([values for _, values in shaped]),
        np.array([len(values) for _, values in shaped], dtype=np.int64),
        np.concatenate([run.totals for run, _ in shaped]),
    )
    gates = [
        _gate(
            name,
            q,
            sample,
            baseline.excess[i],
            baseline.totals[i],
            rng,
            min_relative,
            min_ms,
            resamples,
        )
        for i, (name, q) in enumerate(QUANTILES)
    ]
    passed = [gate for gate in gates if gate.passed]
    return passed[0] if passed else max(gates, key=lambda gate: gate.low_ms - gate.needed_ms)


def _baseline(reference: TailReference, slots: frozenset[int], min_days: int) -> Baseline:
    key = (slots, min_days)
    if key not in reference.baselines:
        chosen = _same_hours(reference, slots, min_days)
        levels = [q for _, q in QUANTILES]
        reference.baselines[key] = Baseline(
            tuple(np.quantile(reference.excess[chosen], levels).tolist()),
            tuple(np.quantile(reference.totals[chosen], levels).tolist()),
            _days(reference.days[chosen]),
        )
    return reference.baselines[key]


@dataclass(frozen=True, slots=True)
class _Recent:
    excess: Array
    sizes: NDArray[np.int64]
    totals: Array


def _same_hours(
    reference: TailReference, slots: frozenset[int], min_days: int
) -> NDArray[np.bool_]:
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
    return np.ones(len(reference.excess), dtype=bool)


def _days(days: NDArray[np.int64]) -> int:
    _, counts = np.unique(days, return_counts=True)
    return int(np.sum(counts >= MIN_DAY_SAMPLES))


def _gate(
    name: str,
    q: float,
    recent: _Recent,
    before: float,
    reference_ms: float,
    rng: np.random.Generator,
    min_relative: float,
    min_ms: float,
    resamples: int,
) -> Gate:
    """Recent excess over the reference's (``before``) at the same hours, bootstrapped over
    recent runs (only when the point estimates pass: a lower bound is never above its
    estimate); in milliseconds at the recent runs' median."""
    now, body = float(np.quantile(recent.excess, q)), float(np.median(recent.totals))
    needed = max(min_relative * before * body, min_ms)
    recent_ms = float(np.quantile(recent.totals, q))
    # A tail heavier only against a body that shrank (generation collapsed) is no slower.
    longer = recent_ms - reference_ms > needed
    ratio_low, low, high = now / before, (now - before) * body, (now - before) * body
    if longer and ratio_low > 1 + min_relative and low > needed:

        def quantile(rows: Array) -> Array:
            return row_quantiles(rows, q)

        replicates = bootstrap(recent.excess, recent.sizes, quantile, resamples, rng)
        ratio_low, _ = interval(replicates / before)
        low, high = (value * body for value in interval(replicates - before))
    return Gate(
        passed=ratio_low > 1 + min_relative and low > needed and longer,
        quantile=name,
        reference_excess=before,
        recent_excess=now,
        ratio_low=ratio_low,
        body_ms=body,
        delta_ms=(now - before) * body,
        low_ms=low,
        high_ms=high,
        needed_ms=needed,
        reference_ms=reference_ms,
        recent_ms=recent_ms,
    )
