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

import functools

import numpy as np
from numpy.typing import NDArray

from app.analysis.runs import Array, nan_column_medians

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
SLOTS = 48  # hours of a weekday, then of a weekend day


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
    # Which rows each slot widens to depends on the slots and days alone: counted per slot
    # in plain Python (a numpy mask and np.unique for each of 48 slots × 4 widenings were
    # the largest part of a level reference's cost), and a set of slots chosen twice gives
    # its medians once.
    seen: list[set[int]] = [set() for _ in range(SLOTS)]
    for at_slot, day in zip(slots.tolist(), days.tolist(), strict=True):
        seen[at_slot].add(day)
    counts = np.bincount(slots, minlength=SLOTS).tolist()
    medians: dict[tuple[int, ...] | None, Array] = {}
    table = np.empty((SLOTS, rows.shape[1]))
    for index in range(SLOTS):
        chosen = _widened(index, counts, seen, min_days)
        found = medians.get(chosen)
        if found is None:
            picked = rows if chosen is None else rows[_among(chosen)[slots]]
            found = medians[chosen] = nan_column_medians(picked)
        table[index] = found
    return table


@functools.lru_cache(maxsize=512)
def _among(chosen: tuple[int, ...]) -> NDArray[np.bool_]:
    """Which of the 48 slots are ``chosen`` (a row's slot indexes it: ``np.isin``'s rows,
    in their order, without its sort)."""
    member = np.zeros(SLOTS, dtype=bool)
    member[list(chosen)] = True
    member.flags.writeable = False  # shared by every caller
    return member


def _widened(
    index: int, counts: list[int], seen: list[set[int]], min_days: int
) -> tuple[int, ...] | None:
    """The slots ``expected_by_slot`` reads for slot ``index``: its own, ±1 hour of its kind
    of day, its hour of any day, ±1 hour of any day; None for every row."""
    hour, kind = index % 24, index // 24
    near = [(hour + step) % 24 for step in (-1, 0, 1)]
    for chosen in (
        (index,),
        tuple(24 * kind + h for h in near),
        (hour, hour + 24),
        tuple(24 * k + h for k in (0, 1) for h in near),
    ):
        if sum(counts[s] for s in chosen) >= MIN_MATCHED:
            if len(set().union(*(seen[s] for s in chosen))) >= min_days:
                return chosen
    return None


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
    outside = np.empty_like(rows)
    unique = np.unique(days)
    for day in unique:
        mine = days == day
        others = ~mine if len(unique) > 1 else mine
        table = expected_by_slot(rows[others], slots[others], days[others], min_days=1)
        outside[mine] = rows[mine] - table[slots[mine]]
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
