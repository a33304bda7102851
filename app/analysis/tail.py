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
above the reference's by a share (5 %) **and** by a time (10 ms, at the recent median)
(app/analysis/tailgate.py). With fewer normal days than asked (two by default) the gate
cannot tell a change from a day, and holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from app.analysis.runs import Array, RunData

HOURS = 24
SLOTS = 2 * HOURS  # (weekday or weekend) × hour of day, UTC
PRIOR_WEIGHT = 40.0  # pseudo-samples pulling a thin slot's rate towards its hour's
MAX_DISPERSION = 8.0
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
class TailReference:
    levels: tuple[Level, ...]  # the p95 excess (a p99 CUSUM was tried: more false alarms)
    # Every reference sample's excess (end-to-end over its run's median) and end-to-end
    # time, by the ``slot`` of its run: slot s's are [slot_starts[s], slot_starts[s + 1]).
    excess: Array
    totals: Array
    slot_starts: NDArray[np.int64]
    by_slot_day: NDArray[np.int64]  # samples per slot and UTC day (from the first day)
    runs: int
    # The gate's baselines (app/analysis/tailgate.py) by the recent runs' slots: the same
    # hours are asked for run after run.
    baselines: dict[tuple[frozenset[int], int], object] = field(default_factory=dict, compare=False)

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


def excess(run: RunData) -> Array:
    """Each timed sample's end-to-end time over the run's median; empty for a run too
    small to have a body."""
    return run.memo("excess", _excess, run)


def _excess(run: RunData) -> Array:
    if run.timed < MIN_RUN_SAMPLES:
        return np.empty(0)
    ordered, half = np.sort(run.totals), run.timed // 2
    body = float(ordered[half] if run.timed % 2 else (ordered[half - 1] + ordered[half]) / 2)
    return run.totals / body if body > 0 else np.empty(0)


def tail_reference(runs: Sequence[RunData]) -> TailReference | None:
    shaped = [(run, excess(run)) for run in runs]
    shaped = [(run, values) for run, values in shaped if len(values)]
    if not shaped:
        return None
    per_run = _Runs(
        np.array([len(values) for _, values in shaped], dtype=np.int64),
        np.array([slot(run.at) for run, _ in shaped], dtype=np.int64),
    )
    values = np.concatenate([values for _, values in shaped])
    totals = np.concatenate([run.totals for run, _ in shaped])
    slots = np.repeat(per_run.slots, per_run.sizes)
    days = np.repeat(
        np.array([run.at.toordinal() for run, _ in shaped], dtype=np.int64), per_run.sizes
    )
    levels = tuple(_level(name, rate, values, slots, per_run) for name, rate in (("p95", 0.05),))
    by_slot = np.argsort(slots, kind="stable")
    starts = np.searchsorted(slots[by_slot], np.arange(SLOTS + 1))
    return TailReference(
        levels, values[by_slot], totals[by_slot], starts, _by_day(slots, days), len(shaped)
    )


@dataclass(frozen=True, slots=True)
class _Runs:
    """The reference's runs, in order: each one's samples (their excess) and slot."""

    sizes: NDArray[np.int64]
    slots: NDArray[np.int64]


def _level(name: str, base: float, values: Array, slots: NDArray[np.int64], runs: _Runs) -> Level:
    threshold = float(np.quantile(values, 1 - base))
    above = values > threshold
    counts = np.bincount(slots, weights=above, minlength=SLOTS)
    seen = np.bincount(slots, minlength=SLOTS)
    by_hour_counts, by_hour_seen = counts[:HOURS] + counts[HOURS:], seen[:HOURS] + seen[HOURS:]
    hourly = (by_hour_counts + PRIOR_WEIGHT * base) / (by_hour_seen + PRIOR_WEIGHT)
    # A kind of day seen little at an hour leans on that hour's rate over all days.
    rates = (counts + PRIOR_WEIGHT * np.tile(hourly, 2)) / (seen + PRIOR_WEIGHT)
    rates = np.clip(rates, base / 10, 0.5)
    return Level(name, threshold, rates, _dispersion(above, runs, rates))


def _dispersion(above: NDArray[np.bool_], runs: _Runs, rates: Array) -> float:
    """Variance of the runs' counts above the threshold over the binomial's (≥ 1)."""
    n, p = runs.sizes, rates[runs.slots]
    run_of = np.repeat(np.arange(len(n), dtype=np.int64), n)
    counts = np.bincount(run_of, weights=above)
    ratio = float(np.sum((counts - n * p) ** 2) / max(np.sum(n * p * (1 - p)), 1e-9))
    return min(max(ratio, 1.0), MAX_DISPERSION)


def _by_day(slots: NDArray[np.int64], days: NDArray[np.int64]) -> NDArray[np.int64]:
    day = days - days.min()
    span = int(day.max()) + 1
    return np.bincount(slots * span + day, minlength=SLOTS * span).reshape(SLOTS, span)


def cusum_step(score: float, run: RunData, level: Level, ratio: float) -> float:
    """The CUSUM after ``run``: evidence that ``level`` is exceeded ``ratio``-fold as often."""
    values = excess(run)
    if not len(values):
        return score
    p0 = float(level.rate_by_slot[slot(run.at)])
    p1 = min(0.9, p0 * ratio)
    above = int(np.count_nonzero(values > level.threshold))
    llr = above * math.log(p1 / p0) + (len(values) - above) * math.log((1 - p1) / (1 - p0))
    return max(0.0, score + llr / level.dispersion)
