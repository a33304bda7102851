"""The tables. Run ids come from whoever ran the probe, so storing a run twice is a no-op.

A run keeps its summary forever (phase percentiles, shares, dominant phase, totals); its
samples, the raw detail, are pruned after ``raw_retention_days``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
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


class RunRow(Base):
    __tablename__ = "runs"
    __table_args__ = (Index(None, "target_id", "vantage", "started_at"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"))
    vantage: Mapped[str] = mapped_column(String(200))
    scheduled_at: Mapped[datetime | None]
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
    phases: Mapped[dict[str, Any]]
    provenance: Mapped[dict[str, Any]]
    marks: Mapped[dict[str, Any]]
    # HTTP version, reuse, address, request id, tokens, server timing, RTT, flags.
    details: Mapped[dict[str, Any]]
