"""A window's breakdown as the API and the dashboard show it, built from plain values.

``from_summary`` turns exact statistics (app.analysis.summary) into a ``Breakdown``;
``from_columns`` one row of merged digests (app.analysis.series, quantiles within 1 %).
The reads that feed them are app.store.reads.breakdown's.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from app.analysis.digest import QUANTILES, Digest, merged_provenance
from app.analysis.runs import phase_order
from app.analysis.series import window_json
from app.analysis.summary import TIMED, Summary


@dataclass(frozen=True)
class PhaseRow:
    phase: str
    p50: float
    p90: float
    p95: float
    p99: float
    n: int
    share: float
    provenance: str  # how most of its samples were measured: measured | server | estimated

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            **{name: round(getattr(self, name), 3) for name in QUANTILES},
            "n": self.n,
            "share": round(self.share, 4),
            "provenance": self.provenance,
        }


@dataclass(frozen=True)
class Breakdown:
    target: str
    vantage: str | None
    start: datetime
    end: datetime
    runs: int
    n: int  # timed samples: ok and deadline-exceeded (censored at the deadline)
    errors: int
    deadline_exceeded: int
    total: dict[str, float]  # p50 p90 p95 p99 of end-to-end
    phases: list[PhaseRow]  # in the phase model's order
    dominant: str | None
    last_run_at: datetime | None
    source: str = "samples"  # samples: exact | digests: merged sketches, within 1 %

    def to_json(self) -> dict[str, Any]:
        return {
            **window_json(self.target, self.vantage, self.start, self.end),
            "runs": self.runs,
            "n": self.n,
            "errors": self.errors,
            "deadline_exceeded": self.deadline_exceeded,
            "total": {name: round(value, 3) for name, value in self.total.items()},
            "phases": [row.to_json() for row in self.phases],
            "dominant": self.dominant,
            "last_run_at": None if self.last_run_at is None else self.last_run_at.isoformat(),
            "source": self.source,
        }


class Labelled(Protocol):
    """A stored sample with how each of its phases was measured."""

    @property
    def status(self) -> str: ...

    @property
    def phases(self) -> Mapping[str, float]: ...

    @property
    def provenance(self) -> Mapping[str, str]: ...


def from_columns(
    columns: dict[str, Any],
    i: int,
    pair: tuple[str, str],
    span: tuple[datetime, datetime],
    last: datetime,
    digests: list[Digest],
) -> Breakdown:
    """Row ``i`` of ``_columns`` (a pair's merged digests) as a Breakdown."""
    provenance = merged_provenance(digests)
    rows = [
        PhaseRow(
            phase=name,
            **{q: columns["phase_quantiles"][name][q][i] for q in QUANTILES},
            n=columns["samples"][i],
            share=columns["shares"][name][i],
            provenance=main_label(provenance.get(name, {})),
        )
        for name in columns["phases"]
        if columns["phase_quantiles"][name]["p50"][i] is not None
    ]
    total = {q: columns["total"][q][i] for q in QUANTILES}
    return Breakdown(
        target=pair[0],
        vantage=pair[1],
        start=span[0],
        end=span[1],
        runs=columns["runs"][i],
        n=columns["samples"][i],
        errors=columns["errors"][i],
        deadline_exceeded=columns["deadline_misses"][i],
        total={q: v for q, v in total.items() if v is not None},
        phases=rows,
        dominant=columns["dominant"][i],
        last_run_at=last,
        source="digests",
    )


def from_summary(
    pair: tuple[str, str | None],
    span: tuple[datetime, datetime],
    runs: int,
    summary: Summary,
    provenance: dict[str, dict[str, int]],
    last: datetime | None,
    source: str,
) -> Breakdown:
    rows = [
        PhaseRow(
            phase=name,
            **summary.phases[name].quantiles,
            n=summary.n,
            share=summary.phases[name].share,
            provenance=main_label(provenance.get(name, {})),
        )
        for name in phase_order(summary.phases)
    ]
    return Breakdown(
        target=pair[0],
        vantage=pair[1],
        start=span[0],
        end=span[1],
        runs=runs,
        n=summary.n,
        errors=summary.errors,
        deadline_exceeded=summary.deadline_exceeded,
        total=summary.total,
        phases=rows,
        dominant=summary.dominant,
        last_run_at=last,
        source=source,
    )


def main_label(counts: dict[str, int]) -> str:
    return max(sorted(counts), key=lambda label: counts[label]) if counts else ""


def provenance_counts(samples: Iterable[Labelled]) -> dict[str, dict[str, int]]:
    found: dict[str, Counter[str]] = defaultdict(Counter)
    for sample in samples:
        if sample.status in TIMED:
            for name, label in sample.provenance.items():
                if name in sample.phases:
                    found[name][label] += 1
    return {name: dict(counts) for name, counts in found.items()}
