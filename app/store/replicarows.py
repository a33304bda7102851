"""The replicas' leases and the evaluations one replica asks of another, on PostgreSQL.

``replicas``: one row a live ``serve`` process, renewed by it (``renew``): from when it
counts (``effective_at``) until when its lease runs (``expires_at``), both on the
database's clock, so every replica reads the same times. A replica that joins others
counts from ``settle_s`` after it first renewed (they all see it before it takes targets
over). One counts at once if no other lease already counts and no other replica holds
the leader lock (``app.store.leader``: until its own lease is read, the leader of a
database without this table yet probes everything). An expired lease counts as another
until it is forgotten (``FORGOTTEN_AFTER``): its replica may only be cut off, probing its
share into its spool (after an outage longer than a lease, every lease has expired). A
replica that stops gives its lease up (it expires as it was last renewed), which counts as
nobody's. Joins are taken one at a time (a transaction-level
advisory lock), so two replicas starting together never both find themselves alone.

``evaluations_due``: a (target, vantage) whose new run was stored by a replica that does
not own the target, waiting for the owner to evaluate it (``request``, ``claim``). One row
a (target, vantage): the evaluator reads the newest runs anyway, so requests coalesce.

The row classes live here, not in app.store.models (at its size limit); app/store/__init__.py
imports this module, so ``Base.metadata`` always has the tables.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, String, delete, func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Mapped, Session, mapped_column

from app.store import wakeups
from app.store.leader import LOCK_KEY
from app.store.models import Base

log = logging.getLogger(__name__)

JOIN_LOCK_KEY = 0x7068_6173_6577_7270 & 0x7FFF_FFFF_FFFF_FFFF  # "phasewrp"
FORGOTTEN_AFTER = timedelta(hours=1)  # a lease this long expired is deleted


class ReplicaRow(Base):
    """One ``serve`` process's lease (times on the database's clock)."""

    __tablename__ = "replicas"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    joined_at: Mapped[datetime]
    effective_at: Mapped[datetime]  # takes targets from here
    renewed_at: Mapped[datetime]
    expires_at: Mapped[datetime]  # and holds them until here, unless renewed


class EvaluationDueRow(Base):
    """A (target, vantage) with a run its owner has not evaluated yet."""

    __tablename__ = "evaluations_due"

    target: Mapped[str] = mapped_column(String(200), primary_key=True)
    vantage: Mapped[str] = mapped_column(String(200), primary_key=True)
    requested_at: Mapped[datetime]


@dataclass(frozen=True, slots=True)
class Lease:
    id: str
    effective_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Leases:
    """Every lease not long expired, and the database's time when they were read."""

    now: datetime
    leases: tuple[Lease, ...]


def renew(
    session: Session,
    replica: str,
    lease_s: float,
    settle_s: float,
    leading: bool,
    dead: Callable[[str], bool] = lambda _id: False,
) -> Leases:
    """Renew (or take) ``replica``'s lease; every lease as it stands after. ``leading``:
    this replica holds the leader lock. ``dead``: whether a lease's replica is known dead
    (a crashed process this one restarts: ``app.replicas.membership.predecessor_dead``);
    joining, such leases are ended first, as their replicas would have ended them stopping.

    A lease held (and not forgotten) is renewed in one statement, without the join lock:
    a renewal changes no lease's counting, which is all a join reads. Leases forgotten are
    deleted when a join or the read finds one."""
    now = _renewed(session, replica, lease_s)
    if now is None:
        now = _join(session, replica, lease_s, settle_s, leading, dead)
    rows = session.execute(_LEASES).all()
    cutoff = now - FORGOTTEN_AFTER
    if any(row.expires_at < cutoff for row in rows):
        session.execute(delete(ReplicaRow).where(ReplicaRow.expires_at < cutoff))
    kept = (row for row in rows if row.expires_at >= cutoff)
    return Leases(now, tuple(Lease(row.id, row.effective_at, row.expires_at) for row in kept))


_LEASES = select(ReplicaRow.id, ReplicaRow.effective_at, ReplicaRow.expires_at).order_by(
    ReplicaRow.id
)
# A lease held and not forgotten renewed at the database's time ``t.now``.
_UPDATE = (
    "UPDATE replicas"
    " SET renewed_at = t.now, expires_at = t.now + make_interval(secs => :lease_s)"
    " FROM t WHERE id = :id AND expires_at >= t.now - make_interval(secs => :forgotten_s)"
)
_NOW = "WITH t AS (SELECT clock_timestamp() AS now)"
_RENEW = text(f"{_NOW} {_UPDATE} RETURNING t.now")


def _renewal(replica: str, lease_s: float) -> dict[str, object]:
    return {"id": replica, "lease_s": lease_s, "forgotten_s": FORGOTTEN_AFTER.total_seconds()}


def _renewed(session: Session, replica: str, lease_s: float) -> datetime | None:
    """The database's time of the renewal of ``replica``'s lease; None if it has none (or
    one forgotten: it joins again, as a newcomer)."""
    now = session.scalar(_RENEW, _renewal(replica, lease_s))
    assert now is None or isinstance(now, datetime)
    return now


_RENEW_AND_READ = text(
    f"{_NOW}, renewed AS ({_UPDATE}"
    " RETURNING replicas.id, replicas.effective_at, replicas.expires_at, t.now)"
    " SELECT id, effective_at, expires_at, now FROM renewed"
    " UNION ALL SELECT r.id, r.effective_at, r.expires_at, NULL FROM replicas AS r, renewed"
    " WHERE r.id <> renewed.id ORDER BY id"
)


def renew_held(connection: Connection, replica: str, lease_s: float) -> Leases | None:
    """``renew`` of a lease held, in one statement (on a connection in autocommit, one
    round trip where ``renew`` takes four): the lease renewed and every lease read (the
    others as the statement found them, its own as renewed). None when ``replica`` holds
    no lease to renew (it joins) or a forgotten lease is read (deleted): ``renew`` then."""
    rows = connection.execute(_RENEW_AND_READ, _renewal(replica, lease_s)).all()
    now = next((row.now for row in rows if row.id == replica), None)
    if now is None or any(row.expires_at < now - FORGOTTEN_AFTER for row in rows):
        return None
    return Leases(now, tuple(Lease(row.id, row.effective_at, row.expires_at) for row in rows))


def _join(
    session: Session,
    replica: str,
    lease_s: float,
    settle_s: float,
    leading: bool,
    dead: Callable[[str], bool],
) -> datetime:
    """``replica``'s lease taken, one join at a time; the database's time then."""
    session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": JOIN_LOCK_KEY})
    now = _database_now(session)
    session.execute(delete(ReplicaRow).where(ReplicaRow.expires_at < now - FORGOTTEN_AFTER))
    _end_dead(session, now, dead)
    counting = select(func.count()).where(
        ReplicaRow.effective_at <= now, ReplicaRow.expires_at > ReplicaRow.renewed_at
    )
    first = session.scalar(counting) == 0 and (leading or not _led(session))
    effective = now if first else now + timedelta(seconds=settle_s)
    expires = now + timedelta(seconds=lease_s)
    session.add(ReplicaRow(id=replica, joined_at=now, effective_at=effective,
                           renewed_at=now, expires_at=expires))  # fmt: skip
    session.flush()
    return now


def _end_dead(session: Session, now: datetime, dead: Callable[[str], bool]) -> list[str]:
    """End the leases not given up yet whose replicas ``dead`` says are gone; their ids."""
    held = select(ReplicaRow).where(ReplicaRow.expires_at > ReplicaRow.renewed_at)
    ended = []
    for row in session.scalars(held):
        if dead(row.id):
            row.renewed_at = row.expires_at = min(now, row.expires_at)
            ended.append(row.id)
    if ended:
        session.flush()
        log.warning("replicas: ended the lease of %s: its process is gone", ", ".join(ended))
    return ended


def end_lease(session: Session, replica: str) -> None:
    """``replica`` stops: its lease ends now (given up: expiring as it is renewed), and the
    others take its targets over, each from its first slot after."""
    row = session.get(ReplicaRow, replica)
    if row is not None:
        row.renewed_at = row.expires_at = _database_now(session)


def _led(session: Session) -> bool:
    """Whether some session holds the leader lock in this database."""
    held = text(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND classid = :high AND objid = :low AND objsubid = 1"
    )
    return bool(session.scalar(held, {"high": LOCK_KEY >> 32, "low": LOCK_KEY & 0xFFFF_FFFF}))


def _database_now(session: Session) -> datetime:
    """The database's clock, which every replica shares (now, after any lock wait)."""
    now = session.scalar(select(func.clock_timestamp()))
    assert isinstance(now, datetime)
    return now


def request(session: Session, target: str, vantage: str, now: datetime) -> None:
    """Ask ``target``'s owner to evaluate ``vantage`` (once, however often asked)."""
    values = {"target": target, "vantage": vantage, "requested_at": now}
    session.execute(pg_insert(EvaluationDueRow).values(values).on_conflict_do_nothing())
    wakeups.announce(session, wakeups.EVALUATIONS)  # the owner claims it at once


_ANY_REQUESTED = select(EvaluationDueRow.target).limit(1)


def any_requested(connection: Connection) -> bool:
    """Whether any replica has asked for an evaluation: one row read, so a claim that
    would find nothing (a safety poll, and always for a lone replica) neither works out
    this replica's share nor sends every target it owns (``claim``)."""
    return connection.execute(_ANY_REQUESTED).first() is not None


def claim(session: Session, targets: Sequence[str]) -> list[tuple[str, str]]:
    """The requests for ``targets``, taken (deleted), oldest first."""
    if not targets:
        return []
    taken = (
        delete(EvaluationDueRow)
        .where(EvaluationDueRow.target.in_(targets))
        .returning(EvaluationDueRow.target, EvaluationDueRow.vantage, EvaluationDueRow.requested_at)
    )
    rows = sorted(session.execute(taken).all(), key=lambda row: row[2])
    return [(target, vantage) for target, vantage, _ in rows]
