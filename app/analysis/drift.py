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
list of floats (app/analysis/driftpack.py): the detector's ``DetectorMemory.cusums`` entry.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import numpy as np
from numpy.typing import NDArray

from app.analysis.chisquare import chi2_lower_05
from app.analysis.level import MIN_TIMED, log_levels
from app.analysis.quantiles import row_quantiles
from app.analysis.runs import Array, RunData, stacked_phases
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
# A tail's share is also read over the last few kept days: its day-to-day noise is counting
# noise (independent from day to day), so n days' mean strays √n less than a day's. A week:
# the baseline's own length (longer, and a drift's early days dilute its newest ones).
POOL_DAYS = 7


@dataclass(frozen=True, slots=True)
class Baseline:
    """A frozen profile. Metrics, in order: end-to-end and each of ``phases`` (log
    medians), then each phase's tail (the share of samples over ``tail_q``, as a log ratio
    to ``tail0``)."""

    start: float  # epoch seconds of its first run
    end: float  # … and of its last
    phases: tuple[str, ...]
    shares: Array  # each phase's median share of end-to-end
    means: Array  # (SLOTS, 1 + len(phases)): mean log run-median at that slot
    tail_q: Array  # (SLOTS, len(phases)): p95 of a sample's phase over its run's median
    tail0: Array  # (len(phases),): the share of samples above tail_q, a day's mean (≈ 5 %)
    spread: Array  # the day-to-day standard deviation of each metric's daily value
    # Each tail's day-to-day counting noise (binomial, in log, from the week's samples a
    # day): the pooled tails' spread is never taken under it (0: not known).
    counting: Array

    @property
    def width(self) -> int:
        return 1 + 2 * len(self.phases)


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
    if run.timed >= MIN_TIMED:  # level_shift's log levels, the same numbers: kept once
        return log_levels(run, phases)
    return run.memo(("drift-logs", phases), _compute_logs, run, phases)


def _compute_logs(run: RunData, phases: tuple[str, ...]) -> Array:
    values = np.concatenate(([_median(run)], run.medians(phases)))
    return np.log(np.maximum(values, FLOOR_MS))


def _median(run: RunData) -> float:
    return run.total_median()


def _ratios(run: RunData, phases: tuple[str, ...]) -> Array:
    """Each sample's phases over the run's median of each: the tail as a shape (a busy
    moment slows the run's samples alike; the tail's scale follows the phase's median).
    Not kept with the run: a freeze (a week's runs, once) and the newest run's ``observe``
    are its only readers, and kept it was the largest part of every run a backtest holds."""
    own = run.phases if run.phase_names == phases else stacked_phases([run], phases)[0]
    return np.asarray(own / np.maximum(run.medians(phases), FLOOR_MS))


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
    ratios = [_ratios(run, phases) for run in timed]
    means, tail_q = _profile(logs, slots, ratios, np.arange(len(timed)), range(SLOTS))
    baseline = Baseline(
        start=timed[0].at.timestamp(),
        end=timed[-1].at.timestamp(),
        phases=phases,
        shares=np.median(np.exp(logs[:, 1:] - logs[:, :1]), axis=0),
        means=means,
        tail_q=tail_q,
        tail0=np.full(len(phases), 1 - TAIL_QUANTILE),
        spread=np.zeros(1 + 2 * len(phases)),
        counting=np.zeros(len(phases)),
    )
    days = np.array([int((baseline.end - run.at.timestamp()) // DAY) for run in timed])
    values, counts = [], []
    for block in np.unique(days):
        # Each day against the profile of the other days, as a new day will be: against
        # a profile of its own runs a day strays less than it will (the weekend's two days
        # would only be told apart from each other).
        own, others = np.flatnonzero(days == block), np.flatnonzero(days != block)
        if len({math.floor(timed[i].at.timestamp() / HOUR) for i in own}) < MIN_HOURS:
            continue
        means_b, tail_q_b = _profile(logs, slots, ratios, others, set(slots[own].tolist()))
        day = Drift.start(replace(baseline, means=means_b, tail_q=tail_q_b), 0.0)
        for i in own:
            observe(day, timed[i], ratios[i])
        value = today(day, timed[own[-1]].at)
        if value is not None:
            values.append(value)
            counts.append(sum(len(ratios[i]) for i in own))
    if len(values) < 3:
        return baseline
    tails = 1 + len(phases)
    shares_over = np.exp(np.array(values)[:, tails:]) * baseline.tail0
    tail0 = np.maximum(shares_over.mean(axis=0), 1e-3)
    daily = np.array(values)
    daily[:, tails:] = np.log(np.maximum(shares_over, 1e-4) / tail0)
    spread = daily.std(axis=0, ddof=1)
    spread[:tails] *= _upper_bound(len(daily) - 1)
    counting = np.sqrt((1 - tail0) / (tail0 * float(np.median(counts))))
    return replace(baseline, tail0=tail0, spread=spread, counting=counting)


def _upper_bound(df: int) -> float:
    """σ's one-sided 95 % upper bound over a standard deviation with ``df`` degrees of
    freedom. A median's day-to-day wander is the shared load's, which a week samples
    poorly: a calm week (the detection corpus has them: 0.04 where 30 days give 0.12)
    must not make every ordinary day after it a drift. A tail's share is load-free,
    mostly counting noise, which a week's ~2,000 samples a day measure well (the tails
    read over several days lean on it √days times over: there it is floored at the
    counting noise itself, ``Baseline.counting``)."""
    return math.sqrt(df / chi2_lower_05(df))


def _profile(
    logs: Array,
    slots: NDArray[np.int64],
    ratios: list[Array],
    use: NDArray[np.intp],
    wanted: Iterable[int],
) -> tuple[Array, Array]:
    """Per slot in ``wanted`` (others NaN), from the runs ``use``: the mean log medians
    and the p95 of each phase's sample-over-run-median ratio."""
    means = np.full((SLOTS, logs.shape[1]), np.nan)
    tail_q = np.full((SLOTS, logs.shape[1] - 1), np.nan)
    for slot in wanted:
        chosen = use[_neighbours(slots[use], slot)]
        means[slot] = logs[chosen].mean(axis=0)
        pooled = np.concatenate([ratios[i] for i in chosen])
        tail_q[slot] = row_quantiles(pooled.T, TAIL_QUANTILE)  # np.quantile's numbers
    return means, tail_q


def observe(drift: Drift, run: RunData, ratios: Array | None = None) -> None:
    """The run's deviations from the baseline at its hour, added to its hourly bin
    (``ratios``: the run's ``_ratios``, when already worked out)."""
    if not run.timed:
        return
    base, hour = drift.baseline, math.floor(run.at.timestamp() / HOUR)
    slot = slot_of(run.at)
    row = drift.bins[hour % 24]
    if row[0] != hour:
        row[:] = 0.0
        row[0] = hour
    tails = 3 + len(base.phases)
    row[1] += 1
    row[2:tails] += np.clip(_logs(run, base.phases) - base.means[slot], -CLIP, CLIP)
    own = _ratios(run, base.phases) if ratios is None else ratios
    row[tails:] += np.mean(own > base.tail_q[slot], axis=0)


def today(drift: Drift, at: datetime) -> Array | None:
    """Each metric's value over the last 24 hours (log ratios to the baseline), hours
    weighted alike; None while fewer than ``MIN_HOURS`` of them had a run."""
    hour = math.floor(at.timestamp() / HOUR)
    live = drift.bins[(drift.bins[:, 1] > 0) & (drift.bins[:, 0] > hour - 24)]
    if len(live) < MIN_HOURS:
        return None
    value = (live[:, 2:] / live[:, 1:2]).mean(axis=0)
    tails = 1 + len(drift.baseline.phases)
    value[tails:] = np.log(np.maximum(value[tails:], 1e-4) / drift.baseline.tail0)
    return np.asarray(value)


def pooled_days(drift: Drift, at: datetime) -> tuple[Array, Array]:
    """The mean of each metric's kept daily values over the newest 1, 2, … kept days of
    the last ``POOL_DAYS`` (rows), and how many days each mean holds."""
    recent = drift.days[drift.days[:, 0] > math.floor(at.timestamp() / DAY) - POOL_DAYS]
    newest = recent[::-1, 1:]
    n = np.arange(1, len(newest) + 1, dtype=np.float64)
    return np.cumsum(newest, axis=0) / n[:, None], n


def keep_day(drift: Drift, at: datetime, value: Array) -> None:
    """The first value of each UTC day is that day's (kept ``KEEP_DAYS`` days)."""
    day = math.floor(at.timestamp() / DAY)
    if len(drift.days) and drift.days[-1, 0] >= day:
        return
    drift.days = np.vstack((drift.days, np.concatenate(([day], value))))[-KEEP_DAYS:]


def drifting_for(drift: Drift, metric: int, value: float, at: datetime, fraction: float) -> float:
    """Days the metric has been drifting up: back to where its daily value was last under
    ``fraction`` of ``value`` (all along: to the first kept day), then, on a steady
    climb, to where a line through the climb's daily values starts from 0 (a day's value
    is the mean of the 24 h before it: the line is half a day late)."""
    days = drift.days
    if not len(days):
        return 0.0
    column = days[:, 1 + metric]
    under = np.flatnonzero(column < fraction * value)
    first = int(under[-1]) if len(under) else 0
    since = float(days[first, 0] + 1 if len(under) else days[0, 0])
    climb = days[first + 1 :] if len(under) else days
    if len(climb) >= 3:
        slope, intercept = np.polyfit(climb[:, 0], climb[:, 1 + metric], 1)
        if slope > 0:
            start = -intercept / slope - 0.5
            # Not before the day under the mark began, nor before the first kept day.
            lowest = float(days[first, 0] - 1 if len(under) else days[0, 0])
            since = min(since, max(start, lowest))
    return max(at.timestamp() / DAY - since, 0.0)
