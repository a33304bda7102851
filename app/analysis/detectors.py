"""The detectors: from windows of runs to a signal (hit, hold, clear) and the numbers behind it.

Pure: runs, reference, parameters and a random generator in; no clock, no database.
Every threshold is a field of ``DetectorParams`` and can be set per target
(``alerts:`` in the targets file); docs/detection.md says why each default is what it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from app.alerts.state import Signal
from app.analysis.composition import clr_rows, clr_shift, first_of_permutations
from app.analysis.dominance import Mix, lead, phase_mix
from app.analysis.misses import miss_rate
from app.analysis.runs import Array, RunData, common_phases
from app.analysis.tail import TailReference, cusum_step, magnitude_gate

# Phases the server spends: a change there should be seen from every vantage.
SERVER_SIDE = frozenset({"queue", "prefill", "generation", "server"})


class DetectorParams(BaseModel):
    """Per-target detector settings (``alerts:`` in the targets file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    recent_runs: int = Field(4, ge=2, le=100)
    reference_days: float = Field(7.0, gt=0)
    min_reference_runs: int = Field(24, ge=4)
    # A reference must have seen a whole day: busy hours are only "normal" once seen.
    min_reference_days: float = Field(1.0, ge=0)
    confirm: int = Field(2, ge=1, le=20)
    recover: int = Field(2, ge=1, le=50)
    dominant_lead_pp: float = Field(5.0, gt=0, lt=100)
    # The newest runs of the recent window that judge a leader change: with all four, one
    # pre-change run keeps the lead's lower bound at 0 for a run longer.
    dominant_runs: int = Field(3, ge=2, le=100)
    tail_ratio: float = Field(2.0, gt=1)  # the CUSUM's alternative: tail mass doubled
    tail_threshold: float = Field(8.0, gt=0)
    tail_min_relative: float = Field(0.05, ge=0)
    tail_min_ms: float = Field(10.0, ge=0)
    deadline_slo: float = Field(0.01, gt=0, lt=1)
    deadline_alpha: float = Field(0.001, gt=0, lt=0.5)
    composition_min_distance: float = Field(0.5, gt=0)
    composition_alpha: float = Field(0.01, gt=0, lt=1)
    composition_confirm: int = Field(4, ge=1, le=50)
    failing_runs: int = Field(3, ge=1)
    resamples: int = Field(400, ge=50, le=10_000)
    enabled: tuple[str, ...] = (
        "dominant_shift",
        "tail_shift",
        "deadline_miss",
        "composition_shift",
        "probe_failing",
    )


@dataclass(frozen=True, slots=True)
class Finding:
    signal: Signal
    numbers: dict[str, Any] = field(default_factory=dict)


# dominant_shift ----------------------------------------------------------------------


def challenger(mix: Mix, leader: str, params: DetectorParams) -> str | None:
    """The phase that now leads ``leader`` by at least δ in the point estimate, if any."""
    if leader not in mix.shares:
        return None
    others = [name for name in mix.shares if name != leader]
    best = max(others, key=lambda name: mix.shares[name], default=None)
    if best is None or mix.shares[best] - mix.shares[leader] < params.dominant_lead_pp / 100:
        return None
    return best


def dominant_finding(
    recent: Sequence[RunData],
    leader: str,
    candidate: str,
    params: DetectorParams,
    rng: np.random.Generator,
) -> Finding:
    """Does ``candidate`` lead ``leader`` by δ, with the lead's lower 95 % bound above 0?"""
    mix = phase_mix(recent)
    numbers = _mix_numbers(mix, leader, candidate)
    point = mix.shares.get(candidate, 0.0) - mix.shares.get(leader, 0.0)
    if point < params.dominant_lead_pp / 100:
        return Finding(Signal.HOLD, numbers)
    estimate = lead(recent, candidate, leader, rng, params.resamples)
    numbers |= {"lead_low_pp": _pp(estimate.low), "lead_high_pp": _pp(estimate.high)}
    confident = estimate.low is not None and estimate.low > 0
    return Finding(Signal.HIT if confident else Signal.HOLD, numbers)


def dominant_resolution(
    recent: Sequence[RunData],
    old: str,
    new: str | None,
    reference_leader: str | None,
    params: DetectorParams,
    rng: np.random.Generator,
) -> Finding:
    """For a firing shift old→new: clear when old leads again by δ with confidence
    (hysteresis), or once the reference itself has the new leader (the change became the
    normal); hit while new still leads by δ; hold in between. Only a reversal needs the
    bootstrap: staying put is the point estimate's call."""
    mix = phase_mix(recent)
    if new is None:  # a service shift whose new leader differs by vantage: this one's
        new = next((name for name in mix.ranked() if name != old), old)
    numbers = _mix_numbers(mix, old, new)
    if reference_leader not in (old, None):
        return Finding(Signal.CLEAR, numbers)  # the reference has moved on: the new normal
    if challenger(mix, new, params) == old:
        back = dominant_finding(recent, new, old, params, rng)
        if back.signal is Signal.HIT:
            # Numbers as the alert reads them (old → new): the lead of new is negative.
            low, high = back.numbers["lead_low_pp"], back.numbers["lead_high_pp"]
            return Finding(Signal.CLEAR, numbers | {"lead_low_pp": -high, "lead_high_pp": -low})
    lead_pp = numbers["lead_pp"]
    return Finding(Signal.HIT if lead_pp >= params.dominant_lead_pp else Signal.HOLD, numbers)


def _mix_numbers(mix: Mix, leader: str, candidate: str) -> dict[str, Any]:
    return {
        "from_phase": leader,
        "to_phase": candidate,
        "from_share_pct": round(100 * mix.shares.get(leader, 0.0), 1),
        "to_share_pct": round(100 * mix.shares.get(candidate, 0.0), 1),
        "lead_pp": round(100 * (mix.shares.get(candidate, 0.0) - mix.shares.get(leader, 0.0)), 1),
        "shares_pct": {name: round(100 * share, 1) for name, share in mix.shares.items()},
        "samples": mix.n,
        "runs": mix.runs,
    }


def _pp(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 1)


# tail_shift --------------------------------------------------------------------------


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
        "reference_p95_ms": round(reference.threshold_ms, 1),
    }
    if score < params.tail_threshold / 2:
        return Finding(Signal.CLEAR, numbers)
    gate = magnitude_gate(
        recent,
        reference,
        rng,
        min_relative=params.tail_min_relative,
        min_ms=params.tail_min_ms,
        resamples=params.resamples,
    )
    if gate is None:
        return Finding(Signal.HOLD, numbers)
    numbers |= {
        "quantile": gate.quantile,
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


# deadline_miss -----------------------------------------------------------------------


def deadline_finding(recent: Sequence[RunData], params: DetectorParams) -> Finding:
    rate = miss_rate(recent, params.deadline_slo)
    if rate is None:
        return Finding(Signal.HOLD)
    numbers = {
        "misses": rate.misses,
        "samples": rate.n,
        "rate_pct": round(100 * rate.rate, 2),
        "rate_low_pct": round(100 * rate.low, 2),
        "rate_high_pct": round(100 * rate.high, 2),
        "slo_pct": round(100 * params.deadline_slo, 2),
        "p_value": rate.p_value,
    }
    # Runs are the unit: one run that missed wholesale (a cold start, a blip) is not a rate.
    missing_runs = sum(
        run.timed > 0 and run.censored / run.timed > params.deadline_slo for run in recent
    )
    numbers["runs_over_slo"] = missing_runs
    if rate.above(params.deadline_alpha) and missing_runs >= 2:
        return Finding(Signal.HIT, numbers)
    return Finding(Signal.CLEAR if rate.rate <= params.deadline_slo else Signal.HOLD, numbers)


# composition_shift -------------------------------------------------------------------


def composition_finding(
    recent: Sequence[RunData],
    reference: CompositionReference,
    params: DetectorParams,
    rng: np.random.Generator,
) -> Finding:
    """The mix moved (Aitchison distance, permutation over runs) while the leader did not."""
    mix = phase_mix(recent)
    leaders = {phase_mix([run]).dominant for run in recent}
    if mix.dominant is None or leaders != {reference.leader}:
        # A leader change, even in one run of the window, is dominant_shift's business.
        return Finding(Signal.CLEAR)
    rows = reference.rows_near({run.at.hour for run in recent})
    shift = clr_shift(clr_rows(recent, reference.names), rows, reference.names, rng)
    if shift is None:
        return Finding(Signal.HOLD)
    numbers = {
        "distance": round(shift.distance, 3),
        "p_value": shift.p_value,
        "moved_most": shift.moved_most,
        "shares_pct": {name: round(100 * share, 1) for name, share in mix.shares.items()},
        "reference_shares_pct": reference.shares_pct,
    }
    needed = max(params.composition_min_distance, reference.noise_floor)
    numbers["needed_distance"] = round(needed, 3)
    if shift.distance >= needed and shift.p_value < params.composition_alpha:
        return Finding(Signal.HIT, numbers)
    if shift.distance < params.composition_min_distance / 2 or shift.p_value > 0.2:
        return Finding(Signal.CLEAR, numbers)
    return Finding(Signal.HOLD, numbers)


@dataclass(frozen=True, slots=True)
class CompositionReference:
    """The reference's runs as clr rows, by hour of day (compared at the same hours)."""

    names: tuple[str, ...]
    rows: Array
    hours: NDArray[np.int64]
    leader: str | None
    shares_pct: dict[str, float]
    # How far the centre of a few of the reference's own runs strays from the whole: a
    # recent window must move further than that (noisy small phases stray far in clr).
    noise_floor: float

    @classmethod
    def build(cls, runs: Sequence[RunData], window: int = 4, seed: int = 0) -> CompositionReference:
        names = common_phases(runs)
        timed = [run for run in runs if run.timed]
        mix = phase_mix(timed)
        rows = clr_rows(timed, names)
        return cls(
            names=names,
            rows=rows,
            hours=np.array([run.at.hour for run in timed], dtype=np.int64),
            leader=mix.dominant,
            shares_pct={name: round(100 * share, 1) for name, share in mix.shares.items()},
            noise_floor=_noise_floor(rows, window, np.random.default_rng(seed)),
        )

    def rows_near(self, hours: set[int], most: int = 96) -> Array:
        near = {(hour + shift) % 24 for hour in hours for shift in (-1, 0, 1)}
        chosen = self.rows[np.isin(self.hours, list(near))]
        rows = chosen if len(chosen) >= 8 else self.rows
        return rows[-most:]


def _noise_floor(rows: Array, window: int, rng: np.random.Generator, draws: int = 300) -> float:
    if len(rows) <= window:
        return 0.0
    picks = first_of_permutations(rng.random((draws, len(rows))), window)
    centres = rows[picks].mean(axis=1)
    distances = np.linalg.norm(centres - rows.mean(axis=0), axis=1)
    return float(np.quantile(distances, 0.99))


# probe_failing -----------------------------------------------------------------------


def failing_finding(last: Sequence[RunData], params: DetectorParams) -> Finding:
    """No successful sample in the last ``failing_runs`` runs."""
    if len(last) < params.failing_runs:
        return Finding(Signal.HOLD)
    window = last[-params.failing_runs :]
    numbers = {"runs": len(window), "failed_samples": sum(run.failed for run in window)}
    if all(run.ok == 0 for run in window):
        return Finding(Signal.HIT, numbers)
    return Finding(Signal.CLEAR if window[-1].ok > 0 else Signal.HOLD, numbers)
