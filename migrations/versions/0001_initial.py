"""Targets, runs and their samples.

Revision ID: 0001
Revises:
Create Date: 2026-11-29

Written against app/store/models.py without importing it: a migration must keep meaning
the same schema when the models move on.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _utc(name: str, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "targets",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("interval_s", sa.Float(), nullable=False),
        sa.Column("config", JSON, nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        _utc("updated_at"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_targets")),
        sa.UniqueConstraint("name", name=op.f("uq_targets_name")),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("vantage", sa.String(length=200), nullable=False),
        _utc("scheduled_at", nullable=True),
        _utc("started_at"),
        _utc("finished_at", nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("n_samples", sa.Integer(), nullable=False),
        sa.Column("n_ok", sa.Integer(), nullable=False),
        sa.Column("n_errors", sa.Integer(), nullable=False),
        sa.Column("n_deadline_exceeded", sa.Integer(), nullable=False),
        sa.Column("dominant_phase", sa.String(length=40), nullable=True),
        sa.Column("total_p50", sa.Double(), nullable=True),
        sa.Column("total_p90", sa.Double(), nullable=True),
        sa.Column("total_p95", sa.Double(), nullable=True),
        sa.Column("total_p99", sa.Double(), nullable=True),
        sa.Column("summary", JSON, nullable=False),
        sa.ForeignKeyConstraint(
            ["target_id"], ["targets.id"], name=op.f("fk_runs_target_id_targets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    op.create_index(op.f("ix_runs_started_at"), "runs", ["started_at"])
    op.create_index(
        op.f("ix_runs_target_id_vantage_started_at"),
        "runs",
        ["target_id", "vantage", "started_at"],
    )
    op.create_table(
        "samples",
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        _utc("started_at"),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("error_class", sa.String(length=100), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("http_status", sa.Integer(), nullable=True),
        sa.Column("total_ms", sa.Double(), nullable=False),
        sa.Column("phases", JSON, nullable=False),
        sa.Column("provenance", JSON, nullable=False),
        sa.Column("marks", JSON, nullable=False),
        sa.Column("details", JSON, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_samples_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "idx", name=op.f("pk_samples")),
    )
    op.create_index(op.f("ix_samples_started_at"), "samples", ["started_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_samples_started_at"), table_name="samples")
    op.drop_table("samples")
    op.drop_index(op.f("ix_runs_target_id_vantage_started_at"), table_name="runs")
    op.drop_index(op.f("ix_runs_started_at"), table_name="runs")
    op.drop_table("runs")
    op.drop_table("targets")
