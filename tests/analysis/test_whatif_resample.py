"""The run resamples drawn and used a chunk at a time: the same counts and the same answer
for any chunk size, and no chunk above its bound."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from app.analysis.whatif import SampleSet, parse_changes, predict
from app.analysis.whatif.resample import (
    draws,
    resampled_quantiles,
    resampled_rates,
    run_counts,
    spreads,
)

PHASES = ("queue", "network", "generation")


def samples_of(runs: int, per_run: int, seed: int = 3) -> SampleSet:
    rng = np.random.default_rng(seed)
    n = runs * per_run
    ms = np.round(rng.gamma(2.0, 40.0, size=(n, len(PHASES))), 1)  # ties too
    censored = rng.random(n) < 0.05
    return SampleSet(PHASES, ms, np.repeat(np.arange(runs), per_run), censored, 400.0)


# (runs, resamples, cells): one row per chunk, a few rows, every row in one chunk.
CHUNKINGS = [
    pytest.param(7, 30, 7, id="a-row-a-chunk"),
    pytest.param(50, 101, 160, id="three-rows-a-chunk-and-a-rest"),
    pytest.param(50, 40, 10**9, id="one-chunk"),
    pytest.param(1, 12, 1, id="one-run"),
    pytest.param(9, 0, 10, id="no-resamples"),
]


@pytest.mark.parametrize(("runs", "resamples", "cells"), CHUNKINGS)
def test_the_chunks_are_the_counts_drawn_at_once_row_for_row(
    runs: int, resamples: int, cells: int
) -> None:
    chunks = list(draws(runs, resamples, 11, cells))
    assert all(chunk.size <= max(cells, runs) for chunk in chunks)
    whole = run_counts(runs, resamples, np.random.default_rng(11))
    joined = np.concatenate(chunks) if chunks else np.zeros((0, runs))
    assert np.array_equal(joined, whole)


@pytest.mark.parametrize(("runs", "resamples", "cells"), CHUNKINGS)
def test_the_spread_of_chunks_is_the_spread_of_every_resample_at_once(
    runs: int, resamples: int, cells: int
) -> None:
    samples = samples_of(runs, 6)
    values, hits = samples.totals, (samples.totals > 250).astype(np.float64)
    (found,) = spreads(draws(runs, resamples, 5, cells), [(values, hits, samples.run)], cells)
    counts = run_counts(runs, resamples, np.random.default_rng(5))
    assert np.array_equal(found.quantiles, resampled_quantiles(values, samples.run, counts))
    assert np.array_equal(found.rates, resampled_rates(hits, samples.run, counts))


@pytest.mark.parametrize(
    ("tokens", "runs", "per_run"),
    [
        pytest.param([], 40, 10, id="identity"),
        pytest.param(["queue=0", "network*0.5"], 40, 10, id="phases"),
        pytest.param(["cold=10%:500-900ms", "deadline=300ms"], 25, 4, id="random-and-deadline"),
        pytest.param(["generation*2"], 300, 1, id="one-sample-runs"),
    ],
)
def test_a_prediction_is_the_same_whatever_the_chunk_size(
    tokens: list[str], runs: int, per_run: int
) -> None:
    samples, changes = samples_of(runs, per_run), parse_changes(tokens)
    whole = predict(samples, changes, seed=16, resamples=200, cells=10**9).to_json()
    for cells in (1, runs * 3 + 1, 5_000):
        assert predict(samples, changes, seed=16, resamples=200, cells=cells).to_json() == whole


def test_a_narrow_window_searched_again_in_small_blocks_finds_every_quantile() -> None:
    """Cells below a window's width: every widening pass runs one row at a time."""
    samples = samples_of(200, 30)
    counts = run_counts(200, 25, np.random.default_rng(2))
    values = samples.totals
    at_once = resampled_quantiles(values, samples.run, counts, cells=10**9)
    assert np.array_equal(resampled_quantiles(values, samples.run, counts, cells=1), at_once)
    for row, weights in zip(at_once, counts, strict=True):
        written_out = np.repeat(values, weights[samples.run].astype(int))
        expected = np.quantile(written_out, [0.5, 0.9, 0.99], method="inverted_cdf")
        assert list(row) == list(expected)


def test_what_a_prediction_holds_at_once_does_not_grow_with_its_resamples() -> None:
    """20,000 one-sample runs, 1,000 resamples: the counts alone were 160 MB a copy, held
    three times over; chunked, the peak is the chunk's few tens of MB and the samples'."""
    samples = samples_of(20_000, 1)
    tracemalloc.start()
    try:
        predict(samples, parse_changes(["queue=0"]), resamples=1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20, f"{peak / 2**20:.0f} MB"
