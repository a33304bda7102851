"""Did the phase mix move although the leader did not? Compositional statistics.

Each run's phase medians are a composition (only the proportions matter). Its centred
log-ratio (clr) makes Euclidean distance meaningful: the distance between the clr centres
of two windows is their Aitchison distance. A permutation test over whole runs (not
samples) tells whether that distance is more than the spread of runs would give.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.analysis.runs import Array, RunData, common_phases, stacked_phases

PSEUDO_SHARE = 0.005  # a phase at 0 ms would make the log-ratio infinite


@dataclass(frozen=True, slots=True)
class CompositionShift:
    distance: float
    p_value: float
    moved_most: str  # the phase whose clr coordinate moved furthest
    runs: tuple[int, int]


def clr_rows(runs: Sequence[RunData], names: Sequence[str]) -> Array:
    """One clr row per run, from the run's per-phase medians."""
    rows = []
    for run in runs:
        values, _ = stacked_phases([run], names)
        if len(values):
            rows.append(np.median(values, axis=0))
    if not rows:
        return np.empty((0, len(names)))
    medians = np.asarray(rows)
    shares = medians / np.maximum(medians.sum(axis=1, keepdims=True), 1e-9) + PSEUDO_SHARE
    logs = np.log(shares)
    return np.asarray(logs - logs.mean(axis=1, keepdims=True), dtype=np.float64)


def composition_shift(
    recent: Sequence[RunData],
    reference: Sequence[RunData],
    rng: np.random.Generator,
    permutations: int = 200,
) -> CompositionShift | None:
    names = common_phases([*recent, *reference])
    return clr_shift(clr_rows(recent, names), clr_rows(reference, names), names, rng, permutations)


def clr_shift(
    first: Array,
    second: Array,
    names: Sequence[str],
    rng: np.random.Generator,
    permutations: int = 200,
) -> CompositionShift | None:
    """Aitchison distance between the clr centres of two sets of runs, and its p-value."""
    if len(first) < 2 or len(second) < 2 or len(names) < 2:
        return None
    gap = first.mean(axis=0) - second.mean(axis=0)
    distance = float(np.linalg.norm(gap))
    pooled = np.concatenate([first, second])
    count = len(first)
    shuffled = np.argsort(rng.random((permutations, len(pooled))), axis=1)
    picked = pooled[shuffled]  # (permutations × runs × phases)
    gaps = picked[:, :count].mean(axis=1) - picked[:, count:].mean(axis=1)
    beyond = int(np.sum(np.linalg.norm(gaps, axis=1) >= distance))
    moved = names[int(np.argmax(np.abs(gap)))]
    return CompositionShift(
        distance, (1 + beyond) / (1 + permutations), moved, (count, len(second))
    )
