"""The maintenance_windows table (windows made through the API; the targets file's are not
stored), as plain values: what app.analysis.maintenance reads.

The row class lives here, not in app.store.models (which is at its size limit);
app/store/__init__.py imports this module, so ``Base.metadata`` always has the table."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import String, Text, Uuid, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from app.store.models import Base


class MaintenanceRow(Base):
    """A maintenance window: its spec (app.analysis.maintenance.MaintenanceWindow) as JSON."""

    __tablename__ = "maintenance_windows"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    spec: Mapped[dict[str, Any]]
    created_by: Mapped[str] = mapped_column(String(200))
    comment: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime]


@dataclass(frozen=True, slots=True)
class MaintenanceRecord:
    id: uuid.UUID
    name: str
    spec: dict[str, Any]
    created_by: str
    comment: str
    created_at: datetime

    @classmethod
    def of(cls, row: MaintenanceRow) -> MaintenanceRecord:
        return cls(row.id, row.name, dict(row.spec), row.created_by, row.comment, row.created_at)


def insert_window(session: Session, record: MaintenanceRecord) -> MaintenanceRecord:
    row = MaintenanceRow(
        id=record.id,
        name=record.name,
        spec=record.spec,
        created_by=record.created_by,
        comment=record.comment,
        created_at=record.created_at,
    )
    session.add(row)
    session.flush()
    return MaintenanceRecord.of(row)


def all_windows(session: Session) -> list[MaintenanceRecord]:
    query = select(MaintenanceRow).order_by(MaintenanceRow.created_at, MaintenanceRow.id)
    return [MaintenanceRecord.of(row) for row in session.scalars(query)]


def delete_window(session: Session, window_id: uuid.UUID) -> MaintenanceRecord | None:
    row = session.get(MaintenanceRow, window_id)
    if row is None:
        return None
    found = MaintenanceRecord.of(row)
    session.delete(row)
    return found
