"""The pooled tail CUSUM's threshold for one target, simulated from its references' own runs.

A fixed threshold is set by the wobbliest target the benchmark had (13 nats): a target
whose tail holds still waits for evidence its own history never produced without a
change. Here the false-alarm budget is spent per target instead: each vantage's reference
runs, each scored against the other days (``tailcusum.held_out``, over the dispersion),
are resampled in blocks of consecutive runs (a busy stretch stays whole) into streams as
long as ``STREAM_STEPS``, the vantages interleaved run by run as the pooled CUSUM takes
them, and the threshold is the height that the family's highest CUSUM reaches in as many
of those streams as the budget allows (a stream of ``STREAM_STEPS`` steps crosses it with
chance ``STREAM_STEPS / BUDGET_STEPS``). Nothing is stacked after it.

It never goes below ``FLOOR``: one known alternative's CUSUM at this budget needs about
that much (the benchmark's oracle: 7.6–9.3 nats), and a family estimated from a week
cannot need less.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.analysis.runs import Array

Steps = NDArray[np.floating[Any]]  # a reference's runs × members (float32 as kept)
Mask = NDArray[np.bool_]

# A pooled CUSUM's steps between false alarms: 0.5 a target-month shared by three
# detectors and two vantages at a run every 15 minutes (issue 35's accounting).
BUDGET_STEPS = 34_560
STREAM_STEPS = 1_344  # a simulated stream: a week of two vantages' runs
STREAMS = 512  # about 20 of them cross the threshold: its error is a few tenths of a nat
BLOCK = 8  # runs drawn together: two hours at 15 minutes (tailcusum's dispersion's block)
FLOOR = 9.0
MIN_BLOCKS = 3  # fewer whole blocks of a vantage's runs say too little: no threshold
SEED = 0  # the same runs give the same threshold, whoever asks and when
CHUNK = 32  # streams simulated at once (memory: CHUNK × STREAM_STEPS × members × 8 bytes)


def pooled_threshold(steps: Sequence[Steps], live: Mask) -> float | None:
    """The threshold for a CUSUM fed by each vantage's runs in turn, from ``steps``: per
    vantage, its reference runs' member steps (runs × members) in time order; ``live``:
    the members the detector reads. None when a vantage has too few runs to resample."""
    if not steps or not live.any() or min(len(s) for s in steps) < MIN_BLOCKS * BLOCK:
        return None
    rng = np.random.default_rng(SEED)
    blocks = -(-STREAM_STEPS // (BLOCK * len(steps)))
    starts = [rng.integers(0, len(s) - BLOCK + 1, size=(STREAMS, blocks)) for s in steps]
    highest = np.concatenate(
        [
            _highest(_streams(steps, live, [s[i : i + CHUNK] for s in starts]))
            for i in range(0, STREAMS, CHUNK)
        ]
    )
    return max(FLOOR, float(np.quantile(highest, 1 - STREAM_STEPS / BUDGET_STEPS)))


def _streams(steps: Sequence[Steps], live: Mask, starts: Sequence[NDArray[np.int64]]) -> Steps:
    """Streams × steps × live members: each vantage's blocks from ``starts``, the vantages'
    runs interleaved (run i of every vantage, then run i + 1 …)."""
    offsets = np.arange(BLOCK)
    parts = [
        s[:, live][(first[:, :, None] + offsets).reshape(len(first), -1)]
        for s, first in zip(steps, starts, strict=True)
    ]
    woven = np.stack(parts, axis=2)  # streams × runs × vantages × members
    return woven.reshape(woven.shape[0], -1, woven.shape[-1])


def _highest(streams: Steps) -> Array:
    """Each stream's highest CUSUM over its members and steps: a CUSUM at step t is the
    walk's sum there less its lowest sum so far (0 included)."""
    walk = np.cumsum(streams, axis=1)
    lowest = np.minimum(np.minimum.accumulate(walk, axis=1), 0.0)
    return np.asarray((walk - lowest).max(axis=(1, 2)), dtype=np.float64)
