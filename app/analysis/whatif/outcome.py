"""What a what-if answers: the end-to-end distribution before and after, as plain values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.analysis.whatif.apply import Settled
from app.analysis.whatif.changes import Change, changes_to_json
from app.analysis.whatif.objectiveshares import ObjectiveOutcome
from app.analysis.whatif.resample import Interval, Spread, interval, point_quantiles


@dataclass(frozen=True)
class EndToEnd:
    """The end-to-end distribution of a target's requests: as measured, or as a what-if
    predicts it once its changes are made."""

    p50_ms: Interval
    p90_ms: Interval
    p99_ms: Interval
    miss_rate: Interval
    shares: dict[str, float]  # phase -> share of the mean end-to-end
    dominant: str | None
    next_dominant: str | None  # the phase that would lead once the dominant one shrank
    samples: int
    runs: int
    deadline_ms: float | None

    def to_json(self) -> dict[str, Any]:
        intervals = {"p50_ms": self.p50_ms, "p90_ms": self.p90_ms, "p99_ms": self.p99_ms}
        return {
            **{name: value.to_json() for name, value in intervals.items()},
            "miss_rate": self.miss_rate.to_json(),
            "shares": self.shares,
            "dominant": self.dominant,
            "next_dominant": self.next_dominant,
            "samples": self.samples,
            "runs": self.runs,
            "deadline_ms": self.deadline_ms,
        }


@dataclass(frozen=True)
class Bound:
    """The optimistic end of an answer about censored samples: each ends where its known
    phases end (the pessimistic end, a miss at the deadline, is the point estimate)."""

    p50_ms: float
    p90_ms: float
    p99_ms: float
    miss_rate: float

    def to_json(self) -> dict[str, float]:
        return {
            "p50_ms": self.p50_ms,
            "p90_ms": self.p90_ms,
            "p99_ms": self.p99_ms,
            "miss_rate": self.miss_rate,
        }


@dataclass(frozen=True)
class Prediction:
    before: EndToEnd
    after: EndToEnd
    changes: tuple[Change, ...]
    notes: tuple[str, ...] = ()
    optimistic: Bound | None = None
    # The target's latency objectives and goodput, met before and after (objectiveshares).
    objectives: tuple[ObjectiveOutcome, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "changes": changes_to_json(self.changes),
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "optimistic": None if self.optimistic is None else self.optimistic.to_json(),
            "notes": list(self.notes),
            "objectives": [outcome.to_json() for outcome in self.objectives],
        }


def end_to_end(
    phases: tuple[str, ...],
    settled: Settled,
    spread: Spread,
    deadline_ms: float | None,
    measured: tuple[int, int],
) -> EndToEnd:
    """The point estimates from every sample, their intervals from the run resamples
    (``spread``); ``measured``: the samples and the runs they came from."""
    points = point_quantiles(settled.values) if len(settled.values) else np.full(3, np.nan)
    miss = settled.miss.astype(np.float64)
    rate = float(miss.mean()) if len(miss) else float("nan")
    shares = shares_of(phases, settled.phase_ms)
    leaders = sorted(shares, key=lambda phase: -shares[phase])
    p50, p90, p99 = (interval(float(points[i]), spread.quantiles[:, i]) for i in range(3))
    return EndToEnd(
        p50,
        p90,
        p99,
        miss_rate=interval(rate, spread.rates),
        shares=shares,
        dominant=leaders[0] if leaders else None,
        next_dominant=leaders[1] if len(leaders) > 1 else None,
        samples=measured[0],
        runs=measured[1],
        deadline_ms=deadline_ms,
    )


def shares_of(phases: tuple[str, ...], phase_ms: NDArray[np.float64]) -> dict[str, float]:
    means = phase_ms.mean(axis=0) if len(phase_ms) else np.zeros(len(phases))
    total = float(means.sum())
    if total <= 0:
        return {}
    return {phase: float(mean / total) for phase, mean in zip(phases, means, strict=True)}


def bound(settled: Settled) -> Bound:
    points = point_quantiles(settled.values)
    p50, p90, p99 = (float(v) for v in points)
    return Bound(p50, p90, p99, float(settled.miss.mean()))
