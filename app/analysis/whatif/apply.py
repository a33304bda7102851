"""Changes applied to measured samples, sample by sample (a sample's phases move together).

A censored sample (cut at the deadline) is known only up to its cut: its phases after the
change are a *lower bound* of what they would have been. ``settle`` turns the phases into
end-to-end values two ways: pessimistic (a censored sample stays a miss, at the deadline:
the point estimate) and optimistic (it ends where its known phases end: the other bound).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from app.analysis.whatif.changes import (
    COLD_PHASES,
    Change,
    ChangeError,
    ColdStarts,
    Deadline,
    ScalePhase,
    SetPhase,
    TakePhase,
)
from app.analysis.whatif.rhythm import scaled
from app.analysis.whatif.samples import SampleSet

# Changes that draw at random (cold starts, another target's phase) are applied to several
# copies of each measured sample, so that the draw's own noise stays small.
MIN_POINTS = 20_000

Floats = NDArray[np.float64]
Bools = NDArray[np.bool_]


@dataclass(frozen=True)
class Applied:
    """The samples after the changes: ``copies`` rows per measured sample, in order."""

    phases: tuple[str, ...]
    ms: Floats
    run: NDArray[np.intp]
    censored: Bools
    deadline_ms: float | None
    copies: int
    rhythm: dict[str, Floats] = field(default_factory=dict)  # each row's, at its new pace


@dataclass(frozen=True)
class Settled:
    values: Floats  # end-to-end as the client sees it: a miss counts at the deadline
    miss: Bools
    phase_ms: Floats  # each phase's time up to ``values`` (a miss's phases stop at the cut)


def deadline_of(samples: SampleSet, changes: Sequence[Change]) -> float | None:
    set_to = [change.ms for change in changes if isinstance(change, Deadline)]
    return set_to[-1] if set_to else samples.deadline_ms


def copies_for(samples: SampleSet, changes: Sequence[Change]) -> int:
    random = any(isinstance(change, TakePhase | ColdStarts) for change in changes)
    return max(1, math.ceil(MIN_POINTS / max(samples.n, 1))) if random else 1


def apply(
    samples: SampleSet,
    changes: Sequence[Change],
    donors: Mapping[str, SampleSet],
    rng: np.random.Generator,
) -> Applied:
    copies = copies_for(samples, changes)
    ms = np.repeat(samples.ms, copies, axis=0)
    for change in changes:
        _apply_one(samples, ms, change, donors, rng)
    run, censored = np.repeat(samples.run, copies), np.repeat(samples.censored, copies)
    rhythm = scaled(samples.phases, samples.ms, ms, samples.rhythm, copies)
    deadline = deadline_of(samples, changes)
    return Applied(samples.phases, ms, run, censored, deadline, copies, rhythm)


def _apply_one(
    samples: SampleSet,
    ms: Floats,
    change: Change,
    donors: Mapping[str, SampleSet],
    rng: np.random.Generator,
) -> None:
    match change:
        case SetPhase(phase, value):
            ms[:, _column(samples, phase, change)] = value
        case ScalePhase(phase, factor):
            ms[:, _column(samples, phase, change)] *= factor
        case TakePhase():
            ms[:, _column(samples, change.phase, change)] = _donated(change, donors, len(ms), rng)
        case ColdStarts():
            _add_cold(samples, ms, change, rng)
        case Deadline():
            pass


def _column(samples: SampleSet, phase: str, change: Change) -> int:
    if phase not in samples.phases:
        known = ", ".join(samples.phases) or "none"
        raise ChangeError(
            change.token(), f"the samples have no phase {phase!r} (they have {known})"
        )
    return samples.column(phase)


def _donated(
    change: TakePhase, donors: Mapping[str, SampleSet], n: int, rng: np.random.Generator
) -> Floats:
    donor = donors.get(change.source)
    if donor is None or donor.n == 0:
        raise ChangeError(change.token(), f"no measured samples of {change.source}")
    if change.phase not in donor.phases:
        raise ChangeError(change.token(), f"{change.source} has no phase {change.phase!r}")
    column = donor.ms[:, donor.column(change.phase)]
    return np.asarray(rng.choice(column, size=n), np.float64)


def _add_cold(samples: SampleSet, ms: Floats, cold: ColdStarts, rng: np.random.Generator) -> None:
    phase = next((p for p in COLD_PHASES if p in samples.phases), None)
    if phase is None:
        raise ChangeError(cold.token(), f"no {' or '.join(COLD_PHASES)} phase to add it to")
    # Exactly that share, at random places: a mixture without the noise of a coin per sample.
    chosen = rng.choice(len(ms), size=round(cold.fraction * len(ms)), replace=False)
    ms[chosen, samples.column(phase)] += rng.uniform(cold.min_ms, cold.max_ms, size=len(chosen))


def settle(
    ms: Floats, censored: Bools, deadline_ms: float | None, *, pessimistic: bool = True
) -> Settled:
    known = ms.sum(axis=1)
    if deadline_ms is None:
        return Settled(known, censored.copy(), ms)
    values = np.minimum(known, deadline_ms)
    miss = known > deadline_ms
    if pessimistic:
        values = np.where(censored, deadline_ms, values)
        miss |= censored
    reached = np.minimum(np.cumsum(ms, axis=1), values[:, None])
    phase_ms = np.diff(reached, axis=1, prepend=0.0)
    return Settled(values, miss, phase_ms)
