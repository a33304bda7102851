"""The 48 slots' expected levels of a reference and of each of its days held out, at once
(app/analysis/levelspread.py says what they are: ``expected_by_slot`` and ``held_out``).

A level reference asked for its table, then one table per held-out day: each a choice of
rows for every slot (its own hour, widened when too few were seen) and a NaN-aware median
of a few dozen rows per slot. Asked one slot at a time, that was a Python loop over 48 slots
and 4 widenings and a median call per slot, nine times a reference: the largest part of a
level reference's daily rebuild. Here the choices are counted for every slot and every
held-out day at once (a table of counts per slot and day, summed over each widening), and
the medians of every (held-out day, slot) are taken from one sort of a NaN-padded block:
the same rows chosen, the same two middle values halved, so the same numbers bit for bit.
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.typing import NDArray

from app.analysis.medians import nan_column_medians

Array = NDArray[np.float64]
Mask = NDArray[np.bool_]
SLOTS = 48  # hours of a weekday, then of a weekend day
# A group more than this many times the typical group's rows is taken on its own: padded
# with the others, every group would be sorted at its length.
WIDE = 3


@functools.cache
def widenings() -> Mask:
    """(4 × 48 × 48): which slots slot ``s`` reads at each widening (row ``s``): its own,
    ±1 hour of its kind of day, its hour of any day, ±1 hour of any day."""
    member = np.zeros((4, SLOTS, SLOTS), dtype=bool)
    for index in range(SLOTS):
        hour, kind = index % 24, index // 24
        near = [(hour + step) % 24 for step in (-1, 0, 1)]
        member[0, index, index] = True
        member[1, index, [24 * kind + h for h in near]] = True
        member[2, index, [hour, hour + 24]] = True
        member[3, index, [24 * k + h for k in (0, 1) for h in near]] = True
    member.flags.writeable = False  # shared by every caller
    return member


def slot_tables(
    rows: Array,
    slots: NDArray[np.int64],
    days: NDArray[np.int64],
    leave_out: bool,
    min_matched: int,
    min_days: int,
) -> Array:
    """The expected table (48 × columns) of ``rows``; with ``leave_out``, one per distinct
    day (in ``np.unique`` order) from the other days' rows alone: (tables × 48 × columns).
    A slot with fewer than ``min_matched`` rows, or rows from fewer than ``min_days`` days,
    reads the next widening; past the last, every row (of the other days)."""
    unique, day_of = np.unique(days, return_inverse=True)
    day_of = day_of.reshape(-1)
    count = np.bincount(slots * len(unique) + day_of, minlength=SLOTS * len(unique))
    by_group = widenings().astype(np.int64) @ count.reshape(SLOTS, len(unique))  # 4 × 48 × D
    total, seen = by_group.sum(axis=2), (by_group > 0).sum(axis=2)
    if leave_out:  # each day's counts taken away: (4 × 48 × D)
        total, seen = total[:, :, None] - by_group, seen[:, :, None] - (by_group > 0)
    else:
        total, seen = total[:, :, None], seen[:, :, None]
    enough = (total >= min_matched) & (seen >= min_days)
    level = np.where(enough.any(axis=0), enough.argmax(axis=0), -1).T  # (tables × 48)
    return _medians(rows, slots, day_of, level, leave_out)


def _medians(
    rows: Array,
    slots: NDArray[np.int64],
    day_of: NDArray[np.int64],
    level: NDArray[np.int64],
    leave_out: bool,
) -> Array:
    """Each (table, slot)'s NaN-aware column medians of the rows its ``level`` reads."""
    tables, width = len(level), rows.shape[1]
    member = widenings()[np.maximum(level, 0), np.arange(SLOTS)[None, :]][..., slots]
    if leave_out:  # table t is day t held out
        member &= (day_of[None, :] != np.arange(tables)[:, None])[:, None, :]
    found = np.empty((tables, SLOTS, width))
    wide = level < 0
    for table in np.flatnonzero(wide.any(axis=1)).tolist():
        picked = rows if not leave_out else rows[day_of != table]
        found[table, wide[table]] = nan_column_medians(picked)
    groups = member[~wide]  # (groups × rows)
    found[~wide] = _grouped_medians(rows, groups)
    return found


def _grouped_medians(rows: Array, groups: Mask) -> Array:
    """``nan_column_medians(rows[group])`` for each boolean row of ``groups``."""
    sizes = groups.sum(axis=1)
    out = np.empty((len(groups), rows.shape[1]))
    if len(groups) == 0:
        return out
    typical = int(np.median(sizes))
    alone = sizes > WIDE * max(typical, 1)
    for index in np.flatnonzero(alone).tolist():
        out[index] = nan_column_medians(rows[groups[index]])
    batch = np.flatnonzero(~alone)
    if len(batch):
        out[batch] = _padded_medians(rows, groups[batch], sizes[batch])
    return out


def _padded_medians(rows: Array, groups: Mask, sizes: NDArray[np.int64]) -> Array:
    """The groups' rows in one NaN-padded block, sorted once (NaNs last): each column's
    middle two of its non-NaN values, halved, as ``nan_column_medians`` takes them."""
    longest = int(sizes.max()) if len(sizes) else 0
    group, row = np.nonzero(groups)  # by group, then row
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    block = np.full((len(groups), max(longest, 1), rows.shape[1]), np.nan)
    block[group, np.arange(len(row)) - starts[group]] = rows[row]
    block.sort(axis=1)
    counts = (~np.isnan(block)).sum(axis=1)  # (groups × columns)
    half = counts // 2
    low = np.maximum(np.where(counts % 2 == 1, half, half - 1), 0)
    high = np.minimum(half, block.shape[1] - 1)
    pick = np.take_along_axis
    middle = (pick(block, low[:, None, :], axis=1) + pick(block, high[:, None, :], axis=1)) / 2
    found: Array = np.where(counts > 0, middle[:, 0, :], np.nan)
    return found
