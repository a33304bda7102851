"""Every slot's expected level, for a reference and each of its days held out, at once
(app/analysis/slottables.py); its sums against the one-slot spelling are in
tests/analysis/test_levelspread.py."""

from __future__ import annotations

import numpy as np
import pytest

from app.analysis import slottables as st
from app.analysis.medians import nan_column_medians


@pytest.mark.parametrize(
    ("index", "widening", "slots"),
    [
        (10, 0, {10}),
        (10, 1, {9, 10, 11}),
        (0, 1, {23, 0, 1}),  # midnight's neighbours wrap within its kind of day
        (24, 1, {47, 24, 25}),
        (34, 2, {10, 34}),
        (23, 3, {22, 23, 0, 46, 47, 24}),
    ],
)
def test_each_widening_reads_its_slots(index: int, widening: int, slots: set[int]) -> None:
    assert set(np.flatnonzero(st.widenings()[widening, index]).tolist()) == slots


def _rows(sizes: list[int], nan_share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rows = rng.normal(0, 1, (40, 3))
    rows[rng.random(rows.shape) < nan_share] = np.nan
    groups = np.zeros((len(sizes), len(rows)), dtype=bool)
    for group, size in enumerate(sizes):
        groups[group, rng.choice(len(rows), size, replace=False)] = True
    return rows, groups


@pytest.mark.parametrize(
    ("sizes", "nan_share"),
    [
        ([], 0.0),  # no group
        ([1, 2, 3, 4], 0.0),  # odd and even counts
        ([5, 5, 40], 0.0),  # one far longer than the others: taken on its own
        ([6, 7, 8], 0.5),  # NaNs: each column its own count
        ([3, 3], 1.0),  # only NaNs: NaN, as nanmedian says
        ([0, 4], 0.0),  # an empty group: NaN
    ],
)
def test_grouped_medians_are_each_groups_own(sizes: list[int], nan_share: float) -> None:
    rows, groups = _rows(sizes, nan_share, len(sizes))
    found = st._grouped_medians(rows, groups)
    expected = [nan_column_medians(rows[group]) for group in groups]
    np.testing.assert_array_equal(found, np.array(expected).reshape(found.shape))


@pytest.mark.parametrize(
    ("per_day", "days", "leave_out", "min_days", "widening"),
    [
        (6, [0, 1], False, 2, 0),  # its own hour: six runs from two days
        (2, [0, 1], False, 2, 1),  # ±1 hour: four at 10:00 are too few
        (6, [0], False, 2, -1),  # one day is never two: every row
        (6, [0, 1, 2], True, 1, 0),  # held out: two other days' runs enough
        (2, [0, 1, 2], True, 1, 1),  # held out: four from the others, then ±1 hour's 12
        (1, [0, 1, 2], True, 1, 1),  # held out: ±1 hour's 6 are just enough
        (1, [0, 1], True, 1, -1),  # held out: the other day's 3 are too few: all its rows
    ],
)
def test_a_slot_reads_the_first_widening_with_enough(
    per_day: int, days: list[int], leave_out: bool, min_days: int, widening: int
) -> None:
    """10:00 on weekdays, with 09:00 and 11:00 beside it (twice as many runs): the table's
    10:00 is the median of the rows its first sufficient widening reads."""
    at = [(10, d) for d in days for _ in range(per_day)]
    at += [(h, d) for h in (9, 11) for d in days for _ in range(per_day)]
    slots = np.array([s for s, _ in at], dtype=np.int64)
    day_of = np.array([d for _, d in at], dtype=np.int64)
    rows = np.arange(len(at), dtype=np.float64)[:, None] ** 1.5
    tables = st.slot_tables(rows, slots, day_of, leave_out, 6, min_days)
    for table, held in enumerate(days if leave_out else [None]):
        kept = day_of != held
        reads = st.widenings()[widening, 10][slots] if widening >= 0 else np.ones(len(at), bool)
        expected = nan_column_medians(rows[reads & kept])
        np.testing.assert_array_equal(tables[table, 10], expected)
