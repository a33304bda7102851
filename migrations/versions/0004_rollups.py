"""Run digests and rollups: mergeable sketches per run and per period, for history and windows.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _utc(name: str) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "run_digests",
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("vantage", sa.String(length=200), nullable=False),
        _utc("started_at"),
        sa.Column("digest", JSON, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_digests_run_id_runs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["target_id"], ["targets.id"], name=op.f("fk_run_digests_target_id_targets")
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_run_digests")),
    )
    op.create_index(
        op.f("ix_run_digests_target_id_vantage_started_at"),
        "run_digests",
        ["target_id", "vantage", "started_at"],
    )
    op.create_table(
        "rollups",
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("vantage", sa.String(length=200), nullable=False),
        sa.Column("period_s", sa.Integer(), nullable=False),
        _utc("period_start"),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("total_p50", sa.Double(), nullable=True),
        sa.Column("digest", JSON, nullable=False),
        _utc("updated_at"),
        sa.ForeignKeyConstraint(
            ["target_id"], ["targets.id"], name=op.f("fk_rollups_target_id_targets")
        ),
        sa.PrimaryKeyConstraint(
            "target_id", "vantage", "period_s", "period_start", name=op.f("pk_rollups")
        ),
    )
    op.create_index(
        op.f("ix_rollups_period_s_period_start"), "rollups", ["period_s", "period_start"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_rollups_period_s_period_start"), table_name="rollups")
    op.drop_table("rollups")
    op.drop_index(op.f("ix_run_digests_target_id_vantage_started_at"), table_name="run_digests")
    op.drop_table("run_digests")
