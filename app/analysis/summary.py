"""One run's (or any set of samples') breakdown: percentiles, shares, the dominant phase.

Pure: plain values in, plain values out. Percentiles interpolate linearly (numpy's
default). Censored samples (deadline exceeded, total = the deadline) stay in every
percentile; samples that failed outright have no latency and are counted apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from app.analysis.notes import Note, run_notes
from app.probe.sample import Status

QUANTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
TIMED = frozenset({Status.OK, Status.DEADLINE_EXCEEDED})
FAILED = frozenset({Status.ERROR, Status.HTTP_ERROR})


class Timed(Protocol):
    """A probe sample, or its stored record."""

    @property
    def status(self) -> str: ...

    @property
    def total_ms(self) -> float: ...

    @property
    def phases(self) -> Mapping[str, float]: ...


@dataclass(frozen=True, slots=True)
class PhaseStats:
    quantiles: dict[str, float]
    share: float

    def to_json(self) -> dict[str, float]:
        return {
            **{k: round(v, 3) for k, v in self.quantiles.items()},
            "share": round(self.share, 4),
        }


@dataclass(frozen=True, slots=True)
class Summary:
    n: int  # samples with a latency: ok and censored
    errors: int
    deadline_exceeded: int
    total: dict[str, float]
    phases: dict[str, PhaseStats] = field(default_factory=dict)
    dominant: str | None = None
    # What the numbers alone would hide (app.analysis.notes): one run's samples only.
    notes: tuple[Note, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "errors": self.errors,
            "deadline_exceeded": self.deadline_exceeded,
            "total": {k: round(v, 3) for k, v in self.total.items()},
            "phases": {name: stats.to_json() for name, stats in self.phases.items()},
            "dominant": self.dominant,
            "notes": [note.to_json() for note in self.notes],
        }


def percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    found = np.percentile(np.asarray(values, dtype=float), list(QUANTILES.values()))
    return dict(zip(QUANTILES, (float(v) for v in found), strict=True))


def shares(medians: dict[str, float]) -> dict[str, float]:
    """Each phase's median over the sum of all phase medians."""
    whole = sum(medians.values())
    if whole <= 0:
        return dict.fromkeys(medians, 0.0)
    return {name: median / whole for name, median in medians.items()}


def dominant_phase(phase_shares: dict[str, float]) -> str | None:
    if not phase_shares or max(phase_shares.values()) <= 0:
        return None
    return max(phase_shares, key=lambda name: phase_shares[name])


def summarize(samples: Iterable[Timed], *, one_run: bool = True) -> Summary:
    """``samples`` of one run in their order (then with its notes), or of any window."""
    samples = list(samples)
    timed = [s for s in samples if s.status in TIMED]
    names = _phase_names(timed)
    per_phase, total = _phase_and_total_percentiles(timed, names)
    phase_shares = shares({name: q["p50"] for name, q in per_phase.items()})
    return Summary(
        n=len(timed),
        errors=sum(s.status in FAILED for s in samples),
        deadline_exceeded=sum(s.status == Status.DEADLINE_EXCEEDED for s in samples),
        total=total,
        phases={name: PhaseStats(per_phase[name], phase_shares[name]) for name in names},
        dominant=dominant_phase(phase_shares),
        notes=run_notes(samples) if one_run else (),
    )


def _phase_and_total_percentiles(
    timed: Sequence[Timed], names: list[str]
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Every phase's percentiles and the total's, from one ``np.percentile`` over a matrix.

    A column per phase (0 where a sample lacks it) and one for the total: a single numpy
    call per run instead of one per phase, which is most of what summarizing costs when a
    run is stored. Each column gets exactly what ``percentiles`` would give it.
    """
    if not timed:
        return {}, {}
    matrix = np.array(
        [[s.phases.get(name, 0.0) for name in names] + [s.total_ms] for s in timed], dtype=float
    )
    found = column_percentiles(matrix).T.tolist()
    columns = [dict(zip(QUANTILES, column, strict=True)) for column in found]
    return dict(zip(names, columns, strict=False)), columns[-1]


_FRACTIONS = np.true_divide(list(QUANTILES.values()), 100)


def column_percentiles(matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    """``np.percentile(matrix, QUANTILES, axis=0)``, to the last bit, for a finite matrix.

    Its "linear" method spelled out (sort, neighbours, numpy's own two-sided lerp)
    without the generic machinery around it, which cost more than the sorting for a
    run's few samples, and storing a run summarizes it. NaN or infinity: numpy's own.
    """
    if not np.isfinite(matrix).all():
        return np.asarray(np.percentile(matrix, list(QUANTILES.values()), axis=0))
    count = len(matrix)
    virtual = (count - 1) * _FRACTIONS
    below = np.floor(virtual)
    above = below + 1
    last = virtual >= count - 1
    below[last] = above[last] = -1
    low, high = below.astype(np.intp), above.astype(np.intp)
    ordered = np.sort(matrix, axis=0)
    a, b = ordered[low], ordered[high]
    gamma = (virtual - low)[:, None]
    found: NDArray[np.float64] = a + (b - a) * gamma
    np.subtract(b, (b - a) * (1 - gamma), out=found, where=gamma >= 0.5)
    return found


def _phase_names(samples: Sequence[Timed]) -> list[str]:
    names: dict[str, None] = {}
    for sample in samples:
        names.update(dict.fromkeys(sample.phases))
    return list(names)
