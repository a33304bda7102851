"""The oracle's hypotheses, from the scenario's own parameters.

The scenario is built again with the shared load switched off (the builders draw the
same random numbers, so the changes land on the same runs): its per-run arrays are then
the model's deterministic part. The run just before a change and the first run after it,
with the load phase's daily cycle divided out, are the two *regimes*. Each regime is
drawn through the generator itself (bench/detection/model.py: run and sample factors,
tail, cold starts, outliers, failures, the deadline) with the shared load drawn from its
marginal (log-sd √(σ² + σ_day²)), and the run statistics of those draws give the
hypothesis: mean and covariance of the log medians, tail-bin probabilities.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from bench.detection.catalog import LONG, SCENARIOS
from bench.detection.labels import Labels, parse_time
from bench.detection.model import (
    MICROS,
    STATUS_DEADLINE,
    STATUS_OK,
    Floats,
    Ints,
    Profile,
    Series,
    draw,
    load_cycle,
)
from bench.detection.oracle.statistic import Gauss, Hypothesis, RunStats, run_stats, tail_edges
from bench.detection.scenario import Context, Params, after

DRAWN_RUNS = 8000  # per regime: 160 samples a regime in the p99.9 bin


@dataclass(frozen=True, slots=True)
class Regime:
    """A series' model at one run, the load phase at a daily cycle of 1."""

    profile: Profile
    medians: Floats
    run_sigma: Floats
    sample_sigma: Floats
    tail_p: float
    tail_rel: float  # the tail's scale ÷ the load phase's median
    cold_p: float
    cold_ms: float
    error_p: float


@dataclass(frozen=True, slots=True)
class Fitted:
    """One vantage's hypotheses: before and after, the tail-bin edges, the load's share,
    and the pre-change draws the calibration resamples."""

    pre: Hypothesis
    post: Hypothesis
    edges: Floats
    load: int  # the load phase's column
    load_var: float  # variance of the shared load's log, in the log medians
    null: RunStats  # the pre-change draws' statistics, the shared load taken out


def params_of(labels: Labels, **changes: Any) -> Params:
    raw = {**labels.params, **changes}
    raw["start"] = parse_time(raw["start"])
    raw["tie_gap"] = tuple(raw["tie_gap"])
    if "tail_drift" in raw:
        raw["tail_drift"] = tuple(raw["tail_drift"])
    return Params(**raw)


def structural(labels: Labels) -> dict[str, list[Series]]:
    """The scenario's series without the shared load, by target; checks the changes."""
    params = params_of(labels, load_sigma=0.0, day_sigma=0.0)
    builder, description = SCENARIOS[labels.scenario]
    days = float(getattr(params, LONG[labels.scenario])) if labels.scenario in LONG else params.days
    ctx = Context(labels.scenario, description, params, days)
    builder(ctx)
    rebuilt = {(e.id, e.start) for e in ctx.scenario.events}
    if not {(e.id, e.start) for e in labels.events if not e.slo} <= rebuilt:
        raise ValueError(f"{labels.scenario}: the rebuilt scenario's changes moved")
    found: dict[str, list[Series]] = {}
    for series in ctx.scenario.series:
        found.setdefault(series.target, []).append(series)
    return found


def cycle(series: Series, starts: Ints) -> Floats:
    p = series.profile
    return load_cycle(starts, p.daily_amplitude, p.peak_hour, p.weekend_factor)


def regime_at(series: Series, index: int) -> Regime:
    load = series.column(series.profile.load_phase)
    medians = series.medians[index].copy()
    medians[load] /= cycle(series, series.starts[index : index + 1])[0]
    return Regime(
        profile=series.profile,
        medians=medians,
        run_sigma=series.run_sigma[index].copy(),
        sample_sigma=series.sample_sigma[index].copy(),
        tail_p=float(series.tail_p[index]),
        tail_rel=float(series.tail_scale_ms[index] / series.medians[index, load]),
        cold_p=float(series.cold_p[index]),
        cold_ms=float(series.cold_ms[index]),
        error_p=float(series.error_p[index]),
    )


def regimes(series: Series, start: datetime) -> tuple[Regime, Regime]:
    """The regime of the last run before ``start`` and of the first run from it."""
    first = int(np.argmax(after(series, start)))
    return regime_at(series, max(0, first - 1)), regime_at(series, first)


def simulate(regime: Regime, params: Params, rng: np.random.Generator) -> tuple[Floats, Floats]:
    """``DRAWN_RUNS`` runs of the regime: runs × samples × phases (NaN where not timed),
    and the log of the shared load each run was drawn with."""
    runs, load = DRAWN_RUNS, regime.profile.phases.index(regime.profile.load_phase)
    medians = np.tile(regime.medians, (runs, 1))
    shared = math.sqrt(load_var(params)) * rng.standard_normal(runs)
    medians[:, load] *= np.exp(shared)

    def const(value: float) -> Floats:
        return np.full(runs, value)

    series = Series(
        "oracle",
        "oracle",
        regime.profile,
        np.arange(runs, dtype=np.int64) * int(params.interval_s * MICROS),
        medians,
        np.tile(regime.run_sigma, (runs, 1)),
        np.tile(regime.sample_sigma, (runs, 1)),
        const(regime.tail_p),
        regime.tail_rel * medians[:, load],
        const(regime.cold_p),
        const(regime.cold_ms),
        const(regime.error_p),
        const(1.0),
    )
    drawn = draw(series, params.samples, params.spacing_s, rng)
    timed = (drawn.status == STATUS_OK) | (drawn.status == STATUS_DEADLINE)
    values = np.where(timed[:, :, None], drawn.phases[:, :, 1:], np.nan)
    kept = timed.any(axis=1)
    return np.asarray(values[kept], dtype=np.float64), shared[kept]


def load_var(params: Params) -> float:
    return params.load_sigma**2 + params.day_sigma**2


def fit(pre: Regime, post: Regime, params: Params, rng: np.random.Generator) -> Fitted:
    """The two hypotheses of one vantage, from draws of each regime."""
    load = pre.profile.phases.index(pre.profile.load_phase)
    (before, shared), (later, _) = simulate(pre, params, rng), simulate(post, params, rng)
    ratio = before[:, :, load] / np.nanmedian(before[:, :, load], axis=1)[:, None]
    edges = tail_edges(ratio)
    stats = [run_stats(v, load, edges) for v in (before, later)]
    null = stats[0].logmed.copy()
    null[:, load] -= shared
    return Fitted(
        _hypothesis(stats[0]),
        _hypothesis(stats[1]),
        edges,
        load,
        load_var(params),
        RunStats(null, stats[0].counts),
    )


def _hypothesis(stats: RunStats) -> Hypothesis:
    cov = np.atleast_2d(np.cov(stats.logmed, rowvar=False))
    cov += np.eye(len(cov)) * 1e-6
    counts = stats.counts.sum(axis=0) + 0.5  # no empty bin: a log ratio stays finite
    return Hypothesis(Gauss(stats.logmed.mean(axis=0), cov), (counts / counts.sum(),))


def pooled(sides: list[Fitted]) -> tuple[Hypothesis, Hypothesis]:
    """Both vantages' hypotheses side by side; the shared load couples their load phases."""
    return _joint([s.pre for s in sides], sides), _joint([s.post for s in sides], sides)


def _joint(parts: list[Hypothesis], sides: list[Fitted]) -> Hypothesis:
    sizes = [len(p.gauss.mean) for p in parts]
    offsets = np.cumsum([0, *sizes])
    cov = np.zeros((offsets[-1], offsets[-1]))
    for part, low, high in zip(parts, offsets[:-1], offsets[1:], strict=True):
        cov[low:high, low:high] = part.gauss.cov
    loads = [int(low) + side.load for low, side in zip(offsets[:-1], sides, strict=True)]
    for i in loads:
        for j in loads:
            if i != j:
                cov[i, j] = sides[0].load_var
    mean = np.concatenate([p.gauss.mean for p in parts])
    return Hypothesis(Gauss(mean, cov), tuple(q for p in parts for q in p.probs))
