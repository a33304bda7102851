"""How far a window's lead has moved against the same hours of the reference: the
hour-matched scale of ``dominant_shift``'s spread gate.

``leadspread.LogSpread`` measures a window's log ratio ``challenger / leader`` against the
reference's mean over every hour, in units of its spread over every hour. Where the queue
leads the network in the busy hours only, that spread holds the busy hours' swing: a
quiet-hour window the queue now leads by × 4 reads 2.5–4.7 of it and waits for a spread
that never comes (bench/detection/README.md, "fleetq2"). Here the usual ratio is that of
the window's own hours (the level reference's expected log medians at each run's slot),
and the unit the spread of the two phases' residuals about their hours' levels, widened
for their lag-1 autocorrelation over the window's runs as ``LogSpread`` does. The residuals
are held out (each day's runs against the other days' levels, as ``level_shift``'s unit):
against levels their own runs make, a reference of two or three days absorbs most of a
correlated load at each hour, and its spread reads half what a new day's run strays
(bench/detection/README.md, "fleetq3": a correlated-runs target fired on it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.analysis.leadspread import MAX_RHO, MIN_RUNS, log_ratio, window_factor
from app.analysis.level import LevelReference, slot
from app.analysis.runs import RunData

TINY = 1e-12  # a variance this small is phases that never moved apart: no unit


@dataclass(frozen=True, slots=True)
class HourSpread:
    """The level reference's residuals, read as a log ratio's spread about its hours."""

    level: LevelReference

    def moved(
        self, medians: dict[str, float], recent: Sequence[RunData], challenger: str, leader: str
    ) -> float | None:
        """How many hour-matched spreads of a window of ``recent``'s length the window's
        log ratio (of ``medians``) lies above the usual one at its runs' hours; None for a
        phase the reference lacks, too few runs, or a spread of 0."""
        pair = self._columns(challenger, leader)
        if pair is None or not recent:
            return None
        held = self.level.held
        diff = held[:, pair[0]] - held[:, pair[1]]
        diff = diff[~np.isnan(diff)]
        sd = ratio_sd(diff, len(recent))
        if sd is None:
            return None
        hours = self.level.expected[[slot(run) for run in recent]]
        usual = float(np.mean(hours[:, pair[0]] - hours[:, pair[1]]) + diff.mean())
        return (log_ratio(medians, challenger, leader) - usual) / sd

    def _columns(self, challenger: str, leader: str) -> tuple[int, int] | None:
        series = self.level.series
        if challenger not in self.level.names or leader not in self.level.names:
            return None
        return series.index(challenger), series.index(leader)


def ratio_sd(diff: np.ndarray, runs: int) -> float | None:
    """The spread of the mean of ``runs`` consecutive values of the series ``diff`` (an
    AR(1), ρ in [0, ``MAX_RHO``]); None with fewer than ``MIN_RUNS`` values or none spread."""
    if len(diff) < MIN_RUNS:
        return None
    centred = diff - diff.mean()
    variance = float(centred @ centred) / len(centred)
    if variance <= TINY:
        return None
    rho = min(max(float(centred[:-1] @ centred[1:]) / len(centred) / variance, 0.0), MAX_RHO)
    return float(np.sqrt(variance * window_factor(rho, runs)))
