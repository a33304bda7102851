"""Whether a phase's growth is a step at the newest runs: the guards of the pooled lane's
newest-run lead (app.alerts.pooling).

A server-side phase may lead a vantage's newest run and not the run before (a queue grown
4.5× past a network it leads by a few points, not in its lulls). Its pooled growth over the
newest runs (``app.analysis.level.pooled_z``) says it is higher than these hours' normal;
two more things say the server changed rather than its load wandered:

- **steady**: every newest run grew, at every vantage (a wild run beside an ordinary one
  reads ~1 spread here, however wild);
- **a step**: the newest runs stand above the runs just before them, in units of how far
  that difference strays under the reference's own noise. A load busy for hours climbs to
  its height over many runs, and its runs next to each other share it: their mean is as
  high as a change's (its long memory is what an AR(1) with the residuals' lag-1 misses,
  so the mean's z of correlated runs reads too high), but against the runs before them
  they barely moved — there the shared load cancels, and the same AR(1) overstates the
  difference's spread rather than understating it.

The runs before are one block of ``BLOCKS[0]`` runs (app.analysis.levelspread: 2 hours at
15 minutes), the newest ``n`` after them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from app.analysis.level import MIN_TIMED, LevelReference
from app.analysis.levelspread import BLOCKS
from app.analysis.runs import Array, RunData

BEFORE = BLOCKS[0]  # the runs a step is measured from


def ar1_spread(weights: Sequence[float], rho: float) -> float:
    """The spread of Σ wᵢ xᵢ over consecutive values of an AR(1) series of lag-1
    autocorrelation ``rho``, in units of one value's spread: √(wᵀ R w), Rᵢⱼ = ρ^|i−j|."""
    w = np.asarray(weights, dtype=np.float64)
    lags = np.abs(np.subtract.outer(np.arange(len(w)), np.arange(len(w))))
    variance = float(w @ (rho**lags) @ w)
    return math.sqrt(max(variance, 0.0))


def _residuals(reference: LevelReference, window: Sequence[RunData], series: str) -> Array | None:
    """The window's residuals of ``series``; None where the reference lacks the series or a
    run has too few timed samples (no level to speak of)."""
    if series not in reference.series or not window:
        return None
    if any(run.timed < MIN_TIMED for run in window):
        return None
    column = reference.series.index(series)
    return np.array([reference.residuals(run)[column] for run in window], dtype=np.float64)


def steady_z(
    references: Sequence[LevelReference], windows: Sequence[Sequence[RunData]], series: str
) -> float | None:
    """Vantages' evidence that ``series`` grew in every run of their windows: each
    vantage's least residual in units of its window mean's spread (as ``pooled_z``), then
    averaged over vantages (a load they share counts once). Never above ``pooled_z``'s z: a
    wild run beside ordinary ones counts as the ordinary ones. None where a vantage cannot
    say."""
    zs = []
    for reference, window in zip(references, windows, strict=True):
        values = _residuals(reference, window, series)
        if values is None:
            return None
        column = reference.series.index(series)
        mean = [1 / len(values)] * len(values)
        spread = float(reference.sigma[column]) * ar1_spread(mean, float(reference.rho[column]))
        zs.append(float(values.min()) / spread)
    return float(np.mean(zs)) if zs else None


def step_z(
    references: Sequence[LevelReference],
    windows: Sequence[Sequence[RunData]],
    series: str,
    newest: int,
) -> float | None:
    """Vantages' evidence that ``series`` stepped up at the newest ``newest`` runs of their
    windows: each vantage's mean residual over those minus that over the ``BEFORE`` runs
    before them, in units of that difference's spread (the residuals' spread, their lag-1
    autocorrelation counted), then averaged over vantages. None where a vantage has fewer
    runs than that, or cannot say."""
    zs = []
    weights = [-1 / BEFORE] * BEFORE + [1 / newest] * newest
    for reference, window in zip(references, windows, strict=True):
        if len(window) < len(weights):
            return None
        values = _residuals(reference, window[-len(weights) :], series)
        if values is None:
            return None
        column = reference.series.index(series)
        rho = float(reference.rho[column])
        spread = float(reference.sigma[column]) * ar1_spread(weights, rho)
        zs.append(float(np.dot(weights, values)) / spread)
    return float(np.mean(zs)) if zs else None
