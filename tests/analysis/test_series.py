"""The chart series maths (app.analysis.series), on plain digests: no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.analysis.digest import Digest
from app.analysis.series import (
    digest_columns,
    pick_bucket,
    rounded,
    shares_and_dominant,
    summary_columns,
)
from app.analysis.sketch import RELATIVE_ACCURACY, Sketch

T0 = datetime(2026, 3, 2, tzinfo=UTC)
BOUND = RELATIVE_ACCURACY * (1 + 1e-9)


def digest(total: list[float], **phases: list[float]) -> Digest:
    return Digest(
        runs=1,
        n=len(total),
        total=Sketch.of(total),
        phases={name: Sketch.of(values) for name, values in phases.items()},
    )


@pytest.mark.parametrize(
    ("span", "interval_s", "bucket"),
    [
        (timedelta(hours=1), 60, 60),
        (timedelta(hours=1), 900, 900),  # the default interval: one run a bucket
        (timedelta(hours=24), 900, 900),
        (timedelta(hours=24), 600, 900),
        (timedelta(hours=24), 1800, 3600),
        (timedelta(days=7), 900, 3600),  # the range decides when it is the coarser
        (timedelta(days=7), 86400, 86400),
        (timedelta(days=30), 2 * 86400, 2 * 86400),
    ],
)
def test_pick_bucket_is_no_finer_than_the_interval(
    span: timedelta, interval_s: float, bucket: int
) -> None:
    assert pick_bucket(T0, T0 + span, interval_s) == bucket


@pytest.mark.parametrize(
    ("values", "digits", "expected"),
    [
        ([1.23456, None, 2.0], 3, [1.235, None, 2.0]),
        ([0.123456], 4, [0.1235]),
        ([None, None], 3, [None, None]),
        ([], 3, []),
    ],
)
def test_rounded_keeps_empty_buckets_empty(
    values: list[float | None], digits: int, expected: list[float | None]
) -> None:
    assert rounded(values, digits) == expected


@pytest.mark.parametrize(
    ("medians", "shares", "dominant"),
    [
        ([[30.0], [10.0]], [[0.75], [0.25]], ["a"]),
        ([[0.0], [0.0]], [[0.0], [0.0]], [None]),  # nothing took time: no phase dominates
        ([[np.nan], [np.nan]], [[np.nan], [np.nan]], [None]),  # an empty bucket
        ([[1.0, 5.0], [3.0, 5.0]], [[0.25, 0.5], [0.75, 0.5]], ["b", "a"]),  # a tie: the first
    ],
)
def test_shares_and_dominant_per_bucket(
    medians: list[list[float]], shares: list[list[float]], dominant: list[str | None]
) -> None:
    found, names = shares_and_dominant(np.array(medians), ["a", "b"], len(dominant))
    np.testing.assert_allclose(found, np.array(shares))
    assert names == dominant


def test_shares_of_no_phase_at_all_are_an_empty_matrix() -> None:
    found, dominant = shares_and_dominant(np.zeros((0, 3)), [], 3)
    assert found.shape == (0, 3)
    assert dominant == [None, None, None]


def test_digest_columns_are_quantiles_of_all_samples_of_a_bucket() -> None:
    rng = np.random.default_rng(7)
    first = rng.lognormal(4.0, 0.3, 200)
    second = rng.lognormal(5.0, 0.3, 50)  # slower and fewer: a mean of medians would lie
    groups = [[digest(list(first), wait=list(first)), digest(list(second), wait=list(second))], []]
    columns = digest_columns(groups)
    both = np.concatenate([first, second])
    for name, q in (("p50", 50), ("p90", 90), ("p99", 99)):
        expected = float(np.percentile(both, q))
        assert abs(columns["total"][name][0] - expected) <= BOUND * expected
        assert columns["total"][name][1] is None
    assert (columns["runs"], columns["samples"]) == ([2, 0], [250, 0])
    assert columns["phases"] == ["wait"]
    assert columns["shares"]["wait"] == [1.0, None]
    assert columns["dominant"] == ["wait", None]


def test_a_digest_without_a_phase_counts_zero_in_it() -> None:
    with_phase = digest([10.0] * 4, wait=[10.0] * 4)
    without = digest([10.0] * 4)
    columns = digest_columns([[with_phase, without]])
    # Half the samples spent 10 ms waiting, half 0 ms: the median of all eight is between.
    assert columns["phase_quantiles"]["wait"]["p90"][0] == pytest.approx(10.0, rel=BOUND)
    assert columns["phase_quantiles"]["wait"]["p50"][0] < 10.0 * (1 - BOUND)


def test_summary_columns_place_each_rollup_in_its_bucket() -> None:
    stored = {
        "runs": 3,
        "n": 30,
        "deadline_exceeded": 1,
        "errors": 2,
        "total": [100.0, 150.0, 160.0, 200.0],
        "phases": {"queue": [60.0, 90.0, 95.0, 120.0], "transfer": [20.0, 30.0, 31.0, 40.0]},
    }
    columns = summary_columns(3, [(1, stored)])
    assert columns["phases"] == ["queue", "transfer"]
    assert columns["runs"] == [0, 3, 0]
    assert (columns["samples"], columns["errors"]) == ([0, 30, 0], [0, 2, 0])
    assert columns["deadline_misses"] == [0, 1, 0]
    assert columns["total"]["p99"] == [None, 200.0, None]
    assert columns["phase_quantiles"]["queue"]["p50"] == [None, 60.0, None]
    assert columns["shares"]["queue"] == [None, 0.75, None]
    assert columns["dominant"] == [None, "queue", None]
