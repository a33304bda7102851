"""The alert engine's rows, as plain values: an alert's episode, its transitions, the
outbox rows written with them (one transaction: app.alerts.engine), and the detector state
each (target, vantage) carries between runs; and all of it read back at a restart."""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from app.store import outbox, wakeups
from app.store.db import Sessions, autocommit, json_dumps_text
from app.store.models import AlertRow, AlertTransitionRow, DeliveryRow, DetectorStateRow
from app.store.rawdriver import run_driver
from app.store.reads.alertreads import AlertRecord, TransitionRecord


@dataclass(frozen=True, slots=True)
class AlertChange:
    """An episode as a transition leaves it; its identity is written only when it opens."""

    id: uuid.UUID
    identity: tuple[str, str, str | None, str, str | None, str | None, str]  # kind … severity
    opened_at: datetime
    state: str
    streak: int
    fired_at: datetime | None
    resolved_at: datetime | None
    summary: str
    numbers: dict[str, Any]
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class DeliveryValues:
    alert_id: uuid.UUID
    transition_id: int | None  # None: a refresh
    notifier: str
    payload: dict[str, Any]
    status: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class DetectorState:
    target: str
    vantage: str
    tail_score: float
    tail_runs: int
    last_run_id: str | None
    rebase_at: datetime | None
    excluded: dict[str, Any]  # {"spans": [[start, end or null], ...]}
    updated_at: datetime
    cusums: dict[str, list[float]] = field(default_factory=dict)  # by detector name


_IDENTITY = ("kind", "target", "vantage", "scope", "from_phase", "to_phase", "severity")


def save_alert(session: Session, change: AlertChange) -> None:
    row = session.get(AlertRow, change.id)
    if row is None:
        row = AlertRow(id=change.id, opened_at=change.opened_at)
        for name, value in zip(_IDENTITY, change.identity, strict=True):
            setattr(row, name, value)
        session.add(row)
    row.state, row.streak = change.state, change.streak
    row.fired_at, row.resolved_at = change.fired_at, change.resolved_at
    row.summary, row.numbers, row.updated_at = change.summary, change.numbers, change.updated_at


def save_transition(session: Session, alert_id: uuid.UUID, values: TransitionRecord) -> int:
    """The transition's row; its id, for the deliveries."""
    row = AlertTransitionRow(
        alert_id=alert_id,
        at=values.at,
        before=values.before,
        after=values.after,
        summary=values.summary,
        numbers=values.numbers,
        acknowledged=values.acknowledged,
    )
    session.add(row)
    session.flush()
    return row.id


def add_delivery(session: Session, values: DeliveryValues) -> None:
    """An outbox row, due at once (``created_at``) with no attempt yet; one to be sent is
    announced, so every replica's sender hears of it at commit (``app.store.wakeups``)."""
    session.add(
        DeliveryRow(
            alert_id=values.alert_id,
            transition_id=values.transition_id,
            notifier=values.notifier,
            payload=values.payload,
            status=values.status,
            attempts=0,
            next_attempt_at=values.created_at,
            created_at=values.created_at,
        )
    )
    if values.status == outbox.PENDING:
        wakeups.announce(session, wakeups.OUTBOX)


def mark_acknowledged(session: Session, alert_id: uuid.UUID, now: datetime, by: str) -> None:
    row = session.get(AlertRow, alert_id)
    assert row is not None
    row.acknowledged_at, row.acknowledged_by = now, by


def save_detector_state(connection: Connection, state: DetectorState) -> None:
    """One upsert (a read and an update through the ORM cost it a round trip and the unit
    of work)."""
    upsert = _STATE_UPSERTS[connection.dialect.name]
    if connection.dialect.name == "postgresql":  # once a run: driver SQL (app.store.rawdriver)
        run_driver(connection, upsert, _state_values(state))
    else:
        connection.execute(upsert, _state_values(state))


def save_detector_states(connection: Connection, states: Sequence[DetectorState]) -> None:
    """Upserts of ``states`` (distinct keys); on PostgreSQL one statement for them all (an
    evaluation of a target seen from 20 vantages writes most of them: their shared CUSUMs)."""
    if len(states) > 1 and connection.dialect.name == "postgresql" and _plain(states):
        rows = [_state_values(state) for state in states]
        connection.exec_driver_sql(_STATES_UPSERT, {"rows": json_dumps_text(rows)})
        return
    for state in states:
        save_detector_state(connection, state)


def _plain(states: Sequence[DetectorState]) -> bool:
    """Every score one that JSON holds as it is (it has no NaN or infinity)."""
    return all(math.isfinite(state.tail_score) for state in states)


def _state_values(state: DetectorState) -> dict[str, Any]:
    return {
        "target": state.target,
        "vantage": state.vantage,
        "tail_score": state.tail_score,
        "tail_runs": state.tail_runs,
        "last_run_id": state.last_run_id,
        "rebase_at": state.rebase_at,
        "excluded": state.excluded,
        "updated_at": state.updated_at,
        "cusums": {name: list(values) for name, values in state.cusums.items()},
    }


def save_detector_states_alone(sessions: Sessions, states: Sequence[DetectorState]) -> bool:
    """``save_detector_states`` as its own transaction, where that is one statement: on
    PostgreSQL in autocommit (atomic alone; spared a BEGIN and a COMMIT round trip). False,
    nothing written, where it is not (states JSON cannot hold), and on SQLite, where
    writers go in turn under the write lock (``write_transaction``)."""
    engine: Engine = sessions.kw["bind"]
    if engine.dialect.name != "postgresql" or not _plain(states):
        return False
    with autocommit(engine) as connection:
        save_detector_states(connection, states)
    return True


_STATE_KEY = ["target", "vantage"]
_STATE_COLUMNS = (
    "target",
    "vantage",
    "tail_score",
    "tail_runs",
    "last_run_id",
    "rebase_at",
    "excluded",
    "updated_at",
    "cusums",
)


# Several states as one JSON array of rows that the server unpacks (as the rollups'
# writes do, app.store.rollups.pgrows): one statement and one parameter whatever their number.
_STATES_UPSERT = """
    INSERT INTO detector_state (target, vantage, tail_score, tail_runs, last_run_id, rebase_at,
                                excluded, updated_at, cusums)
    SELECT k.target, k.vantage, k.tail_score, k.tail_runs, k.last_run_id, k.rebase_at,
           k.excluded, k.updated_at, k.cusums
    FROM jsonb_to_recordset(%(rows)s::jsonb)
         AS k(target text, vantage text, tail_score float8, tail_runs integer,
              last_run_id text, rebase_at timestamptz, excluded jsonb, updated_at timestamptz,
              cusums jsonb)
    ON CONFLICT (target, vantage) DO UPDATE SET
        tail_score = EXCLUDED.tail_score, tail_runs = EXCLUDED.tail_runs,
        last_run_id = EXCLUDED.last_run_id, rebase_at = EXCLUDED.rebase_at,
        excluded = EXCLUDED.excluded, updated_at = EXCLUDED.updated_at, cusums = EXCLUDED.cusums"""


def _state_upsert(insert: Any) -> Any:
    """The upsert, built once per dialect: an evaluation only binds its values (building
    and caching the statement anew each time was most of its cost, bench/fleet.py)."""
    table = DetectorStateRow.__table__.c
    binds = {name: bindparam(name, type_=table[name].type) for name in _STATE_COLUMNS}
    statement = insert(DetectorStateRow).values(binds)
    kept = {name: statement.excluded[name] for name in _STATE_COLUMNS if name not in _STATE_KEY}
    return statement.on_conflict_do_update(index_elements=_STATE_KEY, set_=kept)


_STATE_UPSERTS = {"postgresql": _state_upsert(pg_insert), "sqlite": _state_upsert(sqlite_insert)}


def detector_states(session: Session, target: str | None = None) -> list[DetectorState]:
    """Every (target, vantage)'s state, or ``target``'s alone."""
    query = select(DetectorStateRow)
    if target is not None:
        query = query.where(DetectorStateRow.target == target)
    return [
        DetectorState(
            r.target,
            r.vantage,
            r.tail_score,
            r.tail_runs,
            r.last_run_id,
            r.rebase_at,
            dict(r.excluded),
            r.updated_at,
            {name: [float(v) for v in values] for name, values in (r.cusums or {}).items()},
        )
        for r in session.scalars(query)
    ]


def alerts_opened_in(
    session: Session, states: tuple[str, ...], target: str | None = None
) -> list[AlertRecord]:
    """The alerts in any of ``states`` (of ``target`` alone, if given), oldest opened first."""
    query = select(AlertRow).where(AlertRow.state.in_(states)).order_by(AlertRow.opened_at)
    if target is not None:
        query = query.where(AlertRow.target == target)
    return [AlertRecord.of(row) for row in session.scalars(query)]


def resolved_since(
    session: Session, state: str, since: datetime, target: str | None = None
) -> list[AlertRecord]:
    """Alerts in ``state`` (resolved) that got there at ``since`` or later (of ``target``
    alone, if given), oldest first."""
    query = (
        select(AlertRow)
        .where(AlertRow.state == state, AlertRow.resolved_at >= since)
        .order_by(AlertRow.resolved_at)
    )
    if target is not None:
        query = query.where(AlertRow.target == target)
    return [AlertRecord.of(row) for row in session.scalars(query)]


def note_on_acknowledgement(session: Session, alert_id: uuid.UUID, note: dict[str, Any]) -> None:
    """``note`` in the numbers of the alert's latest acknowledgement transition, if any."""
    step = session.scalars(
        select(AlertTransitionRow)
        .where(AlertTransitionRow.alert_id == alert_id, AlertTransitionRow.acknowledged)
        .order_by(AlertTransitionRow.id.desc())
        .limit(1)
    ).first()
    if step is not None:
        step.numbers = {**step.numbers, **note}
