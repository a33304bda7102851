"""``tail_shift`` — the tail got heavier than the reference (a CUSUM, gated by magnitude).

The statistics are in app/analysis/tail.py and tailgate.py; here is when they make an alert.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from app.analysis.detectors.base import Detector, Finding, Inputs, Named, Signal, ci
from app.analysis.runs import RunData
from app.analysis.tail import TailReference, TailState, cusum_step
from app.analysis.tailgate import magnitude_gate

if TYPE_CHECKING:
    from app.analysis.detectors.params import DetectorParams


# The gate reads the runs since the CUSUM left 0, up to this many recent windows (longer
# stretches were tried: normal slow spells keep the CUSUM above 0 as long).
ONSET_WINDOWS = 4


def judge(inputs: Inputs) -> list[Finding]:
    reference, params = inputs.reference, inputs.params
    if reference is None or reference.tail is None or len(inputs.window) < params.recent_runs:
        return []
    if reference.span < timedelta(days=params.tail_min_days):
        return []  # a day-to-day difference is known only once that many days were seen
    since = min(max(inputs.tail.runs, params.recent_runs), ONSET_WINDOWS * params.recent_runs)
    onset = inputs.onset(since)
    return [tail_finding(inputs.tail.scores, onset, reference.tail, params, inputs.rng)]


def advance_tail(
    state: TailState, run: RunData, reference: TailReference, params: DetectorParams
) -> None:
    """The CUSUM after a new run (before the detectors judge it)."""
    state.scores = next_tail_scores(state.scores, run, reference, params)
    state.runs = state.runs + 1 if max(state.scores) > 0 else 0


def tail_finding(
    scores: tuple[float, ...],
    recent: Sequence[RunData],
    reference: TailReference,
    params: DetectorParams,
    rng: np.random.Generator,
) -> Finding:
    """Hit when the CUSUM is past its threshold and the shift is large enough to matter.
    ``recent``: the runs since the CUSUM left 0 (at least the recent window)."""
    score = max(scores)
    numbers: dict[str, Any] = {
        "cusum": round(score, 2),
        "cusum_by_level": {
            level.name: round(value, 2)
            for level, value in zip(reference.levels, scores, strict=True)
        },
        "threshold": params.tail_threshold,
        "reference_p95_excess": round(reference.threshold, 3),
    }
    if score < params.tail_threshold / 2:
        return Finding(Signal.CLEAR, numbers)
    gate = magnitude_gate(
        recent,
        reference,
        rng,
        min_relative=params.tail_min_relative,
        min_ms=params.tail_min_ms,
        min_days=params.tail_min_days,
        resamples=params.resamples,
    )
    if gate is None:
        return Finding(Signal.HOLD, numbers)
    numbers |= {
        "quantile": gate.quantile,
        "reference_excess": round(gate.reference_excess, 3),
        "recent_excess": round(gate.recent_excess, 3),
        "excess_ratio_low": round(gate.ratio_low, 3),
        "median_ms": round(gate.body_ms, 1),
        "reference_ms": round(gate.reference_ms, 1),
        "recent_ms": round(gate.recent_ms, 1),
        "delta_ms": round(gate.delta_ms, 1),
        "delta_low_ms": round(gate.low_ms, 1),
        "delta_high_ms": round(gate.high_ms, 1),
        "needed_ms": round(gate.needed_ms, 1),
        "runs": len(recent),
    }
    if score >= params.tail_threshold and gate.passed:
        return Finding(Signal.HIT, numbers)
    # The CUSUM still high: a window whose size check wobbles is no recovery.
    return Finding(Signal.HOLD, numbers)


def next_tail_scores(
    scores: tuple[float, ...], run: RunData, reference: TailReference, params: DetectorParams
) -> tuple[float, ...]:
    # Capped: a long episode must not take days of normal runs to wind down.
    return tuple(
        min(cusum_step(score, run, level, params.tail_ratio), 3 * params.tail_threshold)
        for score, level in zip(scores, reference.levels, strict=True)
    )


def sentence(identity: Named, n: dict[str, Any]) -> str:
    interval = ci(n["delta_low_ms"], n["delta_high_ms"], " ms")
    if "reference_excess" not in n:  # an alert stored before the tail was read as a shape
        return (
            f"tail got heavier on {identity.target}: {n['quantile']} {n['reference_ms']:g} ms"
            f" → {n['recent_ms']:g} ms (+{n['delta_ms']:g} ms{interval})"
        )
    return (
        f"tail got heavier on {identity.target}: {n['quantile']} {n['reference_excess']:g}× →"
        f" {n['recent_excess']:g}× the run's median (+{n['delta_ms']:g} ms at"
        f" {n['median_ms']:g} ms{interval}; {n['quantile']} {n['reference_ms']:g} →"
        f" {n['recent_ms']:g} ms)"
    )


def current(identity: Named, n: dict[str, Any]) -> str:
    """The tail now: its excess where the gate judged it, else how far the CUSUM is."""
    if "recent_excess" in n:
        return f"{n['quantile']} {n['recent_excess']:g}× the run's median ({n['recent_ms']:g} ms)"
    return f"CUSUM {n['cusum']:g} of {n['threshold']:g}"


DETECTOR = Detector(
    name="tail_shift",
    summary="the tail got heavier: more samples far above their run's median, by enough to matter",
    sentence=sentence,
    judge=judge,
    on_resolve=TailState.reset,
    current=current,
)
