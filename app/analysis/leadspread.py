"""How much a challenger gains on the leader from one window of runs to the next when
nothing changed: the reference's run-to-run spread of the two phases' log ratio.

The bootstrap behind ``dominance.lead`` resamples the two or three runs of the window it
is given. It sees how much those runs disagree, not how much windows of runs do: when the
whole run moves together (a busy hour, a slow day, a run of shared load), two or three runs
of 10 samples agree with each other and still differ from the next three by several
points. Only a long stretch of runs shows that, and the reference is one.

The scale is the log of a phase's run median: a shared load multiplies a phase (the queue
× e^load), so on that scale it adds, and a run of busy hours is as far out as it is
likely, where on the share scale it is squeezed against 100 %. Each reference run's log
medians give, for any two phases, the per-run log ratio ``r = log a − log b``: its mean,
its variance and its lag-1 autocorrelation ρ come from the runs' log-median means,
covariance and lag-1 cross-covariance (about each phase's straight line over the runs:
a slow drift is not noise), kept for every pair at once. A window of ``k``
consecutive runs then has a log ratio whose spread is, for an AR(1) series,

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
# A phase median of 0 (a phase a run lacks) is read as this many ms on the log scale.
FLOOR_MS = 1e-3


@dataclass(frozen=True, slots=True)
class LogSpread:
    """The reference runs' mean log phase medians, their covariance (``lag0``) and lag-1
    cross-covariance (``lag1[i, j]`` = cov(log median_i at run t, log median_j at t+1))."""

    names: tuple[str, ...]
    means: Array
    lag0: Array
    lag1: Array
    runs: int

    def usual(self, challenger: str, leader: str) -> float | None:
        """``log challenger − log leader`` in a reference run, on average; None for a
        phase the reference never timed."""
        if challenger not in self.names or leader not in self.names:
            return None
        a, b = self.names.index(challenger), self.names.index(leader)
        return float(self.means[a] - self.means[b])

    def sd(self, challenger: str, leader: str, runs: int) -> float | None:
        """The spread of that log ratio in a window of ``runs`` consecutive runs."""
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


def _detrended(centred: Array) -> Array:
    """``centred`` less each column's straight line over the runs: a reference that
    rolls along a slow drift holds the drift, which is no run-to-run noise (counted as
    one, it makes every window look as far out as the drift, and the crossing unseen)."""
    steps = np.arange(len(centred), dtype=np.float64)
    steps -= steps.mean()
    slopes = steps @ centred / max(float(steps @ steps), 1.0)
    return np.asarray(centred - np.outer(steps, slopes), dtype=np.float64)


def log_ratio(medians: dict[str, float], challenger: str, leader: str) -> float:
    """``log challenger − log leader`` of a window's phase medians."""
    return float(
        np.log(max(medians.get(challenger, 0.0), FLOOR_MS))
        - np.log(max(medians.get(leader, 0.0), FLOOR_MS))
    )


def log_spread(runs: Sequence[RunData]) -> LogSpread | None:
    """The spread of ``runs`` (oldest first); None with fewer than ``MIN_RUNS`` timed."""
    names = common_phases(runs)
    timed = [run for run in runs if run.timed]
    if len(timed) < MIN_RUNS or not names:
        return None
    logs = np.log(np.maximum(np.array([run.medians(names) for run in timed]), FLOOR_MS))
    means = logs.mean(axis=0)
    centred = _detrended(logs - means)
    lag0 = centred.T @ centred / len(centred)
    lag1 = centred[:-1].T @ centred[1:] / len(centred)
    return LogSpread(names, means, lag0, lag1, len(timed))
