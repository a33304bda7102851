"""Alerts, transitions, notifications and detector state as rows, and back: the
conversions ``AlertEngine`` writes in its transactions and reads on a restart."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.alerts.evaluate import VantageState
from app.alerts.identity import Alert, Identity, Transition
from app.alerts.state import Cooling, Position, State
from app.analysis.tail import TailState
from app.store.alertreads import AlertRecord
from app.store.models import (
    AlertRow,
    AlertTransitionRow,
    DeliveryRow,
    DetectorStateRow,
    TargetRow,
)

PENDING, SILENCED = "pending", "silenced"
OPEN_STATES = (State.PENDING.value, State.FIRING.value, State.RECOVERING.value)
ENDS_AFTER_INTERVALS = 4  # a firing alert not refreshed in this many intervals has ended
DEFAULT_INTERVAL_S = 900.0  # targets known only by their runs (imports, agents)


def notified(transition: Transition) -> bool:
    """Into firing (or still firing: a refresh), or resolved after having fired."""
    if transition.after is State.FIRING:
        return True
    return transition.after is State.RESOLVED and transition.before in (
        State.FIRING,
        State.RECOVERING,
    )


def save_alert(session: Session, alert: Alert, transition: Transition, now: datetime) -> None:
    row = session.get(AlertRow, uuid.UUID(alert.id))
    if row is None:
        identity = alert.identity
        row = AlertRow(
            id=uuid.UUID(alert.id),
            kind=identity.kind,
            target=identity.target,
            vantage=identity.vantage,
            scope=identity.scope,
            from_phase=identity.from_phase,
            to_phase=identity.to_phase,
            severity=identity.severity,
            opened_at=alert.opened_at,
        )
        session.add(row)
    row.state = transition.after.value
    row.streak = alert.position.streak if alert.position.state is transition.after else 0
    row.fired_at, row.resolved_at = alert.fired_at, alert.resolved_at
    row.summary, row.numbers = transition.summary, transition.numbers
    row.updated_at = now


def save_transition(session: Session, transition: Transition) -> AlertTransitionRow:
    row = AlertTransitionRow(
        alert_id=uuid.UUID(transition.alert_id),
        at=transition.at,
        before=transition.before.value,
        after=transition.after.value,
        summary=transition.summary,
        numbers=transition.numbers,
        acknowledged=transition.acknowledged,
    )
    session.add(row)
    session.flush()  # its id, for the deliveries
    return row


def payload(transition: Transition, alert: Alert, until: datetime) -> dict[str, Any]:
    """``Transition.to_json()`` plus the stable labels and the ``ends_at`` hint."""
    return transition.to_json() | {
        "labels": transition.identity.labels(),
        "alert_id": alert.id,
        "ends_at": _iso(until, zulu=True),
    }


def delivery(
    alert: Alert,
    step: AlertTransitionRow | None,
    notifier: str,
    payload: dict[str, Any],
    silenced: bool,
    now: datetime,
) -> DeliveryRow:
    return DeliveryRow(
        alert_id=uuid.UUID(alert.id),
        transition_id=None if step is None else step.id,
        notifier=notifier,
        payload=payload,
        status=SILENCED if silenced else PENDING,
        attempts=0,
        next_attempt_at=now,
        created_at=now,
    )


def ends_at(session: Session, transition: Transition, now: datetime) -> datetime:
    """Alertmanager's ``endsAt`` hint: while firing, ``ENDS_AFTER_INTERVALS`` of the
    target's intervals from now (a refresh moves it on); once resolved, the resolution."""
    if transition.after is not State.FIRING:
        return transition.at
    interval = session.scalar(
        select(TargetRow.interval_s).where(TargetRow.name == transition.identity.target)
    )
    seconds = interval if interval else DEFAULT_INTERVAL_S
    return now + ENDS_AFTER_INTERVALS * timedelta(seconds=seconds)


def note_acknowledgement(session: Session, alert_id: uuid.UUID, note: dict[str, Any]) -> None:
    """``note`` (who acknowledged, and why) in the numbers of the alert's latest
    acknowledgement transition; nothing when it has none."""
    step = session.scalars(
        select(AlertTransitionRow)
        .where(AlertTransitionRow.alert_id == alert_id, AlertTransitionRow.acknowledged)
        .order_by(AlertTransitionRow.id.desc())
        .limit(1)
    ).first()
    if step is not None:
        step.numbers = {**step.numbers, **note}


def save_vantage(
    session: Session, target: str, vantage: str, state: VantageState, now: datetime
) -> None:
    row = session.get(DetectorStateRow, (target, vantage))
    if row is None:
        row = DetectorStateRow(target=target, vantage=vantage)
        session.add(row)
    row.tail_score = float(state.tail.scores[0])
    row.tail_runs = state.tail.runs
    row.last_run_id = state.last_run
    row.rebase_at = state.rebase_at
    row.excluded = {"spans": [[_iso(start), _iso(end)] for start, end in state.excluded]}
    row.updated_at = now


def cooling_of(row: AlertRow) -> Cooling:
    """A resolved alert held back from firing again: quiet since it resolved (what its
    condition did since is not stored, so a restart can only lengthen the hold)."""
    return Cooling(quiet_since=row.resolved_at or row.updated_at)


def identity_of(row: AlertRow | AlertRecord) -> Identity:
    return Identity(
        row.kind, row.target, row.vantage, row.scope, row.from_phase, row.to_phase, row.severity
    )


def alert_of(row: AlertRow) -> Alert:
    identity = identity_of(row)
    return Alert(
        id=str(row.id),
        identity=identity,
        # A recovering alert's streak began at its last change at the latest.
        position=Position(State(row.state), row.streak, row.updated_at),
        opened_at=row.opened_at,
        fired_at=row.fired_at,
        resolved_at=row.resolved_at,
        summary=row.summary,
        numbers=dict(row.numbers),
    )


def vantage_of(row: DetectorStateRow) -> VantageState:
    spans = row.excluded.get("spans", [])
    return VantageState(
        tail=TailState((row.tail_score,), row.tail_runs),
        last_run=row.last_run_id,
        rebase_at=row.rebase_at,
        excluded=[(_parse(start), _parse(end) if end else None) for start, end in spans],
    )


def _iso(value: datetime | None, zulu: bool = False) -> str | None:
    if value is None:
        return None
    text = value.astimezone(UTC).isoformat()
    return text.replace("+00:00", "Z") if zulu else text


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
