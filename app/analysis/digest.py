"""A digest: what a set of samples tells about latency, kept small and mergeable.

One sketch of end-to-end time and one per phase (app.analysis.sketch), the counts that
summarize reports (timed, failed, censored), and how each phase was measured. A run's digest
is stored with the run; rollups (per 5 minutes … per day) are merged digests, so a window of
any length is answered by merging a few of them.

Consistent with app.analysis.summary: censored samples are timed; a timed sample without a
phase counts as 0 in that phase; shares are each phase's median over the sum of the phase
medians; the dominant phase has the largest share.

Pure: plain values in, plain values out.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.analysis.runs import phase_order
from app.analysis.sketch import Sketch, merge, row_quantiles, stack
from app.analysis.summary import (
    FAILED,
    TIMED,
    PhaseStats,
    Summary,
    Timed,
    dominant_phase,
    shares,
)
from app.probe.sample import Status

QUANTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}
# Digests summarized in one pass: a pass's count matrix is their sketches' rows by the keys
# any of them holds, so it is kept to a few hundred rows.
SUMMARIES_AT_ONCE = 32


@dataclass(frozen=True, slots=True)
class Digest:
    runs: int = 0
    n: int = 0  # timed samples: ok and censored
    errors: int = 0
    deadline_exceeded: int = 0
    total: Sketch = field(default_factory=Sketch)
    phases: dict[str, Sketch] = field(default_factory=dict)
    # phase -> provenance ("measured", "server", "estimated") -> samples
    provenance: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "n": self.n,
            "errors": self.errors,
            "deadline_exceeded": self.deadline_exceeded,
            "total": self.total.to_json(),
            "phases": {name: sketch.to_json() for name, sketch in self.phases.items()},
            "provenance": self.provenance,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Digest:
        return cls(
            runs=data["runs"],
            n=data["n"],
            errors=data["errors"],
            deadline_exceeded=data["deadline_exceeded"],
            total=Sketch.from_json(data["total"]),
            phases={name: Sketch.from_json(s) for name, s in data["phases"].items()},
            provenance=data.get("provenance", {}),
        )

    def summary(self) -> Summary:
        """The digest as summarize would report its samples (quantiles within 1 %)."""
        return summaries([self])[0]


def summaries(digests: Sequence[Digest]) -> list[Summary]:
    """Each digest's ``summary``, the quantiles of ``SUMMARIES_AT_ONCE`` of them found in
    one pass: a catch-up's rows merged together cost a pass a few dozen, not one a row
    (numpy's per-call work was most of a row's). Each row's quantiles are its own: the
    others only add keys it does not hold (``row_quantiles``)."""
    made = []
    for first in range(0, len(digests), SUMMARIES_AT_ONCE):
        some = digests[first : first + SUMMARIES_AT_ONCE]
        found = _quantiles([s for digest in some for s in (digest.total, *digest.phases.values())])
        at = 0
        for digest in some:
            width = 1 + len(digest.phases)
            made.append(_summary_of(digest, found[at], found[at + 1 : at + width]))
            at += width
    return made


def _summary_of(
    digest: Digest, total: dict[str, float], phases: Sequence[dict[str, float]]
) -> Summary:
    per_phase = dict(zip(digest.phases, phases, strict=True))
    phase_shares = shares({name: q["p50"] for name, q in per_phase.items()})
    return Summary(
        n=digest.n,
        errors=digest.errors,
        deadline_exceeded=digest.deadline_exceeded,
        total=total,
        phases={name: PhaseStats(per_phase[name], phase_shares[name]) for name in per_phase},
        dominant=dominant_phase(phase_shares),
    )


def _quantiles(sketches: list[Sketch]) -> list[dict[str, float]]:
    """Each sketch's ``Sketch.quantiles``, found for all of them in one pass (a rollup's
    summary is computed whenever a run is merged into it)."""
    low, matrix = stack([[sketch] for sketch in sketches])
    found = row_quantiles(low, matrix, QUANTILES)
    counts = matrix.sum(axis=1)
    return [
        {name: float(values[row]) for name, values in found.items()} if counts[row] else {}
        for row in range(len(sketches))
    ]


def flaw(samples: Iterable[Timed]) -> str | None:
    """Why a digest of ``samples`` would lie (a timed sample's time or a phase that is not
    a finite, non-negative number: sketches hold neither), or None. Runs are checked at the
    door (app.runs.validate); this is for rows that got in another way."""
    for position, sample in enumerate(samples):
        if sample.status not in TIMED:
            continue
        if not isinstance(sample.phases, Mapping):
            return f"sample {position}: phases {sample.phases!r} are not an object"
        values = {"total_ms": sample.total_ms, **sample.phases}
        for name, value in values.items():
            if not _measure(value):
                return f"sample {position}: {name} is {value!r}, not a time"
    return None


def _measure(value: object) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return math.isfinite(value) and value >= 0


def digest_of(samples: Iterable[Timed], runs: int = 1) -> Digest:
    """The digest of samples (their ``provenance`` too, where they have one)."""
    samples = list(samples)
    timed = [s for s in samples if s.status in TIMED]
    names = phase_order(name for s in timed for name in s.phases)
    return Digest(
        runs=runs,
        n=len(timed),
        errors=sum(s.status in FAILED for s in samples),
        deadline_exceeded=sum(s.status == Status.DEADLINE_EXCEEDED for s in samples),
        total=Sketch.of([s.total_ms for s in timed]),
        phases={name: Sketch.of([s.phases.get(name, 0.0) for s in timed]) for name in names},
        provenance=_provenance(timed, names),
    )


def _provenance(timed: list[Timed], names: Iterable[str]) -> dict[str, dict[str, int]]:
    found: dict[str, Counter[str]] = {name: Counter() for name in names}
    for sample in timed:
        for name, label in (getattr(sample, "provenance", None) or {}).items():
            if name in found and name in sample.phases:
                found[name][label] += 1
    return {name: dict(counts) for name, counts in found.items() if counts}


def merge_digests(digests: Iterable[Digest]) -> Digest:
    """All the digests' samples as one digest; a part without a phase adds zeros to it."""
    parts = list(digests)
    names = phase_order(name for part in parts for name in part.phases)
    return Digest(
        runs=sum(p.runs for p in parts),
        n=sum(p.n for p in parts),
        errors=sum(p.errors for p in parts),
        deadline_exceeded=sum(p.deadline_exceeded for p in parts),
        total=merge(p.total for p in parts),
        phases={name: merge(_phase_of(p, name) for p in parts) for name in names},
        provenance=merged_provenance(parts),
    )


def _phase_of(part: Digest, name: str) -> Sketch:
    sketch = part.phases.get(name)
    return sketch if sketch is not None else Sketch.zeros(part.n)


def merged_provenance(parts: Iterable[Digest]) -> dict[str, dict[str, int]]:
    found: dict[str, Counter[str]] = {}
    for part in parts:
        for name, counts in part.provenance.items():
            found.setdefault(name, Counter()).update(counts)
    return {name: dict(counts) for name, counts in found.items()}
