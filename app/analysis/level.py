"""A run's level against the same hours of the same kind of day: the statistic behind
``level_shift`` (and behind the pooled evidence that a server-side phase grew).

Per run, the log median of end-to-end and of each phase over its timed samples. The
reference says, for every hour of a weekday and of a weekend day, what those were (the
median of its runs at that hour, widened to the neighbouring hours when too few were
seen), so a queue's daily cycle and its quieter weekends are no change. A run's residual
is its log median minus that; the residuals' spread in the reference, widened for their
autocorrelation, is the unit of evidence: runs next to each other share the moment's load,
so a sum of n of them spreads like n · (1 + ρ) / (1 − ρ) independent ones (ρ their lag-1
autocorrelation) — or more: a load that is busy for hours, or all day, makes the means of
2- and 8-hour blocks of runs spread further than a lag-1 says, and the widest of these is
the spread a CUSUM summing many runs must be held to.

The CUSUM is the Gaussian likelihood ratio of a slowdown of twice the least one worth an
alert against none: its allowance is that least slowdown itself (``material``: below it,
no run adds evidence), a run adds at most ``cap`` so that one wild run never crosses
alone, and it sums the newest runs only (``window_cusum``): a shift is judged on hours of
runs, a slow creep over days is another detector's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
from numpy.typing import NDArray

from app.analysis.levelspread import (
    expected_by_slot,
    honest_spread,
    lag1,
    long_run,
    robust_sigma,
)
from app.analysis.runs import Array, RunData, common_phases, nan_column_medians

TOTAL = "end-to-end"
MIN_TIMED = 5
WILD = 8.0  # a residual counts at most this many allowances (``increments``)
FLOOR_MS = 1e-3


def log_levels(run: RunData, names: Sequence[str]) -> Array:
    """The run's log median of end-to-end, then of each of ``names`` (NaN with fewer than
    ``MIN_TIMED`` timed samples: a run whose requests mostly failed has no median to
    speak of, as tail_shift skips it)."""
    # Every daily reference a run is in, and each judge of it, asks again: kept with the
    # run (the caller's copy is never changed in place).
    return run.memo(("log_levels", tuple(names)), _log_levels, run, tuple(names))


def _log_levels(run: RunData, names: tuple[str, ...]) -> Array:
    if run.timed < MIN_TIMED:
        return np.full(len(names) + 1, np.nan)
    medians = np.concatenate(([run.total_median()], run.medians(names)))
    return np.log(np.maximum(medians, FLOOR_MS))


def day_kind(at_weekday: int) -> int:
    """1 for Saturday and Sunday, 0 otherwise."""
    return int(at_weekday >= 5)


def slot(run: RunData) -> int:
    """Hour of day and kind of day as one index, 0–47."""
    return run.at.hour + 24 * day_kind(run.at.weekday())


@dataclass(frozen=True, slots=True)
class LevelReference:
    """A vantage's expected log levels for each of the 48 slots, and their spread."""

    names: tuple[str, ...]  # the phases; series 0 is end-to-end, then these
    expected: Array  # 48 × (1 + phases): expected log median per slot
    sigma: Array  # per series: the residuals' robust spread
    rho: Array  # per series: lag-1 autocorrelation of the residuals, in [0, MAX_RHO]
    sigma_eff: Array  # per series: the long-run spread of the residuals (module docstring)
    # per series: the same of held-out residuals, the reference's own error counted
    # (app.analysis.levelspread): the unit of a vantage's CUSUM
    sigma_held: Array
    runs: int
    span: timedelta  # from its first run to its last
    # Each reference run's start (epoch seconds) and residuals: where two vantages' runs
    # meet in time, how much of their noise they share (app.analysis.levelpool).
    times: Array = field(default_factory=lambda: np.empty(0))
    past: Array = field(default_factory=lambda: np.empty((0, 0)))

    @property
    def series(self) -> tuple[str, ...]:
        return (TOTAL, *self.names)

    @classmethod
    def build(cls, runs: Sequence[RunData]) -> LevelReference | None:
        timed = [run for run in runs if run.timed >= MIN_TIMED]
        if len(timed) < 2:
            return None
        names = common_phases(timed)
        rows = np.array([log_levels(run, names) for run in timed])
        slots = np.array([slot(run) for run in timed], dtype=np.int64)
        days = np.array([run.at.toordinal() for run in timed], dtype=np.int64)
        expected = expected_by_slot(rows, slots, days)
        residuals = rows - expected[slots]
        sigma, rho = robust_sigma(residuals), lag1(residuals)
        return cls(
            names=names,
            expected=expected,
            sigma=sigma,
            rho=rho,
            sigma_eff=long_run(residuals, sigma * np.sqrt((1 + rho) / (1 - rho))),
            sigma_held=honest_spread(rows, slots, days),
            runs=len(timed),
            span=timed[-1].at - timed[0].at,
            times=np.array([run.at.timestamp() for run in timed]),
            past=residuals,
        )

    def residuals(self, run: RunData) -> Array:
        """The run's log levels minus the expected at its slot."""
        residual: Array = log_levels(run, self.names) - self.expected[slot(run)]
        return residual

    def expected_ms(self, run: RunData) -> Array:
        expected: Array = np.exp(self.expected[slot(run)])
        return expected


def allowances(reference: LevelReference, run: RunData, relative: float, min_ms: float) -> Array:
    """Each series' least slowdown worth an alert, in log terms: ``relative``, and at
    least ``min_ms`` over the expected median at the run's hours."""
    floor = np.log1p(min_ms / np.maximum(reference.expected_ms(run), FLOOR_MS))
    allowance: Array = np.maximum(math.log1p(relative), floor)
    return allowance


def increments(
    reference: LevelReference,
    run: RunData,
    relative: float,
    min_ms: float,
    cap: float,
    alternative: float = 2.0,
    held_out: bool = True,
) -> Array:
    """Each series' CUSUM increment for ``run`` in nats (0 where it has no sample): the log
    likelihood ratio of a slowdown of ``alternative`` allowances against none, the residual
    at most ``WILD`` allowances, the increment at most ``cap``; in units of the held-out
    spread (``sigma_held``), or with ``held_out`` false of the residuals' own."""
    allowance = allowances(reference, run, relative, min_ms)
    # A run far slower than the alternative says no more than one at 4× it (the alternative
    # is twice the allowance): a wild run must not carry the CUSUM half-way on its own.
    residual = np.minimum(reference.residuals(run), WILD * allowance)
    shift = alternative * allowance
    spread = reference.sigma_held if held_out else reference.sigma_eff
    step = shift / spread**2 * (residual - shift / 2)
    capped: Array = np.where(np.isnan(step), 0.0, np.minimum(step, cap))
    return capped


def window_cusum(steps: Array) -> tuple[Array, NDArray[np.int64]]:
    """The one-sided CUSUM of each column of ``steps`` (runs × series, newest last) over
    excursions no longer than the rows given: the largest sum of the newest k steps, at
    least 0, and that k (0 where the sum is 0). A load busy for a day or a week creeps up
    by a little each run; a window keeps that creep from adding up to a change."""
    if len(steps) == 0:
        width = steps.shape[1]
        return np.zeros(width), np.zeros(width, dtype=np.int64)
    sums = np.cumsum(steps[::-1], axis=0)  # row k: the sum of the newest k + 1 steps
    best = np.argmax(sums, axis=0)
    heights = sums[best, np.arange(steps.shape[1])]
    scores: Array = np.maximum(heights, 0.0)
    lengths = np.where(heights > 0, best + 1, 0).astype(np.int64)
    return scores, lengths


def changes(reference: LevelReference, runs: Sequence[RunData]) -> tuple[Array, Array, Array]:
    """Over ``runs``: each series' change in % (from the mean residual), the expected
    median and the runs' median of medians, in ms."""
    timed = [run for run in runs if run.timed >= MIN_TIMED]
    if not timed:
        nan = np.full(len(reference.series), np.nan)
        return nan, nan, nan
    residuals = np.array([reference.residuals(run) for run in timed])
    expected = np.array([reference.expected_ms(run) for run in timed])
    observed = np.exp(np.array([log_levels(run, reference.names) for run in timed]))
    pct = 100 * (np.exp(np.nanmean(residuals, axis=0)) - 1)
    return pct, np.nanmean(expected, axis=0), nan_column_medians(observed)


def pooled_z(
    references: Sequence[LevelReference], windows: Sequence[Sequence[RunData]], series: str
) -> tuple[float, float, float] | None:
    """Vantages' evidence that ``series`` grew, pooled: each vantage's mean residual over
    its window in units of that mean's spread (its autocorrelation counted), then averaged
    over vantages — as if their residuals were one (a shared load is seen by each: adding
    them as independent would count it twice). Also the mean growth, and the least of any
    run at any vantage, in log terms: the server's change is seen from each vantage, and
    in each run (one wild run is no change). None where no vantage has the series."""
    zs, growths, least = [], [], []
    for reference, window in zip(references, windows, strict=True):
        if series not in reference.series or not window:
            continue
        column = reference.series.index(series)
        values = [reference.residuals(run)[column] for run in window if run.timed >= MIN_TIMED]
        if not values:
            continue
        n, rho = len(values), float(reference.rho[column])
        # The variance of a mean of n AR(1) values, in units of one value's.
        factor = (1 + 2 * sum((1 - k / n) * rho**k for k in range(1, n))) / n
        spread = float(reference.sigma[column]) * math.sqrt(factor)
        zs.append(float(np.mean(values)) / spread)
        growths.append(float(np.mean(values)))
        least.append(min(values))
    if not zs:
        return None
    return float(np.mean(zs)), float(np.mean(growths)), float(min(least))
