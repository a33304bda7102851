"""An index on targets (name, interval_s, id): what the overview's ranking of every series
reads of its target, without the targets' wide rows (each carries its config).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_targets_name_interval_s_id", "targets", ["name", "interval_s", "id"])


def downgrade() -> None:
    op.drop_index("ix_targets_name_interval_s_id", table_name="targets")
