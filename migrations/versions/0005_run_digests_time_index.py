"""An index on run digests by start time, for windows across every target.

The overview merges the last hour's run digests of every (target, vantage). Run digests are
kept as long as their runs, which is forever (~35,000 a year for each target and vantage
probed every 15 minutes); without this index that read scans them all. The (target_id,
vantage, started_at) index serves one pair's window, not all pairs'.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_run_digests_started_at", "run_digests", ["started_at"])


def downgrade() -> None:
    op.drop_index("ix_run_digests_started_at", table_name="run_digests")
