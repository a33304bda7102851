"""Alerts as readers see them: pydantic views over the alert rows, shared by the API and the
dashboard, so both show the same alert the same way.

Lists are newest first (by when the episode opened) and paged by a keyset cursor
(app.store.reads.paging), which stays correct while new alerts open.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field

from app.alerts.rows import OPEN_STATES, identity_of
from app.alerts.summary import summarize_alert
from app.store.db import Session
from app.store.reads.alertreads import (
    AlertFilter,
    AlertRecord,
    TransitionRecord,
    alert_by_id,
    alerts_count,
    alerts_in,
    alerts_page,
    transitions_of,
)

STATES = ("pending", "firing", "recovering", "resolved", "inactive")
OPEN = "open"  # a pseudo-state: pending, firing or recovering
# Another: every episode but those that ended without firing (inactive), which are no news.
FIRED = "fired"
# Most severe first: what a row on the overview shows when a series has several alerts.
_SEVERITY_RANK = {"critical": 0, "warning": 1}
_STATE_RANK = {"firing": 0, "recovering": 1, "pending": 2}

Item = TypeVar("Item")


class Page(BaseModel, Generic[Item]):
    items: list[Item]
    next_cursor: str | None = Field(
        None, description="Pass as ?cursor= for the next page; null on the last page."
    )
    total: int | None = Field(None, description="Items matching the filter, over every page.")


class AlertView(BaseModel):
    id: str
    kind: str
    target: str
    vantage: str | None = Field(description="null for a change seen across vantages")
    scope: str
    from_phase: str | None
    to_phase: str | None
    severity: str
    state: str
    open: bool
    streak: int
    opened_at: datetime
    fired_at: datetime | None
    resolved_at: datetime | None
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    summary: str
    numbers: dict[str, Any]
    labels: dict[str, str] = Field(description="what silences match against")
    updated_at: datetime


class TransitionView(BaseModel):
    at: datetime
    before: str
    after: str
    summary: str
    numbers: dict[str, Any]
    acknowledged: bool


class AlertDetail(AlertView):
    explanation: str = Field(description="one sentence saying what changed, with its numbers")
    transitions: list[TransitionView] = Field(description="oldest first")


def list_alerts(
    session: Session,
    *,
    state: str | None = None,
    target: str | None = None,
    vantage: str | None = None,
    kind: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> Page[AlertView]:
    """Alerts newest first; ``state`` may be ``open`` or ``fired``. ``BadCursor`` for a
    foreign cursor."""
    pseudo = {OPEN: OPEN_STATES, FIRED: tuple(s for s in STATES if s != "inactive")}
    states = pseudo.get(state or "", None if state is None else (state,))
    where = AlertFilter(states, target, vantage, kind)
    rows, after = alerts_page(session, where, cursor, limit)
    return Page[AlertView](
        items=[alert_view(row) for row in rows],
        next_cursor=after,
        total=alerts_count(session, where),
    )


def alert_detail(session: Session, alert_id: str | uuid.UUID) -> AlertDetail | None:
    """One alert with its transitions oldest first; None for an unknown (or malformed) id."""
    key = _uuid(alert_id)
    row = alert_by_id(session, key) if key is not None else None
    if row is None:
        return None
    steps = transitions_of(session, row.id)
    return AlertDetail(
        **alert_view(row).model_dump(),
        explanation=explanation(row),
        transitions=[transition_view(step) for step in steps],
    )


def open_alerts_by_series(session: Session) -> dict[tuple[str, str | None], list[AlertView]]:
    """Every open alert of each (target, vantage), the most severe first; vantage None is an
    alert seen across vantages, which concerns every vantage of its target."""
    found: dict[tuple[str, str | None], list[AlertRecord]] = {}
    for row in alerts_in(session, OPEN_STATES):
        found.setdefault((row.target, row.vantage), []).append(row)
    return {
        key: [alert_view(row) for row in sorted(rows, key=_precedence)]
        for key, rows in found.items()
    }


# Conversions -------------------------------------------------------------------------------


def alert_view(row: AlertRecord) -> AlertView:
    return AlertView(
        id=str(row.id),
        kind=row.kind,
        target=row.target,
        vantage=row.vantage,
        scope=row.scope,
        from_phase=row.from_phase,
        to_phase=row.to_phase,
        severity=row.severity,
        state=row.state,
        open=row.state in OPEN_STATES,
        streak=row.streak,
        opened_at=row.opened_at,
        fired_at=row.fired_at,
        resolved_at=row.resolved_at,
        acknowledged_at=row.acknowledged_at,
        acknowledged_by=row.acknowledged_by,
        summary=row.summary,
        numbers=dict(row.numbers),
        labels=identity_of(row).labels(),
        updated_at=row.updated_at,
    )


def transition_view(row: TransitionRecord) -> TransitionView:
    return TransitionView(
        at=row.at,
        before=row.before,
        after=row.after,
        summary=row.summary,
        numbers=dict(row.numbers),
        acknowledged=row.acknowledged,
    )


def explanation(row: AlertRecord) -> str:
    # The stored summary was written when the numbers were; older rows may lack one.
    return row.summary or summarize_alert(identity_of(row), dict(row.numbers))


# Queries and cursors -----------------------------------------------------------------------


def _precedence(row: AlertRecord) -> tuple[int, int, float]:
    return (
        _SEVERITY_RANK.get(row.severity, len(_SEVERITY_RANK)),
        _STATE_RANK.get(row.state, len(_STATE_RANK)),
        -row.opened_at.timestamp(),
    )


def _uuid(value: str | uuid.UUID) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value)
    except ValueError:
        return None
