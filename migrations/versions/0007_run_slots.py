"""A run's scheduled slot, and one run a (target, vantage, slot).

Two replicas probing one schedule (the overlap after an outage, before the old leader's next
check) name the same slot for the same scheduled run (``app.runs.slots``); the unique index
lets the database keep the first and turn the second away (``app.store.ingest``). Runs
stored before have no slot (NULL), as have runs by hand, imports and older agents' runs:
NULLs never collide, on SQLite or PostgreSQL.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_runs_target_id_vantage_slot"


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("slot", sa.BigInteger(), nullable=True))
        batch.create_index(INDEX, ["target_id", "vantage", "slot"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index(INDEX)
        batch.drop_column("slot")
