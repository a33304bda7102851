"""A mergeable quantile sketch: log-spaced buckets with a 1 % relative-error bound (DDSketch).

A value x with |x| > ``FLOOR_MS`` falls in bucket k = sign(x) * ceil(log_γ(|x| / FLOOR_MS)),
γ = (1 + α) / (1 − α), and is read back as the bucket's representative
sign(x) * FLOOR_MS * 2γ^|k| / (γ + 1), which is within α·|x| of x. Values with
|x| ≤ ``FLOOR_MS`` (1 µs) share bucket 0 and read back as 0. Keys order as the values do,
so a rank is found by walking cumulative counts.

Sketches merge by adding counts, exactly: the quantile of a merged sketch is the quantile
of all the values it holds (to within α), never an average of the parts' quantiles.
Quantiles interpolate between the two ranks around q·(n − 1), as numpy's default does; each
rank's value is within α of the exact order statistic, so the interpolation is within
α (relatively) of ``np.percentile`` for values of one sign.

Pure: plain values in, plain values out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

RELATIVE_ACCURACY = 0.01
GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
LOG_GAMMA = math.log(GAMMA)
FLOOR_MS = 1e-3

Counts = NDArray[np.int64]


def keys_of(values: NDArray[np.float64]) -> NDArray[np.int64]:
    magnitude = np.abs(values)
    above = magnitude > FLOOR_MS
    steps = np.ceil(np.log(np.where(above, magnitude, FLOOR_MS) / FLOOR_MS) / LOG_GAMMA)
    # A value just above the floor rounds to step 0; it belongs to bucket 1.
    steps = np.where(above, np.maximum(steps, 1), 0).astype(np.int64)
    return np.sign(values).astype(np.int64) * steps


def values_of(keys: NDArray[np.int64]) -> NDArray[np.float64]:
    magnitude = FLOOR_MS * 2 * np.power(GAMMA, np.abs(keys).astype(np.float64)) / (GAMMA + 1)
    return np.where(keys == 0, 0.0, np.sign(keys) * magnitude)


@dataclass(frozen=True, slots=True)
class Sketch:
    """Counts of consecutive keys: ``counts[i]`` is the count of key ``offset + i``."""

    offset: int = 0
    counts: Counts = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    @classmethod
    def of(cls, values: Sequence[float] | NDArray[np.float64]) -> Sketch:
        keys = keys_of(np.asarray(values, dtype=np.float64))
        if len(keys) == 0:
            return cls()
        low = int(keys.min())
        return cls(low, np.bincount(keys - low).astype(np.int64))

    @classmethod
    def zeros(cls, count: int) -> Sketch:
        return cls(0, np.array([count], dtype=np.int64)) if count > 0 else cls()

    def quantiles(self, qs: Mapping[str, float]) -> dict[str, float]:
        """Quantiles by name, q in [0, 1]; empty when the sketch is."""
        if self.count == 0:
            return {}
        found = row_quantiles(self.offset, self.counts[None, :], qs)
        return {name: float(values[0]) for name, values in found.items()}

    def to_json(self) -> list[Any]:
        return [self.offset, self.counts.tolist()]

    @classmethod
    def from_json(cls, data: Sequence[Any]) -> Sketch:
        offset, counts = data
        return cls(int(offset), np.asarray(counts, dtype=np.int64))


def merge(sketches: Iterable[Sketch]) -> Sketch:
    present = [s for s in sketches if len(s.counts)]
    if not present:
        return Sketch()
    low = min(s.offset for s in present)
    high = max(s.offset + len(s.counts) for s in present)
    total = np.zeros(high - low, dtype=np.int64)
    for sketch in present:
        start = sketch.offset - low
        total[start : start + len(sketch.counts)] += sketch.counts
    return Sketch(low, total)


def stack(groups: Sequence[Sequence[Sketch]]) -> tuple[int, NDArray[np.int64]]:
    """Each group merged into one row of a (groups × keys) count matrix, and its first key."""
    present = [s for group in groups for s in group if len(s.counts)]
    if not present:
        return 0, np.zeros((len(groups), 1), dtype=np.int64)
    low = min(s.offset for s in present)
    high = max(s.offset + len(s.counts) for s in present)
    matrix = np.zeros((len(groups), high - low), dtype=np.int64)
    for row, group in enumerate(groups):
        for sketch in group:
            start = sketch.offset - low
            matrix[row, start : start + len(sketch.counts)] += sketch.counts
    return low, matrix


def row_quantiles(
    low: int, matrix: NDArray[np.int64], qs: Mapping[str, float]
) -> dict[str, NDArray[np.float64]]:
    """Quantiles of every row of a count matrix at once; NaN for an empty row."""
    used = matrix.any(axis=0)  # keys no row holds cannot be a quantile: leave them out
    if not used.any():
        return {name: np.full(len(matrix), np.nan) for name in qs}
    ranked = _Ranked(np.flatnonzero(used) + low, np.cumsum(matrix[:, used], axis=1))
    n = ranked.cumulative[:, -1]
    last = np.maximum(n - 1, 0)
    # Every quantile of every row in one search (a rollup's summary is computed whenever a
    # run is merged into it): column j of ``position`` is ``qs``' j-th.
    position = np.array(list(qs.values()), dtype=np.float64)[None, :] * last[:, None]
    below = np.floor(position)
    values = ranked.value_at(np.concatenate([below, np.minimum(below + 1, last[:, None])], 1))
    low_value, high_value = values[:, : len(qs)], values[:, len(qs) :]
    value = low_value + (high_value - low_value) * (position - below)
    found = np.where((n > 0)[:, None], value, np.nan)
    return {name: found[:, column] for column, name in enumerate(qs)}


class _Ranked:
    """Rows of cumulative counts laid end to end, each lifted above the one before, so that
    one sorted search finds a rank in every row at once."""

    def __init__(self, keys: NDArray[np.int64], cumulative: NDArray[np.int64]) -> None:
        self.keys = keys.astype(np.int64)
        self.cumulative = cumulative
        rows, self.width = cumulative.shape
        self.lift = np.arange(rows, dtype=np.int64) * (int(cumulative[:, -1].max()) + 1)
        self.flat = (cumulative + self.lift[:, None]).ravel()
        self.starts = np.arange(rows, dtype=np.int64) * self.width

    def value_at(self, ranks: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each row's values at its 0-based ranks (a row of ``ranks`` per row): the first
        key whose count exceeds each."""
        flat = np.searchsorted(self.flat, ranks + self.lift[:, None], side="right")
        index = flat - self.starts[:, None]
        return values_of(self.keys[np.minimum(index, self.width - 1)])
