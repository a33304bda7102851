"""Catching the rollups up with complete runs stored without them (``catch_up``).

The service's rollup loop calls it every ``CATCH_UP_EVERY_S``. On SQLite one writer holds
the database at a time, and a store waits for whoever has it: so there the batch's work
(reading samples, digesting them, merging the rollups it touches) is done outside any
write transaction, and only the finished rows are written, under ``write_lock``, in a
transaction that checks that nobody counted those runs or changed those rollups
meanwhile. Should somebody have, the batch is added again the ordinary way
(``add_digests``, everything inside the transaction), which is always right.
PostgreSQL locks rows, not the database: there the ordinary way is the only one.

One bad run never stops the others: a run whose samples cannot be digested (a time that is
negative, infinite or missing: a row that got past the door, or from an older version) is
set aside (``SetAside``, the service's quarantine: logged once, on /healthz and /metrics)
and passed over, and a batch whose write the database refuses is written again a run at a
time, so only the run it refuses is set aside. A database that is away is not a bad run:
that error goes up to the caller, as before.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import BindParameter, Integer, Select, and_, any_, bindparam, or_, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.digest import Digest, digest_of, flaw
from app.store.db import describe, is_transient, read_sessions, write_transaction
from app.store.inlists import padded
from app.store.models import RunDigestRow, RunRow, SampleRow, TargetRow
from app.store.partitions import days_of_runs
from app.store.quarantine import Quarantine, SetAside
from app.store.records import RunStatus
from app.store.rollups.digests import RunDigest, add_digests
from app.store.rollups.inhand import HeldSample, InHand
from app.store.rollups.planned import Plan, plan_of, written

CATCH_UP_BATCH = 200
LOOP = "rollups"  # the quarantine's name for this loop


def catch_up(
    sessions: sessionmaker[Session],
    since: datetime,
    now: datetime,
    batch: int = CATCH_UP_BATCH,
    targets: Collection[int] | None = None,
    between: Callable[[], object] | None = None,
    aside: SetAside | None = None,
    in_hand: InHand | None = None,
    before: datetime | None = None,
) -> int:
    """Add complete runs started since ``since`` (and before ``before``, if given) of the
    target ids ``targets`` (None: of every target) that have no digest yet; returns how
    many. The samples of runs ``in_hand`` holds are not read.

    A transaction per ``batch`` runs, oldest first, ``between()`` called before each (to
    yield to pushes). A run whose samples were pruned, wholly or in part, is passed over:
    its digest would lie. So is a run ``aside`` holds; a run that cannot be added goes
    there (without one: to a quarantine of this call's own, which logs it).
    """
    added, cursor = 0, None
    if targets is not None and not targets:
        return 0  # a replica that owns no target yet
    aside = aside if aside is not None else Quarantine().loop(LOOP)
    sqlite = sessions.kw["bind"].dialect.name == "sqlite"
    reads = read_sessions(sessions)
    while True:
        if between is not None:
            between()
        with reads() as session:
            heads = _heads(session, since, cursor, targets, before, batch)
            if not heads:
                return added
            digests = _digests(session, heads, aside, in_hand)
            plan = _planned(session, digests, now) if sqlite else None
        names = {head.id: _about(head) for head in heads}
        added += _isolated(sessions, digests, now, plan, _Aside(aside, names))
        if len(heads) < batch:  # the last batch: asking again would find nothing more
            return added
        cursor = (heads[-1].started_at, heads[-1].id)


def run_item(run_id: uuid.UUID) -> str:
    """A run as the rollups' quarantine names it."""
    return f"run {run_id}"


@dataclass(frozen=True, slots=True)
class _Aside:
    """Where a batch's runs go when the database refuses them, with their targets' names."""

    to: SetAside
    about: dict[uuid.UUID, str]

    def hold(self, run_id: uuid.UUID, exc: Exception) -> None:
        self.to.hold(run_item(run_id), describe(exc), self.about.get(run_id, ""))


def _digests(
    session: Session,
    heads: Sequence[Any],
    aside: SetAside | None = None,
    in_hand: InHand | None = None,
) -> list[RunDigest]:
    """The digests of ``heads`` whose samples are all there (``in_hand``'s, or read); a run
    whose samples cannot be read or digested is held in ``aside`` instead."""
    aside = aside if aside is not None else Quarantine().loop(LOOP)
    heads = [head for head in heads if not aside.holds(run_item(head.id))]
    samples = in_hand.take(head.id for head in heads) if in_hand is not None else {}
    unread = [head for head in heads if head.id not in samples]
    samples |= _readable_samples(session, unread, aside) if unread else {}
    found = []
    for head in heads:
        if len(mine := samples.get(head.id, [])) != head.n_samples:
            continue
        try:
            digest = _digest_of(mine)
        except Exception as exc:  # any: whatever a bad row makes the analysis raise
            aside.hold(run_item(head.id), str(exc) or type(exc).__name__, _about(head))
            continue
        found.append(RunDigest(head.id, head.target_id, head.vantage, head.started_at, digest))
    return found


def _readable_samples(
    session: Session, heads: Sequence[Any], aside: SetAside
) -> dict[uuid.UUID, list[HeldSample]]:
    """``_samples`` of ``heads``; if the database cannot return them, a run at a time."""
    try:
        return _samples(session, [head.id for head in heads])
    except Exception as exc:
        if is_transient(exc):
            raise
        session.rollback()
    found: dict[uuid.UUID, list[HeldSample]] = {}
    for head in heads:
        try:
            found.update(_samples(session, [head.id]))
        except Exception as exc:
            if is_transient(exc):
                raise
            session.rollback()
            reason = f"samples not readable: {describe(exc)}"
            aside.hold(run_item(head.id), reason, _about(head))
    return found


def _digest_of(samples: list[HeldSample]) -> Digest:
    wrong = flaw(samples)
    if wrong is not None:
        raise ValueError(wrong)
    return digest_of(samples)


def _about(head: Any) -> str:
    return f"of target {head.name}"


def _planned(session: Session, digests: list[RunDigest], now: datetime) -> Plan | None:
    """The SQLite batch's plan; None (the ordinary way, a run at a time if need be) if a
    row it merges into cannot be read."""
    try:
        return plan_of(session, digests, now)
    except Exception as exc:
        if is_transient(exc):
            raise
        session.rollback()
        return None


def _isolated(
    sessions: sessionmaker[Session],
    digests: list[RunDigest],
    now: datetime,
    plan: Plan | None,
    aside: _Aside,
) -> int:
    """The batch written; if the database refuses it (is not away), a run at a time."""
    try:
        return written(sessions, plan) if plan is not None else _added(sessions, digests, now)
    except Exception as exc:
        if is_transient(exc):
            raise
    added = 0
    for one in digests:
        try:
            added += _added(sessions, [one], now)
        except Exception as exc:
            if is_transient(exc):
                raise
            aside.hold(one.run_id, exc)
    return added


def _added(sessions: sessionmaker[Session], digests: list[RunDigest], now: datetime) -> int:
    with write_transaction(sessions) as session:
        return add_digests(session, digests, now)


# Finding the runs -------------------------------------------------------------------------


def _heads(
    session: Session,
    since: datetime,
    cursor: tuple[datetime, uuid.UUID] | None,
    targets: Collection[int] | None,
    before: datetime | None,
    batch: int,
) -> Sequence[Any]:
    """``batch`` runs of ``_undigested``. The rollup loop's look (PostgreSQL, some targets,
    no ``before``), made every ``CATCH_UP_EVERY_S`` whether any run waits or not, is one
    statement built once, run on the session's connection: building a new select, its cache
    key and the ORM's execution were most of an idle pass's CPU."""
    if targets is None or before is not None or session.get_bind().dialect.name != "postgresql":
        return session.execute(_undigested(since, cursor, targets, before).limit(batch)).all()
    params: dict[str, Any] = {"since": since, "targets": sorted(targets), "batch": batch}
    if cursor is not None:
        params["at"], params["after"] = cursor
    statement = _AFTER if cursor is not None else _FIRST
    return session.connection().execute(statement, params).all()


def _pg_undigested(cursor: bool) -> Select[uuid.UUID, int, str, datetime, int, str]:
    """``_undigested`` with its values as parameters: the targets an array, the cursor's
    values ``at`` and ``after``, the batch ``batch``."""
    targets = bindparam("targets", type_=ARRAY(Integer))
    query = _undigested(bindparam("since"), None, None).where(RunRow.target_id == any_(targets))
    if cursor:
        at: BindParameter[datetime] = bindparam("at")
        after: BindParameter[uuid.UUID] = bindparam("after")
        query = query.where(
            or_(RunRow.started_at > at, and_(RunRow.started_at == at, RunRow.id > after))
        )
    return query.limit(bindparam("batch"))


def _undigested(
    since: datetime | BindParameter[datetime],
    cursor: tuple[datetime, uuid.UUID] | None,
    targets: Collection[int] | None,
    before: datetime | None = None,
) -> Select[uuid.UUID, int, str, datetime, int, str]:
    query = (
        select(
            RunRow.id,
            RunRow.target_id,
            RunRow.vantage,
            RunRow.started_at,
            RunRow.n_samples,
            TargetRow.name,
        )
        .join(TargetRow, TargetRow.id == RunRow.target_id)
        .outerjoin(RunDigestRow, RunDigestRow.run_id == RunRow.id)
        .where(RunDigestRow.run_id.is_(None), RunRow.status == RunStatus.COMPLETE)
        .where(RunRow.started_at >= since)
        .order_by(RunRow.started_at, RunRow.id)
    )
    if targets is not None:
        query = query.where(RunRow.target_id.in_(padded(sorted(targets))))
    if before is not None:
        query = query.where(RunRow.started_at < before)
    if cursor is not None:
        at, run_id = cursor
        later = or_(RunRow.started_at > at, and_(RunRow.started_at == at, RunRow.id > run_id))
        query = query.where(later)
    return query


def _samples(session: Session, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[HeldSample]]:
    found: dict[uuid.UUID, list[HeldSample]] = defaultdict(list)
    if not ids:
        return found
    batch = padded(ids)
    rows = session.execute(
        select(
            SampleRow.run_id,
            SampleRow.status,
            SampleRow.total_ms,
            SampleRow.phases,
            SampleRow.provenance,
        ).where(SampleRow.run_id.in_(batch), *days_of_runs(session.get_bind().dialect.name, batch))
    )
    for run_id, status, total_ms, phases, provenance in rows:
        found[run_id].append(HeldSample(status, total_ms, phases, provenance))
    return found


_FIRST, _AFTER = _pg_undigested(cursor=False), _pg_undigested(cursor=True)
