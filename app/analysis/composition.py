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
from numpy.typing import NDArray

from app.analysis.runs import Array, RunData, common_phases

PSEUDO_SHARE = 0.005  # a phase at 0 ms would make the log-ratio infinite
# A permutation whose distance is this close to the observed one is worked out again the
# long way, summing in the order the plain test does, so that ``>=`` decides as it would.
NEAR = 1e-9
FEW = 8  # up to this many first picks, repeated minima beat a partition


@dataclass(frozen=True, slots=True)
class CompositionShift:
    distance: float
    p_value: float
    moved_most: str  # the phase whose clr coordinate moved furthest
    runs: tuple[int, int]


def clr_rows(runs: Sequence[RunData], names: Sequence[str]) -> Array:
    """One clr row per run, from the run's per-phase medians (kept with the run: a run is
    in many windows and in every reference of a week)."""
    rows = [_clr_row(run, tuple(names)) for run in runs if run.timed]
    if not rows:
        return np.empty((0, len(names)))
    return np.asarray(rows)


def _clr_row(run: RunData, names: tuple[str, ...]) -> Array:
    return run.memo(("clr", names), lambda: _clr(run.medians(names)[None])[0])


def _clr(medians: Array) -> Array:
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
    beyond = _beyond(pooled, len(first), distance, rng, permutations)
    moved = names[int(np.argmax(np.abs(gap)))]
    return CompositionShift(
        distance, (1 + beyond) / (1 + permutations), moved, (len(first), len(second))
    )


def _beyond(
    pooled: Array, count: int, distance: float, rng: np.random.Generator, permutations: int
) -> int:
    """How many random relabellings of ``pooled`` (the first ``count`` rows one group, the
    rest the other) put the group centres at least ``distance`` apart.

    A relabelling is the argsort of a row of uniform draws. Only which rows come first
    matters, so they are picked without sorting whole rows and the other centre comes from
    the total; the few that land within NEAR of ``distance`` are summed the long way."""
    keys = rng.random((permutations, len(pooled)))
    sums = pooled[first_of_permutations(keys, count)].sum(axis=1)
    gaps = sums / count - (pooled.sum(axis=0) - sums) / (len(pooled) - count)
    norms = np.sqrt(np.einsum("ij,ij->i", gaps, gaps))
    beyond = int(np.count_nonzero(norms >= distance))
    near = np.abs(norms - distance) <= NEAR * (1 + distance)
    for row in np.flatnonzero(near) if near.any() else ():
        picked = pooled[np.argsort(keys[row])][None]
        gap = picked[:, :count].mean(axis=1) - picked[:, count:].mean(axis=1)
        beyond += int(np.linalg.norm(gap, axis=1)[0] >= distance) - int(norms[row] >= distance)
    return beyond


def first_of_permutations(keys: Array, count: int) -> NDArray[np.intp]:
    """``np.argsort(keys, axis=1)[:, :count]``, without sorting each row whole: for a few,
    the row minimum ``count`` times over (distinct draws: the same order argsort gives)."""
    if count >= keys.shape[1]:
        return np.argsort(keys, axis=1)
    if count > FEW:
        smallest = np.argpartition(keys, count - 1, axis=1)[:, :count]
        order = np.argsort(np.take_along_axis(keys, smallest, axis=1), axis=1)
        return np.take_along_axis(smallest, order, axis=1)
    left = keys.copy()
    rows = np.arange(len(keys))
    found = np.empty((len(keys), count), dtype=np.intp)
    for position in range(count):
        found[:, position] = lowest = left.argmin(axis=1)
        left[rows, lowest] = np.inf
    return found
