"""The spreads behind ``level_shift``'s evidence (app/analysis/level.py): an hour's expected
level, and how far a run's level strays from it — a run's own noise, its neighbours'
shared load, and the expected level's own error, which every run of that hour shares.

The reference's residuals are each run against a median it is part of, with its own day's
level in that median: their spread (``sigma``, ``rho``: the pooled lanes' unit) leaves out
both the run's own share and how far one day's hour misses another's. A CUSUM summing
hours of runs against one reference is held to the held-out spread instead
(``honest_spread``): each day's runs against the other days' levels, as ``tail_shift``'s
dispersion is scored (app/analysis/tailcusum.py).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from app.analysis.runs import Array, nan_column_medians
from app.analysis.slottables import slot_tables

# Fewer reference runs than this at an hour (and kind of day): the neighbouring hours join.
MIN_MATCHED = 6
# The least spread of a log median: a phase that never moves (µs of a reused connection)
# must not turn a rounding into evidence.
MIN_SIGMA = 0.01
MIN_DAYS = 2
MAX_RHO = 0.95
# Blocks of consecutive runs whose means' spread is the long-run spread (2 h and 8 h at
# 15 min), each only from this many blocks or more.
BLOCKS = (8, 32)
MIN_BLOCKS = 6


def expected_by_slot(
    rows: Array,
    slots: NDArray[np.int64],
    days: NDArray[np.int64] | None = None,
    min_days: int = MIN_DAYS,
) -> Array:
    """For each slot, the median of the rows at the same hour and kind of day; with fewer
    than ``MIN_MATCHED``, or from fewer than ``min_days`` days (``days``: each row's), widened:
    ±1 hour, then the same hour of any day, then ±1 hour of any day, then every row. One
    day is no normal: a weekend of the reference before a change says nothing of after."""
    if days is None:
        days = np.arange(len(rows), dtype=np.int64)  # rows from as many days as rows
    # Counted and taken for every slot at once (app/analysis/slottables.py).
    table: Array = slot_tables(rows, slots, days, False, MIN_MATCHED, min_days)[0]
    return table


def honest_spread(rows: Array, slots: NDArray[np.int64], days: NDArray[np.int64]) -> Array:
    """The long-run spread of a new run's residual, the reference's own error counted: each
    day's runs against the levels of the *other* days (``held_out``), as a new day is read
    against the reference's. A run's residual against a median it is part of is too small,
    and an hour's level from a day or two is off by that day's own level for every run of
    that hour: both are in the held-out residuals, and in their 2- and 8-hour block means,
    which is what a CUSUM summing hours of runs against one reference must be held to."""
    outside = held_out(rows, slots, days)
    sigma, rho = robust_sigma(outside), lag1(outside)
    return long_run(outside, sigma * np.sqrt((1 + rho) / (1 - rho)))


def held_out(rows: Array, slots: NDArray[np.int64], days: NDArray[np.int64]) -> Array:
    """Each row minus the expected at its slot from the other days' rows (one day of them
    is enough here: a weekend day is told by the other weekend day, as the reference's
    two tell the next); with one day only, from its own."""
    if len(np.unique(days)) <= 1:
        outside: Array = rows - expected_by_slot(rows, slots, days, min_days=1)[slots]
        return outside
    # Every day's table from one count and one sort (app/analysis/slottables.py).
    tables = slot_tables(rows, slots, days, True, MIN_MATCHED, 1)
    day_of = np.unique(days, return_inverse=True)[1].reshape(-1)
    outside = rows - tables[day_of, slots]
    return outside


def robust_sigma(residuals: Array) -> Array:
    """1.4826 × the median absolute deviation of each column, at least ``MIN_SIGMA``."""
    # nan_column_medians: np.nanmedian's numbers, without its masked arrays (~1 ms a call).
    centre = nan_column_medians(residuals)
    mad = nan_column_medians(np.abs(residuals - centre))
    sigma: Array = np.maximum(1.4826 * np.nan_to_num(mad), MIN_SIGMA)
    return sigma


def lag1(residuals: Array) -> Array:
    """Each column's lag-1 autocorrelation over consecutive rows, clipped to [0, MAX_RHO]
    (a negative one would narrow the spread: never trusted)."""
    if len(residuals) < 3:
        return np.zeros(residuals.shape[1])
    x = residuals - np.nanmean(residuals, axis=0)
    x = np.nan_to_num(x)
    num = (x[1:] * x[:-1]).sum(axis=0)
    den = (x * x).sum(axis=0)
    rho = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    clipped: Array = np.clip(rho, 0.0, MAX_RHO)
    return clipped


def long_run(residuals: Array, floor: Array) -> Array:
    """The largest of ``floor`` and √(B · var(means of blocks of B consecutive runs)) for
    each B of ``BLOCKS`` that the reference holds ``MIN_BLOCKS`` of."""
    spread = floor.copy()
    for size in BLOCKS:
        blocks = len(residuals) // size
        if blocks < MIN_BLOCKS:
            continue
        means = np.nanmean(residuals[: blocks * size].reshape(blocks, size, -1), axis=1)
        spread = np.maximum(spread, np.sqrt(size * np.nanvar(means, axis=0, ddof=1)))
    return spread
