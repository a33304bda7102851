"""series_latest: each (target, vantage)'s newest run, upserted with every run stored, so
the overview and the target list read the latest of 10,000 series without scanning runs.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A copy of app.store.serieslatest.REBUILD as it was at this revision.
FILL = """
    INSERT INTO series_latest (run_id, target_id, vantage, started_at, status, n_samples,
                               n_errors, n_deadline_exceeded)
    SELECT id, target_id, vantage, started_at, status, n_samples, n_errors, n_deadline_exceeded
    FROM (SELECT runs.*, ROW_NUMBER() OVER (
              PARTITION BY target_id, vantage ORDER BY started_at DESC, id DESC) AS newest
          FROM runs) AS ranked
    WHERE newest = 1"""


def upgrade() -> None:
    op.create_table(
        "series_latest",
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("vantage", sa.String(length=200), nullable=False),
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("n_samples", sa.Integer(), nullable=False),
        sa.Column("n_errors", sa.Integer(), nullable=False),
        sa.Column("n_deadline_exceeded", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["target_id"], ["targets.id"], name=op.f("fk_series_latest_target_id_targets")
        ),
        sa.PrimaryKeyConstraint("target_id", "vantage", name=op.f("pk_series_latest")),
    )
    op.execute(FILL)


def downgrade() -> None:
    op.drop_table("series_latest")
