"""Alerts, their transitions, silences, the notification outbox and detector state.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _utc(name: str, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("vantage", sa.String(length=200), nullable=True),
        sa.Column("scope", sa.String(length=20), nullable=False),
        sa.Column("from_phase", sa.String(length=40), nullable=True),
        sa.Column("to_phase", sa.String(length=40), nullable=True),
        sa.Column("severity", sa.String(length=20), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("streak", sa.Integer(), nullable=False),
        _utc("opened_at"),
        _utc("fired_at", nullable=True),
        _utc("resolved_at", nullable=True),
        _utc("acknowledged_at", nullable=True),
        sa.Column("acknowledged_by", sa.String(length=200), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("numbers", JSON, nullable=False),
        _utc("updated_at"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alerts")),
    )
    op.create_index(op.f("ix_alerts_target_state"), "alerts", ["target", "state"])
    op.create_table(
        "alert_transitions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("alert_id", sa.Uuid(), nullable=False),
        _utc("at"),
        sa.Column("before", sa.String(length=20), nullable=False),
        sa.Column("after", sa.String(length=20), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("numbers", JSON, nullable=False),
        sa.Column("acknowledged", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["alert_id"], ["alerts.id"], name=op.f("fk_alert_transitions_alert_id_alerts")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_transitions")),
    )
    op.create_index(op.f("ix_alert_transitions_alert_id"), "alert_transitions", ["alert_id"])
    op.create_table(
        "silences",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("matchers", JSON, nullable=False),
        _utc("starts_at"),
        _utc("ends_at"),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        _utc("created_at"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_silences")),
    )
    op.create_index(op.f("ix_silences_ends_at"), "silences", ["ends_at"])
    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("alert_id", sa.Uuid(), nullable=False),
        sa.Column("transition_id", sa.Integer(), nullable=True),
        sa.Column("notifier", sa.String(length=200), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        _utc("next_attempt_at"),
        sa.Column("last_error", sa.Text(), nullable=True),
        _utc("created_at"),
        _utc("sent_at", nullable=True),
        sa.ForeignKeyConstraint(
            ["alert_id"], ["alerts.id"], name=op.f("fk_deliveries_alert_id_alerts")
        ),
        sa.ForeignKeyConstraint(
            ["transition_id"],
            ["alert_transitions.id"],
            name=op.f("fk_deliveries_transition_id_alert_transitions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deliveries")),
    )
    op.create_index(op.f("ix_deliveries_alert_id"), "deliveries", ["alert_id"])
    op.create_index(
        op.f("ix_deliveries_status_next_attempt_at"), "deliveries", ["status", "next_attempt_at"]
    )
    op.create_index(
        op.f("ix_deliveries_transition_id_notifier"),
        "deliveries",
        ["transition_id", "notifier"],
        unique=True,
    )
    op.create_table(
        "detector_state",
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("vantage", sa.String(length=200), nullable=False),
        sa.Column("tail_score", sa.Double(), nullable=False),
        sa.Column("tail_runs", sa.Integer(), nullable=False),
        sa.Column("last_run_id", sa.String(length=64), nullable=True),
        _utc("rebase_at", nullable=True),
        sa.Column("excluded", JSON, nullable=False),
        _utc("updated_at"),
        sa.PrimaryKeyConstraint("target", "vantage", name=op.f("pk_detector_state")),
    )


def downgrade() -> None:
    op.drop_table("detector_state")
    op.drop_index(op.f("ix_deliveries_transition_id_notifier"), table_name="deliveries")
    op.drop_index(op.f("ix_deliveries_status_next_attempt_at"), table_name="deliveries")
    op.drop_index(op.f("ix_deliveries_alert_id"), table_name="deliveries")
    op.drop_table("deliveries")
    op.drop_index(op.f("ix_silences_ends_at"), table_name="silences")
    op.drop_table("silences")
    op.drop_index(op.f("ix_alert_transitions_alert_id"), table_name="alert_transitions")
    op.drop_table("alert_transitions")
    op.drop_index(op.f("ix_alerts_target_state"), table_name="alerts")
    op.drop_table("alerts")
