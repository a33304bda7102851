"""A long, fixed baseline and the drift away from it (``baseline_drift``'s statistics).

The rolling reference moves with the data, so a slowdown spread over weeks is always
"normal". Here a full reference is frozen once into a compact ``Baseline`` — per hour of
day and kind of day (weekday, weekend): the mean log run-median of end-to-end and of each
phase, and the p95 of a sample's end-to-end over its run's median — plus the baseline's
own day-to-day spread. Raw runs are not needed afterwards: the backtest keeps a week of
them and a store prunes samples, while the baseline must outlive both.

Each new run adds its deviations from the baseline at its hour to one of 24 hourly bins
(``Drift.bins``); the day's value is the mean over the bins of the last 24 hours, so a busy
hour or a slow run moves it by a 24th at most. Once a day that value is kept
(``Drift.days``) to tell how long the drift has been going on. Everything packs into a
list of floats (``pack``/``unpack``): the detector's ``DetectorMemory.cusums`` entry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import numpy as np
from numpy.typing import NDArray

from app.analysis.runs import Array, RunData, column_medians
from app.probe.sample import LLM_PHASES

KNOWN = (*LLM_PHASES, "server")  # phases by their code in the packed floats
SLOTS = 48  # hour of day (0-23) on a weekday, 24-47 on a weekend
HOUR, DAY = 3600.0, 86400.0
FLOOR_MS = 1e-3  # a phase the run spent no time in: its log stays finite
# One run's deviation counts at most ×4.5 either way: an isolated run 30× slow must not
# move a day's value by more than its share of the day.
CLIP = 1.5
TAIL_QUANTILE = 0.95
KEEP_DAYS = 42  # daily values kept: longer than any baseline lives (baseline_max_age_days)
# A day's value needs runs in this many of its hours: the first hours after a freeze, or
# after a gap, are no day.
MIN_HOURS = 18
NEAR = 4  # runs an hour slot needs before it borrows from the other kind of day
VERSION = 1.0


@dataclass(frozen=True, slots=True)
class Baseline:
    """A frozen profile. Metrics, in order: end-to-end, each of ``phases`` (log medians),
    then the tail (the share of samples over ``tail_q``, as a log ratio to ``tail0``)."""

    start: float  # epoch seconds of its first run
    end: float  # … and of its last
    phases: tuple[str, ...]
    shares: Array  # each phase's median share of end-to-end
    means: Array  # (SLOTS, 1 + len(phases)): mean log run-median at that slot
    tail_q: Array  # (SLOTS,): p95 of a sample's end-to-end over its run's median there
    tail0: float  # the share of samples above tail_q, a day's mean (≈ 5 %)
    spread: Array  # the day-to-day standard deviation of each metric's daily value

    @property
    def width(self) -> int:
        return len(self.phases) + 2


@dataclass(slots=True)
class Drift:
    """A baseline and what the runs since have said against it."""

    baseline: Baseline
    frozen_at: float  # epoch seconds
    pin: float  # the ``baseline_from`` it honours (epoch seconds), NaN: none
    bins: Array  # (24, 2 + width): hour epoch, runs, sums of deviations (tail: of shares)
    days: Array  # (n, 1 + width): day epoch, that day's value of each metric

    @classmethod
    def start(cls, baseline: Baseline, frozen_at: float, pin: float = math.nan) -> Drift:
        bins = np.zeros((24, 2 + baseline.width))
        bins[:, 0] = -1.0
        return cls(baseline, frozen_at, pin, bins, np.empty((0, 1 + baseline.width)))


def slot_of(at: datetime) -> int:
    at = at.astimezone(UTC)
    return at.hour + (24 if at.weekday() >= 5 else 0)


def _logs(run: RunData, phases: tuple[str, ...]) -> Array:
    return run.memo(("drift-logs", phases), _compute_logs, run, phases)


def _compute_logs(run: RunData, phases: tuple[str, ...]) -> Array:
    values = np.concatenate(([_median(run)], run.medians(phases)))
    return np.log(np.maximum(values, FLOOR_MS))


def _median(run: RunData) -> float:
    return run.memo("drift-median", lambda: float(column_medians(run.totals[:, None])[0]))


def _ratios(run: RunData) -> Array:
    return np.asarray(run.totals / max(_median(run), FLOOR_MS))


def _neighbours(slots: NDArray[np.int64], slot: int) -> NDArray[np.bool_]:
    """Runs at the slot's hour ± 1 on the same kind of day; too few: on any day; still
    too few: all (a reference with gaps)."""
    hour, weekend = slot % 24, slot >= 24
    distance = np.abs((slots % 24) - hour)
    near = np.minimum(distance, 24 - distance) <= 1
    same = near & ((slots >= 24) == weekend)
    for chosen in (same, near):
        if chosen.sum() >= NEAR:
            return np.asarray(chosen)
    return np.ones(len(slots), dtype=bool)


def freeze(runs: Sequence[RunData]) -> Baseline | None:
    """The profile of a full reference's runs; None without timed runs enough."""
    timed = [run for run in runs if run.timed]
    if len(timed) < 2 * NEAR:
        return None
    present = {name for run in timed for name in run.phase_names}
    phases = tuple(name for name in KNOWN if name in present)
    logs = np.array([_logs(run, phases) for run in timed])
    slots = np.array([slot_of(run.at) for run in timed])
    ratios = [_ratios(run) for run in timed]
    means = np.empty((SLOTS, logs.shape[1]))
    tail_q = np.empty(SLOTS)
    for slot in range(SLOTS):
        chosen = _neighbours(slots, slot)
        means[slot] = logs[chosen].mean(axis=0)
        pooled = np.concatenate([ratios[i] for i in np.flatnonzero(chosen)])
        tail_q[slot] = float(np.quantile(pooled, TAIL_QUANTILE))
    shares = np.median(np.exp(logs[:, 1:] - logs[:, :1]), axis=0)
    baseline = Baseline(
        start=timed[0].at.timestamp(),
        end=timed[-1].at.timestamp(),
        phases=phases,
        shares=shares,
        means=means,
        tail_q=tail_q,
        tail0=1.0,
        spread=np.zeros(len(phases) + 2),
    )
    tail0, spread = _day_to_day(baseline, timed)
    return replace(baseline, tail0=tail0, spread=spread)


def _day_to_day(baseline: Baseline, runs: Sequence[RunData]) -> tuple[float, Array]:
    """Each of the baseline's days (24 h back from its last run) scored as a live day is:
    the mean tail share, and the standard deviation of each metric's daily value."""
    by_day: dict[int, Drift] = {}
    for run in runs:
        block = int((baseline.end - run.at.timestamp()) // DAY)
        day = by_day.get(block)
        if day is None:
            day = by_day[block] = Drift.start(baseline, 0.0)
        observe(day, run)
    sums = [day.bins[day.bins[:, 1] > 0] for day in by_day.values()]
    values = np.array([(s[:, 2:] / s[:, 1:2]).mean(axis=0) for s in sums if len(s) >= 12])
    if len(values) < 3:
        return 1 - TAIL_QUANTILE, np.zeros(baseline.width)
    tail0 = max(float(values[:, -1].mean()), 1e-3)
    values[:, -1] = np.log(np.maximum(values[:, -1], 1e-4) / tail0)
    return tail0, values.std(axis=0, ddof=1)


def observe(drift: Drift, run: RunData) -> None:
    """The run's deviations from the baseline at its hour, added to its hourly bin."""
    if not run.timed:
        return
    base, hour = drift.baseline, math.floor(run.at.timestamp() / HOUR)
    slot = slot_of(run.at)
    row = drift.bins[hour % 24]
    if row[0] != hour:
        row[:] = 0.0
        row[0] = hour
    row[1] += 1
    row[2:-1] += np.clip(_logs(run, base.phases) - base.means[slot], -CLIP, CLIP)
    row[-1] += float(np.mean(_ratios(run) > base.tail_q[slot]))


def today(drift: Drift, at: datetime) -> Array | None:
    """Each metric's value over the last 24 hours (log ratios to the baseline), hours
    weighted alike; None while fewer than ``MIN_HOURS`` of them had a run."""
    hour = math.floor(at.timestamp() / HOUR)
    live = drift.bins[(drift.bins[:, 1] > 0) & (drift.bins[:, 0] > hour - 24)]
    if len(live) < MIN_HOURS:
        return None
    value = (live[:, 2:] / live[:, 1:2]).mean(axis=0)
    value[-1] = math.log(max(float(value[-1]), 1e-4) / drift.baseline.tail0)
    return np.asarray(value)


def keep_day(drift: Drift, at: datetime, value: Array) -> None:
    """The first value of each UTC day is that day's (kept ``KEEP_DAYS`` days)."""
    day = math.floor(at.timestamp() / DAY)
    if len(drift.days) and drift.days[-1, 0] >= day:
        return
    drift.days = np.vstack((drift.days, np.concatenate(([day], value))))[-KEEP_DAYS:]


def drifting_for(drift: Drift, metric: int, value: float, at: datetime, fraction: float) -> float:
    """Days since the metric's daily value last stayed under ``fraction`` of ``value``
    (all along since the baseline: the days since its first kept day)."""
    days = drift.days
    since = days[0, 0] if len(days) else math.floor(at.timestamp() / DAY)
    for row in days[::-1]:
        if row[1 + metric] < fraction * value:
            since = row[0] + 1
            break
    return max(at.timestamp() / DAY - since, 0.0)


def pack(drift: Drift) -> list[float]:
    """``drift`` as the floats ``DetectorMemory.cusums`` keeps (``unpack`` reads them)."""
    base = drift.baseline
    head = [VERSION, len(base.phases), *(KNOWN.index(name) for name in base.phases)]
    head += [base.start, base.end, base.tail0, drift.frozen_at, drift.pin, len(drift.days)]
    parts = (base.shares, base.spread, base.means, base.tail_q, drift.bins, drift.days)
    body: list[float] = np.concatenate([p.ravel() for p in parts]).tolist()
    return [float(x) for x in head] + body


def unpack(floats: Sequence[float] | None) -> Drift | None:
    """The ``Drift`` that ``pack`` gave these floats; None for none, or another layout."""
    if not floats or floats[0] != VERSION:
        return None
    phases = tuple(KNOWN[int(code)] for code in floats[2 : 2 + int(floats[1])])
    at = 2 + len(phases)
    start, end, tail0, frozen_at, pin, days = floats[at : at + 6]
    rest = np.asarray(floats[at + 6 :], dtype=np.float64)
    k, width = len(phases), len(phases) + 2
    sizes = (k, width, SLOTS * (k + 1), SLOTS, 24 * (2 + width), int(days) * (1 + width))
    if len(rest) != sum(sizes):
        return None
    shares, spread, means, tail_q, bins, kept = np.split(rest, np.cumsum(sizes)[:-1])
    baseline = Baseline(
        start, end, phases, shares, means.reshape(SLOTS, k + 1), tail_q, tail0, spread
    )
    return Drift(baseline, frozen_at, pin, bins.reshape(24, 2 + width), kept.reshape(-1, 1 + width))
