"""Alerts, transitions, notifications and detector state as the store's plain values, and
back: the conversions ``AlertEngine`` writes in its transactions and reads on a restart
(the rows themselves are app.store.alertwrites')."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from app.alerts.identity import Alert, Identity, Transition
from app.alerts.memory import DetectorMemory, Snapshot
from app.alerts.state import Cooling, Position, State
from app.analysis.tail import TailState
from app.store import alertwrites
from app.store.alertwrites import DetectorState
from app.store.db import Session, Sessions
from app.store.reads.alertreads import AlertRecord, TransitionRecord
from app.store.targets import interval_by_name

log = logging.getLogger("app.alerts.engine")  # where an alert's news was always logged

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


def log_announced(transitions: Iterable[Transition]) -> None:
    """One log line per change a person hears of: an alert fired, or resolved after firing
    (once it is stored; pending alerts and refreshes of a firing one are not news)."""
    for t in transitions:
        if not (t.moved and notified(t)):
            continue
        where = f"at {t.identity.vantage}" if t.identity.vantage else "across vantages"
        if t.after is State.FIRING:
            log.warning(
                "alert firing: %s %s %s: %s", t.identity.kind, t.identity.target, where, t.summary
            )
        else:
            how = "acknowledged" if t.acknowledged else "resolved"
            log.info(
                "alert %s: %s %s %s: %s", how, t.identity.kind, t.identity.target, where, t.summary
            )


def save_alert(session: Session, alert: Alert, transition: Transition, now: datetime) -> None:
    i = alert.identity
    streak = alert.position.streak if alert.position.state is transition.after else 0
    change = alertwrites.AlertChange(
        id=uuid.UUID(alert.id),
        identity=(i.kind, i.target, i.vantage, i.scope, i.from_phase, i.to_phase, i.severity),
        opened_at=alert.opened_at,
        state=transition.after.value,
        streak=streak,
        fired_at=alert.fired_at,
        resolved_at=alert.resolved_at,
        summary=transition.summary,
        numbers=transition.numbers,
        updated_at=now,
    )
    alertwrites.save_alert(session, change)


def save_transition(session: Session, transition: Transition) -> int:
    """The transition's row; its id, for the deliveries."""
    values = TransitionRecord(
        at=transition.at,
        before=transition.before.value,
        after=transition.after.value,
        summary=transition.summary,
        numbers=transition.numbers,
        acknowledged=transition.acknowledged,
    )
    return alertwrites.save_transition(session, uuid.UUID(transition.alert_id), values)


def payload(transition: Transition, alert: Alert, until: datetime) -> dict[str, Any]:
    """``Transition.to_json()`` plus the stable labels and the ``ends_at`` hint."""
    return transition.to_json() | {
        "labels": transition.identity.labels(),
        "alert_id": alert.id,
        "ends_at": _iso(until, zulu=True),
    }


def add_delivery(
    session: Session,
    alert: Alert,
    step: int | None,
    notifier: str,
    payload: dict[str, Any],
    silenced: bool,
    now: datetime,
) -> None:
    """An outbox row for ``notifier``, due now; ``step`` is its transition's id (None: a
    refresh). A silenced one is written all the same, for the audit trail."""
    status = SILENCED if silenced else PENDING
    values = alertwrites.DeliveryValues(uuid.UUID(alert.id), step, notifier, payload, status, now)
    alertwrites.add_delivery(session, values)


def ends_at(session: Session, transition: Transition, now: datetime) -> datetime:
    """Alertmanager's ``endsAt`` hint: while firing, ``ENDS_AFTER_INTERVALS`` of the
    target's intervals from now (a refresh moves it on); once resolved, the resolution."""
    if transition.after is not State.FIRING:
        return transition.at
    interval = interval_by_name(session, transition.identity.target)
    seconds = interval if interval else DEFAULT_INTERVAL_S
    return now + ENDS_AFTER_INTERVALS * timedelta(seconds=seconds)


def note_acknowledgement(session: Session, alert_id: uuid.UUID, note: dict[str, Any]) -> None:
    """``note`` (who acknowledged, and why) in the numbers of the alert's latest
    acknowledgement transition; nothing when it has none."""
    alertwrites.note_on_acknowledgement(session, alert_id, note)


def save_states(session: Session, states: Sequence[DetectorState]) -> None:
    alertwrites.save_detector_states(session.connection(), states)


def save_states_alone(sessions: Sessions, states: Sequence[DetectorState]) -> bool:
    """Detector states written for an evaluation that moved no alert: none, or in a
    statement of their own (``alertwrites.save_detector_states_alone``). False, nothing
    written, where that is not done."""
    return not states or alertwrites.save_detector_states_alone(sessions, states)


def state_of(target: str, vantage: str, memory: DetectorMemory, now: datetime) -> DetectorState:
    """``memory`` as its row: its own copy, which later changes to the memory leave as is."""
    spans = {"spans": [[_iso(start), _iso(end)] for start, end in memory.excluded]}
    return DetectorState(
        target,
        vantage,
        float(memory.tail.scores[0]),
        memory.tail.runs,
        memory.last_run,
        memory.rebase_at,
        spans,
        now,
        {name: list(values) for name, values in memory.cusums.items()},
    )


def cooling_of(row: AlertRecord) -> Cooling:
    """A resolved alert held back from firing again: quiet since it resolved (what its
    condition did since is not stored, so a restart can only lengthen the hold)."""
    return Cooling(quiet_since=row.resolved_at or row.updated_at)


def identity_of(row: AlertRecord) -> Identity:
    return Identity(
        row.kind, row.target, row.vantage, row.scope, row.from_phase, row.to_phase, row.severity
    )


def alert_of(row: AlertRecord) -> Alert:
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


def memory_of(row: DetectorState) -> DetectorMemory:
    spans = row.excluded.get("spans", [])
    return DetectorMemory(
        tail=TailState((row.tail_score,), row.tail_runs),
        last_run=row.last_run_id,
        rebase_at=row.rebase_at,
        excluded=[(_parse(start), _parse(end) if end else None) for start, end in spans],
        cusums={name: list(values) for name, values in row.cusums.items()},
    )


def snapshot_of(session: Session, target: str, cooling_since: datetime) -> Snapshot:
    """``target``'s memory as the database holds it: open alerts, those resolved since
    ``cooling_since`` (held back from firing again), each vantage's detector state, and
    the last round taken to have seen every vantage's last run (as a restart reads it)."""
    opened = alertwrites.alerts_opened_in(session, OPEN_STATES, target)
    resolved = alertwrites.resolved_since(session, State.RESOLVED.value, cooling_since, target)
    memories = {s.vantage: memory_of(s) for s in alertwrites.detector_states(session, target)}
    rounds = {v: m.last_run for v, m in memories.items() if m.last_run is not None}
    return Snapshot(
        target,
        {alert.identity: alert for alert in map(alert_of, opened)},
        {identity_of(row): cooling_of(row) for row in resolved},
        memories,
        rounds or None,
    )


def _iso(value: datetime | None, zulu: bool = False) -> str | None:
    if value is None:
        return None
    text = value.astimezone(UTC).isoformat()
    return text.replace("+00:00", "Z") if zulu else text


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
