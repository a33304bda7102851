"""Which phase holds the most time, and whether a challenger's lead is more than noise.

A phase's share is its median over the sum of all phase medians (the shares of one
window add up to 1); the dominant phase has the largest share.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.analysis.quantiles import DEFAULT_RESAMPLES, Estimate, interval, resample_indices
from app.analysis.runs import (
    Array,
    RunData,
    column_medians,
    common_phases,
    median_along,
    stacked_phases,
)
from app.analysis.summary import dominant_phase, shares


@dataclass(frozen=True, slots=True)
class Mix:
    """The phase mix of a window of runs."""

    medians: dict[str, float]
    shares: dict[str, float]
    dominant: str | None
    n: int
    runs: int

    def ranked(self) -> list[str]:
        return sorted(self.shares, key=lambda name: -self.shares[name])


def phase_mix(runs: Sequence[RunData], *, keep: bool = True) -> Mix:
    """The window's mix; kept with its newest run, as several detectors ask for the same
    window (a Mix is shared, so never changed). ``keep=False``: a window asked for once
    (a reference's), not kept; nor is one run's."""
    if len(runs) < 2 or not keep:
        # One run's mix is not kept: from its kept medians it is cheap, and kept with every
        # run it outweighed the run's own numbers (a backtest keeps a week of runs).
        return _mix(runs)
    ids = tuple(id(run) for run in runs)  # with the run ids: these very runs
    key = ("mix", *(run.run_id for run in runs))
    kept, mix = runs[-1].window_memo(key, _kept_mix, ids, runs)
    return mix if kept == ids else _mix(runs)


def leader_of(run: RunData) -> str | None:
    """``phase_mix([run]).dominant``, the same phase, without building the mix: the pooled
    lane asks it of a series' newest runs after every run (the same sum, shares and first
    largest share as ``shares`` and ``dominant_phase``)."""
    if not run.timed:
        return None
    names = common_phases([run])
    found = run.medians(names).tolist()
    whole = sum(found)
    if whole <= 0:
        return None
    ratios = [median / whole for median in found]
    best = 0
    for index in range(1, len(ratios)):
        if ratios[index] > ratios[best]:  # max()'s own comparison: the first largest stays
            best = index
    return names[best] if ratios and not ratios[best] <= 0 else None


def _kept_mix(ids: tuple[int, ...], runs: Sequence[RunData]) -> tuple[tuple[int, ...], Mix]:
    return ids, _mix(runs)


def _mix(runs: Sequence[RunData]) -> Mix:
    names = common_phases(runs)
    if len(runs) == 1:
        n = runs[0].timed
        found = runs[0].medians(names) if n else None
    else:
        values, _ = stacked_phases(runs, names)
        n = len(values)
        found = column_medians(values) if n else None
    if found is None:
        return Mix({}, {}, None, 0, len(runs))
    medians: dict[str, float] = dict(zip(names, found.tolist(), strict=True))
    phase_shares = shares(medians)
    return Mix(medians, phase_shares, dominant_phase(phase_shares), n, len(runs))


def lead(
    runs: Sequence[RunData],
    challenger: str,
    leader: str,
    rng: np.random.Generator,
    resamples: int = DEFAULT_RESAMPLES,
) -> Estimate:
    """share(challenger) − share(leader), with a hierarchical-bootstrap 95 % interval."""
    names = common_phases(runs)
    values, sizes = stacked_phases(runs, names)
    if len(values) == 0 or challenger not in names or leader not in names:
        return Estimate(None, None, None, len(values))
    first, second = names.index(challenger), names.index(leader)

    def share_lead(medians: Array) -> Array:  # (replicates × phases)
        whole = medians.sum(axis=1)
        whole[whole <= 0] = np.inf
        return np.asarray((medians[:, first] - medians[:, second]) / whole, dtype=np.float64)

    point = share_lead(median_along(values[None, :, :], 1))[0]
    # Phase by phase, each replicate's draws contiguous: numpy sorts those twice as fast
    # as along the middle axis of (replicates × draws × phases), to the same medians.
    by_phase = np.ascontiguousarray(values.T)
    draws = by_phase[:, resample_indices(sizes, resamples, rng)]  # (phases × replicates × draws)
    low, high = interval(share_lead(np.ascontiguousarray(median_along(draws, 2).T)))
    return Estimate(float(point), low, high, len(values))
