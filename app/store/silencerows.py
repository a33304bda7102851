"""The silences table, as plain values: what app.alerts.silences validates and matches."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.models import SilenceRow


@dataclass(frozen=True, slots=True)
class SilenceRecord:
    id: uuid.UUID
    matchers: dict[str, Any]  # {"matchers": [{"name", "value", "regex", "equal"}, ...]}
    starts_at: datetime
    ends_at: datetime
    created_by: str
    comment: str
    created_at: datetime

    @classmethod
    def of(cls, row: SilenceRow) -> SilenceRecord:
        return cls(
            row.id,
            dict(row.matchers),
            row.starts_at,
            row.ends_at,
            row.created_by,
            row.comment,
            row.created_at,
        )


def insert_silence(session: Session, silence: SilenceRecord) -> SilenceRecord:
    row = SilenceRow(
        id=silence.id,
        matchers=silence.matchers,
        starts_at=silence.starts_at,
        ends_at=silence.ends_at,
        created_by=silence.created_by,
        comment=silence.comment,
        created_at=silence.created_at,
    )
    session.add(row)
    session.flush()
    return SilenceRecord.of(row)


def silence_by_id(session: Session, silence_id: uuid.UUID) -> SilenceRecord | None:
    row = session.get(SilenceRow, silence_id)
    return None if row is None else SilenceRecord.of(row)


def silences_in_effect(session: Session, now: datetime) -> list[SilenceRecord]:
    query = select(SilenceRow).where(SilenceRow.starts_at <= now, SilenceRow.ends_at > now)
    return [SilenceRecord.of(row) for row in session.scalars(query)]


def all_silences(session: Session, now: datetime, active_only: bool) -> list[SilenceRecord]:
    """Silences, soonest to end first (then oldest, then by id: one order, that a page's
    cursor can follow); ``active_only``: those in effect at ``now``."""
    query = select(SilenceRow).order_by(SilenceRow.ends_at, SilenceRow.created_at, SilenceRow.id)
    if active_only:
        query = query.where(SilenceRow.starts_at <= now, SilenceRow.ends_at > now)
    return [SilenceRecord.of(row) for row in session.scalars(query)]


def end_silence(session: Session, silence_id: uuid.UUID, now: datetime) -> SilenceRecord | None:
    """End a silence now (one that already ended stays as it was); None if there is none."""
    row = session.get(SilenceRow, silence_id)
    if row is None:
        return None
    if row.ends_at > now:
        row.starts_at, row.ends_at = min(row.starts_at, now), now
    return SilenceRecord.of(row)
