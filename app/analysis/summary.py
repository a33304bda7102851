"""One run's (or any set of samples') breakdown: percentiles, shares, the dominant phase.

Pure: plain values in, plain values out. Percentiles interpolate linearly (numpy's
default). Censored samples (deadline exceeded, total = the deadline) stay in every
percentile; samples that failed outright have no latency and are counted apart.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from app.analysis.notes import Note, run_notes
from app.probe.sample import Status

QUANTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
TIMED = frozenset({Status.OK, Status.DEADLINE_EXCEEDED})
FAILED = frozenset({Status.ERROR, Status.HTTP_ERROR, Status.TIMEOUT, Status.INVALID_ANSWER})
# A p99 taken from fewer timed samples than this rests on its top one or two: shown marked.
LOW_CONFIDENCE_P99_BELOW = 100


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
    """Every phase's percentiles (0 where a sample lacks the phase) and the total's.

    In Python floats, column by column: for a run's few samples numpy's per-call cost
    (the matrix, the sort, the interpolation) was most of what storing a run spent on
    its summary (``bench.store_ingest``). Each column gets exactly what ``percentiles``
    would give it.
    """
    if not timed:
        return {}, {}
    columns = [[s.phases.get(name, 0.0) for s in timed] for name in names]
    columns.append([s.total_ms for s in timed])
    found = [dict(zip(QUANTILES, list_percentiles(column), strict=True)) for column in columns]
    return dict(zip(names, found, strict=False)), found[-1]


_PERCENTS = list(QUANTILES.values())
_FRACTIONS = np.true_divide(_PERCENTS, 100)


def list_percentiles(values: Sequence[float]) -> list[float]:
    """``np.percentile(values, QUANTILES)`` to the last bit, for a non-empty sequence.

    numpy's "linear" method spelled out in Python floats (the same doubles): sort, the
    two neighbours of each quantile's position, numpy's own two-sided lerp. Values that
    are not all finite (NaN, infinity) are left to numpy, whose sort and lerp define them.
    """
    if not math.isfinite(sum(values)):
        return [float(v) for v in np.percentile(np.asarray(values, dtype=float), _PERCENTS)]
    ordered = sorted(values)
    found = []
    for below, above, gamma in _neighbours(len(ordered)):
        low, high = float(ordered[below]), float(ordered[above])
        gap = high - low
        found.append(high - gap * (1 - gamma) if gamma >= 0.5 else low + gap * gamma)
    return found


@functools.lru_cache(maxsize=512)
def _neighbours(count: int) -> tuple[tuple[int, int, float], ...]:
    """For each quantile, numpy's positions below and above it among ``count`` sorted
    values (-1, the last, for both at the top) and the weight of the one above."""
    found = []
    for virtual in ((count - 1) * _FRACTIONS).tolist():
        below = -1 if virtual >= count - 1 else math.floor(virtual)
        above = -1 if below == -1 else below + 1
        found.append((below, above, virtual - below))
    return tuple(found)


def column_percentiles(matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    """``np.percentile(matrix, QUANTILES, axis=0)``, to the last bit: ``list_percentiles``
    of each column."""
    found = [list_percentiles(column) for column in matrix.T.tolist()]
    return np.array(found, dtype=np.float64).reshape(len(found), len(QUANTILES)).T


def _phase_names(samples: Sequence[Timed]) -> list[str]:
    names: dict[str, None] = {}
    for sample in samples:
        names.update(dict.fromkeys(sample.phases))
    return list(names)
