"""A covering index on runs for long-window chart reads.

A 90-day chart of one target reads ~10^4..10^5 runs; with every charted column in the index
the read is an index-only range scan instead of a visit to each wide row (its JSON summary).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHART_COLUMNS = [
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
]


def upgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.create_index(
            "ix_runs_chart",
            "runs",
            ["target_id", "started_at"],
            postgresql_include=CHART_COLUMNS,
        )
    else:
        # SQLite has no INCLUDE: the payload columns become trailing key columns.
        op.create_index("ix_runs_chart", "runs", ["target_id", "started_at", *CHART_COLUMNS])


def downgrade() -> None:
    op.drop_index("ix_runs_chart", table_name="runs")
