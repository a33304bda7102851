"""The sketch's error bound against numpy's exact percentiles, and exact merging."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from app.analysis.digest import QUANTILES, digest_of, merge_digests
from app.analysis.sketch import (
    FLOOR_MS,
    RELATIVE_ACCURACY,
    Sketch,
    keys_of,
    merge,
    row_quantiles,
    stack,
    values_of,
)
from app.analysis.summary import summarize
from app.store.records import SampleRecord
from tests.runfactory import T0

# Float rounding at a bucket edge may cost a few ulps beyond the bound.
BOUND = RELATIVE_ACCURACY * (1 + 1e-9)
Draw = Callable[[np.random.Generator], np.ndarray]

DISTRIBUTIONS: dict[str, Draw] = {
    "lognormal LLM latency": lambda rng: rng.lognormal(np.log(800), 0.6, 5000),
    "heavy tail (pareto)": lambda rng: 50 * (1 + rng.pareto(1.5, 3000)),
    "tight (sigma 0.01)": lambda rng: rng.lognormal(np.log(40), 0.01, 2000),
    "two modes (cache hit / miss)": lambda rng: np.concatenate(
        [rng.normal(20, 2, 900).clip(1), rng.normal(2000, 100, 100)]
    ),
    "one value": lambda rng: np.array([123.456]),
    "two values": lambda rng: np.array([10.0, 1000.0]),
    "long calls (up to 10 minutes)": lambda rng: rng.uniform(1, 600_000, 1000),
    "sub-millisecond": lambda rng: rng.uniform(0.002, 0.9, 1000),
    "many ties": lambda rng: rng.integers(1, 5, 1000).astype(float),
}


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_quantiles_are_within_one_percent_of_numpy(name: str) -> None:
    values = DISTRIBUTIONS[name](np.random.default_rng(3))
    found = Sketch.of(values).quantiles(QUANTILES)
    for label, q in QUANTILES.items():
        exact = float(np.percentile(values, q * 100))
        assert abs(found[label] - exact) <= BOUND * abs(exact), (label, found[label], exact)


@pytest.mark.parametrize(
    ("value", "bucket"),
    [
        (0.0, 0),
        (FLOOR_MS, 0),
        (-FLOOR_MS / 2, 0),
        (FLOOR_MS * 1.0000001, 1),
        (-FLOOR_MS * 1.0000001, -1),
    ],
)
def test_values_near_zero_share_bucket_zero(value: float, bucket: int) -> None:
    assert keys_of(np.array([value]))[0] == bucket


@pytest.mark.parametrize("value", [1e-2, 0.5, 1.0, 37.2, 1e3, 1e6, 3.6e7, -5.0, -1e4])
def test_every_value_reads_back_within_the_bound(value: float) -> None:
    back = values_of(keys_of(np.array([value])))[0]
    assert abs(back - value) <= BOUND * abs(value)


def test_keys_order_as_the_values_do() -> None:
    values = np.sort(np.random.default_rng(5).normal(0, 100, 2000))
    assert np.all(np.diff(keys_of(values)) >= 0)


def test_merging_sketches_equals_sketching_all_values() -> None:
    rng = np.random.default_rng(11)
    parts = [rng.lognormal(mu, 0.3, 200) for mu in (2.0, 4.0, 6.0)]
    merged = merge(Sketch.of(part) for part in parts)
    whole = Sketch.of(np.concatenate(parts))
    assert merged.offset == whole.offset
    assert merged.counts.tolist() == whole.counts.tolist()


def test_merged_quantile_is_not_the_mean_of_the_parts_quantiles() -> None:
    # A fast run and a slow run: the p99 of both is the slow run's p99, not the average.
    rng = np.random.default_rng(2)
    fast, slow = rng.lognormal(np.log(100), 0.1, 500), rng.lognormal(np.log(1000), 0.1, 500)
    merged = merge([Sketch.of(fast), Sketch.of(slow)]).quantiles({"p99": 0.99})["p99"]
    exact = float(np.percentile(np.concatenate([fast, slow]), 99))
    mean_of_parts = (np.percentile(fast, 99) + np.percentile(slow, 99)) / 2
    assert abs(merged - exact) <= BOUND * exact
    assert abs(mean_of_parts - exact) > 0.3 * exact


def test_rows_of_a_matrix_give_the_same_quantiles_as_each_sketch() -> None:
    rng = np.random.default_rng(8)
    groups = [[Sketch.of(rng.lognormal(m, 0.5, 50)) for m in (1, 3)], [], [Sketch.of([5.0])]]
    low, matrix = stack(groups)
    rows = row_quantiles(low, matrix, QUANTILES)
    for i, group in enumerate(groups):
        alone = merge(group).quantiles(QUANTILES)
        for label in QUANTILES:
            if not alone:
                assert np.isnan(rows[label][i])
            else:
                assert rows[label][i] == pytest.approx(alone[label], rel=1e-12)


def test_json_round_trip_is_exact() -> None:
    sketch = Sketch.of(np.random.default_rng(4).lognormal(3, 1, 300))
    back = Sketch.from_json(sketch.to_json())
    assert back.offset == sketch.offset and back.counts.tolist() == sketch.counts.tolist()


def test_empty_sketch_has_no_quantiles() -> None:
    assert Sketch().quantiles(QUANTILES) == {}
    assert Sketch.of([]).count == 0


# Digests: the same statistics summarize computes, within the bound.


def _samples(rng: np.random.Generator, phases: dict[str, float], n: int) -> list[SampleRecord]:
    found = []
    for idx in range(n):
        values = {name: float(m * rng.lognormal(0, 0.4)) for name, m in phases.items()}
        status = "deadline_exceeded" if idx % 25 == 0 else "ok"
        found.append(SampleRecord(idx, T0, status, sum(values.values()), values))
    found.append(SampleRecord(n, T0, "error", 0.0, {}, error_class="ConnectError"))
    return found


def test_digest_summary_matches_summarize_with_phases_missing_in_some_runs() -> None:
    rng = np.random.default_rng(6)
    with_server = _samples(rng, {"connect": 3.0, "network": 20.0, "server": 90.0}, 300)
    without = _samples(rng, {"connect": 3.0, "network": 25.0}, 200)
    merged = merge_digests([digest_of(with_server), digest_of(without)]).summary()
    exact = summarize(with_server + without)
    assert (merged.n, merged.errors, merged.deadline_exceeded) == (
        exact.n,
        exact.errors,
        exact.deadline_exceeded,
    )
    assert merged.dominant == exact.dominant == "server"
    for label, value in exact.total.items():
        assert abs(merged.total[label] - value) <= BOUND * value
    for name, stats in exact.phases.items():
        for label, value in stats.quantiles.items():
            assert abs(merged.phases[name].quantiles[label] - value) <= BOUND * abs(value)
        # Shares are ratios of medians: each within 1 %, so the share within about 2 %.
        assert merged.phases[name].share == pytest.approx(stats.share, rel=2.05e-2)


@pytest.mark.parametrize(
    "samples",
    [
        [],
        [SampleRecord(0, T0, "error", 0.0, {}, error_class="ConnectError")],
        _samples(np.random.default_rng(7), {"connect": 3.0, "server": 90.0}, 40),
        _samples(np.random.default_rng(8), {"dns": 0.0005, "connect": 3.0, "wait": 9.0}, 5),
    ],
    ids=["empty", "errors-only", "two-phases", "below-the-floor"],
)
def test_a_lone_digest_merged_is_itself(samples: list[SampleRecord]) -> None:
    """The rollups keep a lone part of a rollup row as it is instead of merging it
    (app.store.rollups.digests): the same row either way."""
    digest = digest_of(samples)
    assert merge_digests([digest]).to_json() == digest.to_json()
    assert merge_digests([digest]).summary() == digest.summary()
