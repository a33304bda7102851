"""The alert tables as readers ask for them (the API, the dashboard), as plain values.

Lists are newest first by when the episode opened, paged by a keyset cursor
(app.store.reads.paging), which stays correct while new alerts open.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.store.models import AlertRow, AlertTransitionRow
from app.store.reads.paging import Keyset, count_of, keyset_page

ALERTS = Keyset((AlertRow.opened_at, AlertRow.id), (uuid.UUID,))


@dataclass(frozen=True, slots=True)
class AlertRecord:
    """One alert episode as stored (the columns of ``alerts``)."""

    id: uuid.UUID
    kind: str
    target: str
    vantage: str | None
    scope: str
    from_phase: str | None
    to_phase: str | None
    severity: str
    state: str
    streak: int
    opened_at: datetime
    fired_at: datetime | None
    resolved_at: datetime | None
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    summary: str
    numbers: dict[str, Any]
    updated_at: datetime

    @classmethod
    def of(cls, row: AlertRow) -> AlertRecord:
        values = {f.name: getattr(row, f.name) for f in fields(cls)}
        return cls(**values | {"numbers": dict(row.numbers)})


@dataclass(frozen=True, slots=True)
class TransitionRecord:
    at: datetime
    before: str
    after: str
    summary: str
    numbers: dict[str, Any]
    acknowledged: bool


@dataclass(frozen=True, slots=True)
class AlertFilter:
    """Which alerts a list holds; None: any. ``states``: any of them."""

    states: Sequence[str] | None = None
    target: str | None = None
    vantage: str | None = None
    kind: str | None = None


def alerts_page(
    session: Session, where: AlertFilter, cursor: str | None, limit: int
) -> tuple[list[AlertRecord], str | None]:
    """Alerts newest first, and the next page's cursor. ``BadCursor`` for a foreign one."""
    rows, after = keyset_page(
        session, _filtered(where), ALERTS, cursor, limit, lambda r: (r[0].opened_at, r[0].id)
    )
    return [AlertRecord.of(row) for (row,) in rows], after


def alerts_count(session: Session, where: AlertFilter) -> int:
    """How many alerts ``where`` holds over every page."""
    return count_of(session, _filtered(where))


def alert_by_id(session: Session, alert_id: uuid.UUID) -> AlertRecord | None:
    row = session.get(AlertRow, alert_id)
    return None if row is None else AlertRecord.of(row)


def transitions_of(session: Session, alert_id: uuid.UUID) -> list[TransitionRecord]:
    """An alert's transitions, oldest first."""
    steps = session.scalars(
        select(AlertTransitionRow)
        .where(AlertTransitionRow.alert_id == alert_id)
        .order_by(AlertTransitionRow.at, AlertTransitionRow.id)
    )
    return [
        TransitionRecord(s.at, s.before, s.after, s.summary, dict(s.numbers), s.acknowledged)
        for s in steps
    ]


def alerts_in(session: Session, states: Sequence[str]) -> list[AlertRecord]:
    rows = session.scalars(select(AlertRow).where(AlertRow.state.in_(states)))
    return [AlertRecord.of(row) for row in rows]


def _filtered(where: AlertFilter) -> Select[AlertRow]:
    query = select(AlertRow)
    if where.states is not None:
        query = query.where(AlertRow.state.in_(where.states))
    for column, value in (
        (AlertRow.target, where.target),
        (AlertRow.kind, where.kind),
        (AlertRow.vantage, where.vantage),
    ):
        if value is not None:
            query = query.where(column == value)
    return query
