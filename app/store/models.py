"""The tables. Run ids come from whoever ran the probe, so storing a run twice is a no-op.

A run keeps its summary (phase percentiles, shares, dominant phase, totals) for
``summary_retention_days``, forever by default; its samples, the raw detail, are pruned
after ``raw_retention_days`` (``app.store.retention``).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Dialect,
    Double,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    Uuid,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.store.samplepack import Packed

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

Json = JSON().with_variant(JSONB(), "postgresql")


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in and out, also on SQLite (which keeps no time zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: phasewatch stores aware UTC times only")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        # PostgreSQL answers in the session's time zone, which need not be UTC.
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    # float spelled out: SQLAlchemy 2.0 maps it to Float, 2.1 to Double; the migrations say Double.
    type_annotation_map = {datetime: UTCDateTime, dict[str, Any]: Json, float: Double}


class TargetRow(Base):
    """A target as the targets file last described it (header values redacted)."""

    __tablename__ = "targets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    kind: Mapped[str] = mapped_column(String(20))
    url: Mapped[str] = mapped_column(Text)
    interval_s: Mapped[float] = mapped_column(Float)
    config: Mapped[dict[str, Any]]
    active: Mapped[bool] = mapped_column(default=True)
    updated_at: Mapped[datetime]


# What a chart over a long window reads of each run: with these in the index, a 90-day
# read of one target is an index-only range scan that never visits the wide rows.
CHART_COLUMNS = (
    "vantage",
    "status",
    "n_ok",
    "n_errors",
    "n_deadline_exceeded",
    "dominant_phase",
    "total_p50",
    "total_p90",
    "total_p95",
    "total_p99",
)
CHART_INDEX = "ix_runs_chart"


def only_on(dialect: str, index: Index) -> Index:
    """``index`` exists on ``dialect`` only; ``info`` tells schema comparison the same."""
    index.info["only_on"] = dialect
    return index.ddl_if(dialect=dialect)


class RunRow(Base):
    __tablename__ = "runs"
    __table_args__ = (
        Index(None, "target_id", "vantage", "started_at"),
        Index(None, "target_id", "vantage", "slot", unique=True),  # one run a slot
        # PostgreSQL keys on what the range scan seeks by and carries the rest as payload;
        # SQLite has no INCLUDE, so there the payload columns are trailing key columns.
        only_on(
            "postgresql",
            Index(CHART_INDEX, "target_id", "started_at", postgresql_include=list(CHART_COLUMNS)),
        ),
        only_on("sqlite", Index(CHART_INDEX, "target_id", "started_at", *CHART_COLUMNS)),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"))
    vantage: Mapped[str] = mapped_column(String(200))
    scheduled_at: Mapped[datetime | None]
    slot: Mapped[int | None] = mapped_column(BigInteger)  # app.runs.slots; NULL: none
    started_at: Mapped[datetime] = mapped_column(index=True)
    finished_at: Mapped[datetime | None]
    status: Mapped[str] = mapped_column(String(20))  # complete | aborted
    n_samples: Mapped[int]
    n_ok: Mapped[int]
    n_errors: Mapped[int]
    n_deadline_exceeded: Mapped[int]
    dominant_phase: Mapped[str | None] = mapped_column(String(40))
    total_p50: Mapped[float | None]
    total_p90: Mapped[float | None]
    total_p95: Mapped[float | None]
    total_p99: Mapped[float | None]
    summary: Mapped[dict[str, Any]]


class SampleRow(Base):
    """One request of a run, its documents packed (``app.store.samplepack``). One per (run,
    idx); on PostgreSQL by UTC day of ``started_at``, its key's too (0010 says why)."""

    __tablename__ = "samples"

    run_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    idx: Mapped[int] = mapped_column(primary_key=True)
    started_at: Mapped[datetime] = mapped_column(index=True)
    status: Mapped[str] = mapped_column(String(20))
    error_class: Mapped[str | None] = mapped_column(String(100))
    error: Mapped[str | None] = mapped_column(Text)
    http_status: Mapped[int | None]
    total_ms: Mapped[float]
    phases: Mapped[dict[str, Any]] = mapped_column(Packed("phases"))
    provenance: Mapped[dict[str, Any]] = mapped_column(Packed("provenance"))
    marks: Mapped[dict[str, Any]] = mapped_column(Packed("marks"))
    details: Mapped[dict[str, Any]] = mapped_column(Packed("details"))


class AlertRow(Base):
    """One alert episode; its identity (kind, target, vantage, scope, phases) is stable."""

    __tablename__ = "alerts"
    __table_args__ = (Index(None, "target", "state"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    kind: Mapped[str] = mapped_column(String(40))
    target: Mapped[str] = mapped_column(String(200))
    vantage: Mapped[str | None] = mapped_column(String(200))
    scope: Mapped[str] = mapped_column(String(20))
    from_phase: Mapped[str | None] = mapped_column(String(40))
    to_phase: Mapped[str | None] = mapped_column(String(40))
    severity: Mapped[str] = mapped_column(String(20))
    state: Mapped[str] = mapped_column(String(20))
    streak: Mapped[int]
    opened_at: Mapped[datetime]
    fired_at: Mapped[datetime | None]
    resolved_at: Mapped[datetime | None]
    acknowledged_at: Mapped[datetime | None]
    acknowledged_by: Mapped[str | None] = mapped_column(String(200))
    summary: Mapped[str] = mapped_column(Text)
    numbers: Mapped[dict[str, Any]]
    updated_at: Mapped[datetime]


class AlertTransitionRow(Base):
    __tablename__ = "alert_transitions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    alert_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("alerts.id"), index=True)
    at: Mapped[datetime]
    before: Mapped[str] = mapped_column(String(20))
    after: Mapped[str] = mapped_column(String(20))
    summary: Mapped[str] = mapped_column(Text)
    numbers: Mapped[dict[str, Any]]
    acknowledged: Mapped[bool] = mapped_column(default=False)


class SilenceRow(Base):
    """Notifications of alerts whose labels match every matcher are held until ``ends_at``."""

    __tablename__ = "silences"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    # [{"name": "target", "value": "translate-prod", "regex": false}, ...]
    matchers: Mapped[dict[str, Any]]
    starts_at: Mapped[datetime]
    ends_at: Mapped[datetime] = mapped_column(index=True)
    created_by: Mapped[str] = mapped_column(String(200))
    comment: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime]


class DeliveryRow(Base):
    """The outbox: one row per notification per notifier, claimed and sent by the sender.

    A transition's rows are written in the same transaction as the transition, so a
    restart neither loses nor repeats one; ``(transition_id, notifier)`` is unique.
    """

    __tablename__ = "deliveries"
    __table_args__ = (
        Index(None, "status", "next_attempt_at"),
        Index(None, "transition_id", "notifier", unique=True),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    alert_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("alerts.id"), index=True)
    # None for a refresh (a firing alert re-announced to Alertmanager), not a transition.
    transition_id: Mapped[int | None] = mapped_column(ForeignKey("alert_transitions.id"))
    notifier: Mapped[str] = mapped_column(String(200))
    payload: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(20))  # pending | sent | failed | silenced
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime]
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    sent_at: Mapped[datetime | None]


class DetectorStateRow(Base):
    """What detection carries between runs of one (target, vantage)."""

    __tablename__ = "detector_state"

    target: Mapped[str] = mapped_column(String(200), primary_key=True)
    vantage: Mapped[str] = mapped_column(String(200), primary_key=True)
    tail_score: Mapped[float] = mapped_column(default=0.0)  # CUSUM above the reference p95
    tail_runs: Mapped[int] = mapped_column(default=0)  # runs since it was last 0
    last_run_id: Mapped[str | None] = mapped_column(String(64))
    rebase_at: Mapped[datetime | None]
    excluded: Mapped[dict[str, Any]]  # {"spans": [[start, end or null], ...]}
    # Other detectors' carried numbers by detector name (migration 0006).
    cusums: Mapped[dict[str, Any]] = mapped_column(default=dict, server_default="{}")
    updated_at: Mapped[datetime]


class RunDigestRow(Base):
    """A complete run's samples as a digest (app.analysis.digest); outlives the samples.

    Its presence also says the run is counted in the rollups: a run is added once.
    """

    __tablename__ = "run_digests"
    __table_args__ = (Index(None, "target_id", "vantage", "started_at"),)

    run_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"))
    vantage: Mapped[str] = mapped_column(String(200))
    started_at: Mapped[datetime] = mapped_column(index=True)  # windows of every target
    digest: Mapped[dict[str, Any]]


class RollupRow(Base):
    """The digests of one target and vantage merged per period (5 min … 1 day, UTC-aligned)."""

    __tablename__ = "rollups"
    __table_args__ = (Index(None, "period_s", "period_start"),)

    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), primary_key=True)
    vantage: Mapped[str] = mapped_column(String(200), primary_key=True)
    period_s: Mapped[int] = mapped_column(primary_key=True)
    period_start: Mapped[datetime] = mapped_column(primary_key=True)
    runs: Mapped[int]
    n: Mapped[int]
    total_p50: Mapped[float | None]  # for sparklines, which read nothing else
    digest: Mapped[dict[str, Any]]
    updated_at: Mapped[datetime]


import app.store.serieslatest  # noqa: E402, F401  (its own module: the metadata holds it)
