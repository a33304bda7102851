"""A finished run as plain data: what the pipeline stores, the spool keeps, and agents send.

Its JSON form is the one wire format for a run (spool lines today, agent pushes later), so
it round-trips exactly: ``RunRecord.from_json(record.to_json()) == record``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from app.analysis.llmmetrics import llm_summary
from app.analysis.summary import summarize
from app.probe.sample import Sample


class RunStatus(StrEnum):
    """A run's status: measured whole, or cut (by shutdown, or by a crash)."""

    COMPLETE = "complete"
    ABORTED = "aborted"


# What a stored sample keeps beyond its columns (see SampleRow.details).
DETAIL_KEYS = (
    "http_version",
    "connection_reused",
    "cold_start",
    "remote_address",
    "address_family",
    "connect_split",
    "request_id",
    "rtt_ms",
    "tokens",
    "server_timing",
    "unsplit",
    "flags",
    "traceparent",
    "stream",
)


@dataclass(frozen=True, slots=True)
class SampleRecord:
    idx: int
    started_at: datetime
    status: str
    total_ms: float
    phases: dict[str, float]
    provenance: dict[str, str] = field(default_factory=dict)
    marks: dict[str, int] = field(default_factory=dict)
    error_class: str | None = None
    error: str | None = None
    http_status: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_sample(cls, sample: Sample) -> SampleRecord:
        details = sample.details()  # not the whole to_json: a share of a run's CPU in serve
        return cls(
            idx=sample.index,
            started_at=sample.started_at,
            status=sample.status.value,
            total_ms=sample.total_ms,
            phases=dict(sample.phases),
            provenance={k: v.value for k, v in sample.provenance.items()},
            marks=sample.marks.as_dict(),
            error_class=sample.error_class,
            error=sample.error,
            http_status=sample.http_status,
            details={key: details[key] for key in DETAIL_KEYS},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "idx": self.idx,
            "started_at": self.started_at.isoformat(),
            "status": self.status,
            "total_ms": self.total_ms,
            "phases": self.phases,
            "provenance": self.provenance,
            "marks": self.marks,
            "error_class": self.error_class,
            "error": self.error,
            "http_status": self.http_status,
            "details": self.details,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SampleRecord:
        return cls(**{**data, "started_at": datetime.fromisoformat(data["started_at"])})


@dataclass(frozen=True, slots=True)
class RunRecord:
    id: uuid.UUID
    target: str
    vantage: str
    started_at: datetime
    status: str  # complete | aborted
    samples: tuple[SampleRecord, ...] = ()
    scheduled_at: datetime | None = None
    finished_at: datetime | None = None
    # Its scheduled slot (``app.runs.slots``: ms since the epoch), None when not scheduled
    # (a run by hand, an import, an older agent): one run a (target, vantage, slot) is kept.
    slot: int | None = None

    def summary(self) -> dict[str, Any]:
        """The breakdown, and the LLM metrics' percentiles (``llm``, docs/metrics.md)."""
        return {**summarize(self.samples).to_json(), "llm": llm_summary(self.samples)}

    def to_json(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "target": self.target,
            "vantage": self.vantage,
            "started_at": self.started_at.isoformat(),
            "status": self.status,
            "scheduled_at": _iso(self.scheduled_at),
            "finished_at": _iso(self.finished_at),
            "slot": self.slot,
            "samples": [s.to_json() for s in self.samples],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        return cls(
            id=uuid.UUID(data["id"]),
            target=data["target"],
            vantage=data["vantage"],
            started_at=datetime.fromisoformat(data["started_at"]),
            status=data["status"],
            scheduled_at=_from_iso(data.get("scheduled_at")),
            finished_at=_from_iso(data.get("finished_at")),
            slot=data.get("slot"),
            samples=tuple(SampleRecord.from_json(s) for s in data.get("samples", [])),
        )


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _from_iso(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)
