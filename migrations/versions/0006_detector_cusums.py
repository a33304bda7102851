"""Detector state beyond the tail CUSUM: one JSON object per (target, vantage).

Detectors that carry numbers between runs (a CUSUM's height, the runs since it was last
zero) keep them under their own name in ``detector_state.cusums``, so a new detector's
state needs no migration of its own. An empty object is "nothing carried yet".

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("detector_state") as batch:
        batch.add_column(sa.Column("cusums", JSON, nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("detector_state") as batch:
        batch.drop_column("cusums")
