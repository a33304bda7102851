"""Deadline misses: the censored share of timed samples, against the target's SLO.

An exact (Clopper-Pearson) interval and an exact one-sided binomial test, both scipy's.
scipy is imported on the first rate above the SLO: importing it costs more than a backtest
without misses spends on everything else but its detectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.analysis.runs import RunData


@dataclass(frozen=True, slots=True)
class MissRate:
    misses: int
    n: int
    rate: float
    low: float
    high: float
    p_value: float  # of "the rate is at most the SLO"

    def above(self, alpha: float) -> bool:
        return self.p_value < alpha


def miss_rate(runs: Sequence[RunData], slo: float) -> MissRate | None:
    n = sum(run.timed for run in runs)
    if n == 0:
        return None
    misses = sum(run.censored for run in runs)
    if misses <= slo * n:
        # At or under the SLO: no test can call that "above"; skip scipy's cost.
        return MissRate(misses, n, misses / n, 0.0, 1.0, 1.0)
    from scipy.stats import binomtest

    test = binomtest(misses, n, slo, alternative="greater")
    interval = test.proportion_ci(confidence_level=0.95, method="exact")
    return MissRate(
        misses, n, misses / n, float(interval.low), float(interval.high), float(test.pvalue)
    )
