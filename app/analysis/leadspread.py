"""How much a challenger's lead over the leader moves from one window of runs to the next
when nothing changed: the reference's run-to-run spread of the share difference.

The bootstrap behind ``dominance.lead`` resamples the two or three runs of the window it
is given. It sees how much those runs disagree, not how much windows of runs do: when the
whole run moves together (a busy hour, a slow day, a run of shared load), two or three runs
of 10 samples agree with each other and still differ from the next three by several
points. Only a long stretch of runs shows that, and the reference is one.

Each reference run's phase shares (its phase medians over their sum) give, for any two
phases, the per-run lead ``d = share(a) − share(b)``: its variance and its lag-1
autocorrelation ρ come from the runs' share covariance and lag-1 cross-covariance, kept
for every pair at once. A window of ``k`` consecutive runs then leads by a mean whose
spread is, for an AR(1) series,

    sd_k = sd · √(k + 2 Σ_{h=1}^{k−1} (k − h) ρ^h) / k

(ρ taken as at least 0: runs that alternate are not counted on to cancel).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.analysis.runs import Array, RunData, common_phases

# Fewer runs than this and the spread is not known: nothing is said (None).
MIN_RUNS = 8
# ρ above this is a trend, not a noise to average over; capped so sd_k stays finite in use.
MAX_RHO = 0.95


@dataclass(frozen=True, slots=True)
class ShareSpread:
    """The reference runs' phase-share covariance (``lag0``) and lag-1 cross-covariance
    (``lag1[i, j]`` = cov(share_i at run t, share_j at run t+1))."""

    names: tuple[str, ...]
    lag0: Array
    lag1: Array
    runs: int

    def lead_sd(self, challenger: str, leader: str, runs: int) -> float | None:
        """The spread of ``challenger``'s lead over ``leader`` in a window of ``runs``
        consecutive runs; None for a phase the reference never timed."""
        if challenger not in self.names or leader not in self.names or runs < 1:
            return None
        a, b = self.names.index(challenger), self.names.index(leader)
        variance = self.lag0[a, a] + self.lag0[b, b] - 2 * self.lag0[a, b]
        if variance <= 0:
            return 0.0
        lagged = self.lag1[a, a] + self.lag1[b, b] - self.lag1[a, b] - self.lag1[b, a]
        rho = min(max(float(lagged / variance), 0.0), MAX_RHO)
        return float(np.sqrt(variance * window_factor(rho, runs)))


def window_factor(rho: float, runs: int) -> float:
    """Var(mean of ``runs`` consecutive values) / Var(one value), for an AR(1) series."""
    pairs = sum((runs - h) * rho**h for h in range(1, runs))
    return (runs + 2 * pairs) / runs**2


def share_spread(runs: Sequence[RunData]) -> ShareSpread | None:
    """The spread of ``runs`` (oldest first); None with fewer than ``MIN_RUNS`` timed."""
    names = common_phases(runs)
    timed = [run for run in runs if run.timed]
    if len(timed) < MIN_RUNS or not names:
        return None
    medians = np.array([run.medians(names) for run in timed])
    totals = medians.sum(axis=1, keepdims=True)
    totals[totals <= 0] = np.inf
    shares = medians / totals
    centred = shares - shares.mean(axis=0)
    lag0 = centred.T @ centred / len(centred)
    lag1 = centred[:-1].T @ centred[1:] / len(centred)
    return ShareSpread(names, lag0, lag1, len(timed))
