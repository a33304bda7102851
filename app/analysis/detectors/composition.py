"""``composition_shift`` (a warning) — the phase mix moved while the leader did not."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from app.analysis.composition import clr_rows, clr_shift, first_of_permutations
from app.analysis.detectors.base import WARNING, Detector, Finding, Inputs, Named, Signal
from app.analysis.dominance import leader_of, phase_mix
from app.analysis.runs import Array, RunData, common_phases

if TYPE_CHECKING:
    from app.analysis.detectors.params import DetectorParams


def judge(inputs: Inputs) -> list[Finding]:
    reference, params = inputs.reference, inputs.params
    if reference is None or reference.composition is None or inputs.dominant_open:
        return []
    if len(inputs.window) < params.recent_runs:
        return []
    return [composition_finding(inputs.window, reference.composition, params, inputs.rng)]


def composition_finding(
    recent: Sequence[RunData],
    reference: CompositionReference,
    params: DetectorParams,
    rng: np.random.Generator,
) -> Finding:
    """The mix moved (Aitchison distance, permutation over runs) while the leader did not."""
    mix = phase_mix(recent)
    leaders = {leader_of(run) for run in recent}
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
    """The 99th percentile of how far ``window`` runs stray from the centre: picked at
    random, and — since runs next to each other share the moment's load — consecutive."""
    if len(rows) <= window:
        return 0.0
    picks = first_of_permutations(rng.random((draws, len(rows))), window)
    centre = rows.mean(axis=0)
    apart = np.linalg.norm(rows[picks].mean(axis=1) - centre, axis=1)
    runs = np.lib.stride_tricks.sliding_window_view(rows, window, axis=0).mean(axis=-1)
    together = np.linalg.norm(runs - centre, axis=1)
    return max(float(np.quantile(apart, 0.99)), float(np.quantile(together, 0.99)))


def sentence(identity: Named, n: dict[str, Any]) -> str:
    return (
        f"phase mix moved on {identity.target} without a leader change: {n['moved_most']} "
        f"moved most (Aitchison distance {n['distance']:g}, p = {n['p_value']:.3f})"
    )


def current(identity: Named, n: dict[str, Any]) -> str:
    return f"distance {n['distance']:g}, {n['moved_most']} moved most"


def _confirm(params: DetectorParams) -> int:
    # A slow mix change persists for hours: a warning waits for more confirmations.
    return params.composition_confirm


DETECTOR = Detector(
    name="composition_shift",
    summary="the phase mix moved (Aitchison distance) while the leader stayed",
    sentence=sentence,
    judge=judge,
    severity=WARNING,
    # Off unless a target asks: on history with a shared, correlated load the mix breathes
    # by more than any noise floor learnt from a week (bench/detection/README.md).
    enabled=False,
    confirm=_confirm,
    excludes_runs=False,
    current=current,
)
