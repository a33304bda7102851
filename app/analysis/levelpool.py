"""The vantages' level evidence pooled, for a phase every vantage sees (the server's, and
the body's transfer): the statistic behind ``level_shift``'s service lane.

Each vantage's runs add their ``level_shift`` increments (app.analysis.level: the Gaussian
log-likelihood ratio of a slowdown of twice the least worth an alert, against the same
hours of that vantage's reference) to one CUSUM per phase. Summed as they come, V vantages'
increments are the likelihood ratio of their mean residual only where their noise is
independent; the noise they share (the server's load at that moment, its busy days) would
be counted V times. So each increment is divided by 1 + (V − 1) ρ, ρ the share of the
noise two vantages' residuals have in common, measured on their references' runs that
met in time (runs, and means of ``BLOCK`` runs: a shared load that is busy for hours is
shared noise too; the larger is taken). Independent noise (ρ = 0): the V vantages' evidence
adds up; all of it shared (ρ = 1): no more than one vantage's — and then the phase is not
pooled at all (``MIN_GAIN``): a stream that copies the vantages' own would only spend
their false-alarm budget (a queue under the server's load is such a phase).

A path's change (network at one vantage) is no such phase: it stays each vantage's, and a
pooled crossing is the service's only where the phase grew at every vantage
(``grew_everywhere``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from app.analysis.level import LevelReference
from app.analysis.runs import Array

Indices = NDArray[np.int64]

# The phases pooled, in the order the pooled CUSUM keeps them: those the server spends,
# and the transfer of its answer (its size, its streaming). Network and connect are a path's.
POOLED = ("queue", "prefill", "generation", "server", "transfer")
# Consecutive met runs averaged for the long-run share (2 h at 15 min).
BLOCK = 8
MIN_BLOCKS = 6
# Fewer met runs than this: the share is not known, taken as whole (no gain from pooling).
MIN_MET = 48
WINSOR = 4.0  # a residual counts at most this many spreads in the correlation
# A phase is pooled only where its vantages count for this many independent ones or more.
MIN_GAIN = 1.5


def met(a: Array, b: Array, tolerance: float) -> tuple[Indices, Indices]:
    """Indices into ``a`` and ``b`` (epoch seconds, ascending) of the runs that met: each
    run of ``a`` with the nearest of ``b``, no more than ``tolerance`` s apart."""
    if len(a) == 0 or len(b) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    right = np.minimum(np.searchsorted(b, a), len(b) - 1)
    left = np.maximum(right - 1, 0)
    nearest = np.where(np.abs(b[left] - a) <= np.abs(b[right] - a), left, right)
    close = np.abs(b[nearest] - a) <= tolerance
    return np.flatnonzero(close).astype(np.int64), nearest[close].astype(np.int64)


def correlation(x: Array, y: Array) -> float:
    """Pearson's, each side winsorised at ``WINSOR`` robust spreads (one wild run must not
    make two vantages look alike, nor unlike); NaN pairs left out; 0 without spread."""
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    if len(x) < 3:
        return math.nan
    x, y = _winsor(x), _winsor(y)
    sx, sy = float(np.std(x)), float(np.std(y))
    if sx == 0 or sy == 0:
        return 0.0
    return float(np.mean((x - x.mean()) * (y - y.mean())) / (sx * sy))


def _winsor(values: Array) -> Array:
    centre = float(np.median(values))
    spread = 1.4826 * float(np.median(np.abs(values - centre))) or 1e-12
    clipped: Array = np.clip(values, centre - WINSOR * spread, centre + WINSOR * spread)
    return clipped


def shared(a: LevelReference, b: LevelReference, series: str, tolerance: float) -> float:
    """The share of ``series``' noise two vantages have in common, in [0, 1]: the larger of
    the correlation of their met runs' residuals and of means of ``BLOCK`` met runs. 1 where
    it cannot be told (a vantage without the series, too few met runs)."""
    if series not in a.series or series not in b.series:
        return 1.0
    i, j = met(a.times, b.times, tolerance)
    if len(i) < MIN_MET:
        return 1.0
    x = a.past[i, a.series.index(series)]
    y = b.past[j, b.series.index(series)]
    found = [correlation(x, y)]
    blocks = len(x) // BLOCK
    if blocks >= MIN_BLOCKS:
        size = blocks * BLOCK
        means = [np.nanmean(v[:size].reshape(blocks, BLOCK), axis=1) for v in (x, y)]
        found.append(correlation(*means))
    if any(math.isnan(r) for r in found):
        return 1.0
    return float(np.clip(max(found), 0.0, 1.0))


def weights(levels: Sequence[LevelReference]) -> Array:
    """Per phase of ``POOLED``: what one vantage's increment counts for in the pooled CUSUM,
    1 / (1 + (V − 1) ρ), ρ the largest share any two vantages have; 0 (not pooled) for a
    phase some vantage does not see, or where the V vantages count for fewer than
    ``MIN_GAIN`` (V / (1 + (V − 1) ρ)). Runs meet within half the first vantage's usual
    spacing."""
    found = np.zeros(len(POOLED))
    if len(levels) < 2 or len(levels[0].times) < 2:
        return found
    tolerance = float(np.median(np.diff(levels[0].times))) / 2
    for k, series in enumerate(POOLED):
        if any(series not in level.series for level in levels):
            continue
        rho = max(
            shared(levels[p], levels[q], series, tolerance)
            for p in range(len(levels))
            for q in range(p + 1, len(levels))
        )
        weight = 1.0 / (1.0 + (len(levels) - 1) * rho)
        # Where the vantages share most of their noise the pool is one vantage again: a
        # stream that adds nothing but its own false alarms to the budget.
        found[k] = weight if len(levels) * weight >= MIN_GAIN else 0.0
    return found


def pooled_steps(level: LevelReference, steps: Array, weight: Array) -> Array:
    """One vantage's increments (its reference's series) as the pooled CUSUM's row: each
    ``POOLED`` phase's, times its weight (0 where the vantage has no such phase)."""
    row = np.zeros(len(POOLED))
    for k, series in enumerate(POOLED):
        if series in level.series and weight[k] > 0:
            row[k] = weight[k] * steps[level.series.index(series)]
    return row


def grew_everywhere(means: Sequence[float], allowances: Sequence[float]) -> bool:
    """Each vantage's mean residual over its newest runs (log terms) is at least its least
    slowdown worth an alert: the change is the server's, seen from each, not one path's."""
    pairs = list(zip(means, allowances, strict=True))
    return bool(pairs) and all(m >= a for m, a in pairs)
