"""The outbox as the sender reads and writes it: claim the next due delivery, then write
what its attempt came to. Rows come and go as plain values; a row that cannot be one (a
payload that is not an object) is ``UnreadableDelivery``, for the sender to set aside."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Exists, Select, bindparam, exists, func, select, update
from sqlalchemy.orm import Session, aliased

from app.store.models import AlertRow, DeliveryRow

PENDING = "pending"


@dataclass(frozen=True, slots=True)
class DueDelivery:
    id: int
    notifier: str
    payload: dict[str, Any]
    attempts: int
    created_at: datetime
    transition_id: int | None
    fired_at: datetime | None  # the alert's


class UnreadableDelivery(Exception):
    """A due row that is no delivery: its id, and why."""

    def __init__(self, delivery_id: int, reason: str) -> None:
        super().__init__(f"delivery {delivery_id}: {reason}")
        self.delivery_id = delivery_id
        self.reason = reason


def _waits_behind_older() -> Exists:
    """A row's older pending delivery of the same alert to the same notifier: it goes first."""
    older = aliased(DeliveryRow)
    return exists().where(
        older.alert_id == DeliveryRow.alert_id,
        older.notifier == DeliveryRow.notifier,
        older.status == PENDING,
        older.id < DeliveryRow.id,
    )


def _due() -> Select[int, str, Any, int, datetime, int | None, datetime]:
    """The claim's statement, built once (the sender asks every few seconds, nearly always
    for nothing: building it was most of that work)."""
    return (
        select(
            DeliveryRow.id,
            DeliveryRow.notifier,
            DeliveryRow.payload,
            DeliveryRow.attempts,
            DeliveryRow.created_at,
            DeliveryRow.transition_id,
            AlertRow.fired_at,
        )
        .join(AlertRow, AlertRow.id == DeliveryRow.alert_id)
        .where(DeliveryRow.status == PENDING, DeliveryRow.next_attempt_at <= bindparam("now"))
        .where(~_waits_behind_older())
        .order_by(DeliveryRow.id)
        .limit(1)
        .with_for_update(skip_locked=True, of=DeliveryRow)
    )


_DUE = _due()
_DUE_PASSING_OVER = _DUE.where(DeliveryRow.id.not_in(bindparam("passed", expanding=True)))


def claim_due(
    session: Session, now: datetime, passed_over: Collection[int] = ()
) -> DueDelivery | None:
    """The oldest due pending row whose alert has no older pending row for its notifier,
    locked for this transaction where the database can (PostgreSQL: SKIP LOCKED); never
    one of ``passed_over`` (the sender's quarantine)."""
    if passed_over:
        params = {"now": now, "passed": list(passed_over)}
        row = session.execute(_DUE_PASSING_OVER, params).one_or_none()
    else:
        row = session.execute(_DUE, {"now": now}).one_or_none()
    if row is None:
        return None
    if not isinstance(row.payload, dict):
        raise UnreadableDelivery(row.id, f"its payload is {row.payload!r:.80}, not an object")
    return DueDelivery(
        row.id,
        row.notifier,
        dict(row.payload),
        row.attempts,
        row.created_at,
        row.transition_id,
        row.fired_at,
    )


def _next() -> Select[datetime]:
    """When the first pending row that waits behind no older one falls due."""
    return select(func.min(DeliveryRow.next_attempt_at)).where(
        DeliveryRow.status == PENDING, ~_waits_behind_older()
    )


_NEXT = _next()
_NEXT_PASSING_OVER = _NEXT.where(DeliveryRow.id.not_in(bindparam("passed", expanding=True)))


def next_due(session: Session, passed_over: Collection[int] = ()) -> datetime | None:
    """When the next row ``claim_due`` could take falls due (None: no row is pending); in
    the past when one is due now (or locked by another sender)."""
    if passed_over:
        return session.scalar(_NEXT_PASSING_OVER, {"passed": list(passed_over)})
    return session.scalar(_NEXT)


def finish_attempt(session: Session, delivery_id: int, values: dict[str, Any]) -> bool:
    """Write ``values`` on the row if it is still pending; False if someone else had it."""
    statement = (
        update(DeliveryRow)
        .where(DeliveryRow.id == delivery_id, DeliveryRow.status == PENDING)
        .values(**values)
    )
    return bool(session.execute(statement).rowcount == 1)  # type: ignore[attr-defined]
