"""The tail CUSUM's magnitude gate: does a heavier tail matter? (app/analysis/tail.py has
the CUSUM and the reference.)

The lower 95 % bound of the recent runs' p90 or p95 excess must be above the reference's,
at the same hours of the same kind of day, by a share **and** by a time at the recent
median. With fewer normal days than asked the gate cannot tell a change from a day, and
holds. The gate runs after every run while the CUSUM is high, so the recent values are
sorted once for all their quantiles, and a reference's baselines are kept by hours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.analysis.quantiles import (
    DEFAULT_RESAMPLES,
    bootstrap,
    interval,
    row_quantiles,
    sorted_median,
    sorted_quantile,
)
from app.analysis.runs import Array, RunData
from app.analysis.tail import HOURS, MIN_DAY_SAMPLES, TailReference, excess, slot

MIN_BASELINE = 200  # samples at the same hours: fewer, and a wider baseline is taken
QUANTILES = (("p90", 0.90), ("p95", 0.95))


@dataclass(frozen=True, slots=True)
class Baseline:
    """The reference at the recent runs' hours: its quantiles of excess and of end-to-end
    time (``QUANTILES`` order), and how many normal days it holds."""

    excess: tuple[float, ...]
    totals: tuple[float, ...]
    days: int


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


@dataclass(frozen=True, slots=True)
class _Recent:
    excess: list[Array]  # run by run, for the bootstrap
    ordered_excess: Array  # all of them, sorted, for the point estimates
    ordered_totals: Array
    body: float  # the median end-to-end time


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
    parts: list[Array] = []
    totals: list[Array] = []
    slots: set[int] = set()
    for run in recent:
        values = excess(run)
        if len(values):
            parts.append(values)
            totals.append(run.totals)
            slots.add(slot(run.at))
    if not parts:
        return None
    baseline = _baseline(reference, frozenset(slots), min_days)
    if baseline.days < min_days:
        return None
    ordered = np.sort(np.concatenate(totals))
    sample = _Recent(parts, np.sort(np.concatenate(parts)), ordered, sorted_median(ordered))
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
        starts = reference.slot_starts.tolist()
        spans = [slice(starts[s], starts[s + 1]) for s in chosen]
        reference.baselines[key] = Baseline(
            _quantiles(np.concatenate([reference.excess[span] for span in spans])),
            _quantiles(np.concatenate([reference.totals[span] for span in spans])),
            _days(reference, chosen),
        )
    baseline = reference.baselines[key]
    assert isinstance(baseline, Baseline)
    return baseline


def _quantiles(values: Array) -> tuple[float, ...]:
    """``np.quantile(values, QUANTILES)``, from one sort."""
    ordered = np.sort(values)
    return tuple(sorted_quantile(ordered, q) for _, q in QUANTILES)


def _same_hours(reference: TailReference, slots: frozenset[int], min_days: int) -> list[int]:
    """The slots of the reference samples to compare with: the same hours (±1) of the same
    kind of day, else the same hours of every day, else the whole reference."""
    near = {
        (s // HOURS) * HOURS + (s % HOURS + shift) % HOURS for s in slots for shift in (-1, 0, 1)
    }
    hours = {s % HOURS for s in near}
    same_kind = sorted(near)
    any_day = [s for s in range(len(reference.by_slot_day)) if s % HOURS in hours]
    for chosen in (same_kind, any_day):
        enough = reference.by_slot_day[chosen].sum() >= MIN_BASELINE
        if enough and _days(reference, chosen) >= min_days:
            return chosen
    return list(range(len(reference.by_slot_day)))


def _days(reference: TailReference, slots: list[int]) -> int:
    """The days with enough samples at ``slots`` to count as one of the normal days."""
    return int(np.sum(reference.by_slot_day[slots].sum(axis=0) >= MIN_DAY_SAMPLES))


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
    now, body = sorted_quantile(recent.ordered_excess, q), recent.body
    needed = max(min_relative * before * body, min_ms)
    recent_ms = sorted_quantile(recent.ordered_totals, q)
    # A tail heavier only against a body that shrank (generation collapsed) is no slower.
    longer = recent_ms - reference_ms > needed
    ratio_low, low, high = now / before, (now - before) * body, (now - before) * body
    if longer and ratio_low > 1 + min_relative and low > needed:

        def quantile(rows: Array) -> Array:
            return row_quantiles(rows, q)

        sizes = np.array([len(values) for values in recent.excess], dtype=np.int64)
        values = np.concatenate(recent.excess)
        replicates = bootstrap(values, sizes, quantile, resamples, rng)
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
