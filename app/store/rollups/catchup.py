"""Catching the rollups up with complete runs stored without them (``catch_up``).

The service's rollup loop calls it every ``CATCH_UP_EVERY_S``. On SQLite one writer holds
the database at a time, and a store waits for whoever has it: so there the batch's work
(reading samples, digesting them, merging the rollups it touches) is done outside any
write transaction, and only the finished rows are written, under ``write_lock``, in a
transaction that checks that nobody counted those runs or changed those rollups
meanwhile. Should somebody have, the batch is added again the ordinary way
(``add_digests``, everything inside the transaction), which is always right.
PostgreSQL locks rows, not the database: there the ordinary way is the only one.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, bindparam, or_, select, tuple_
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.digest import Digest, digest_of, merge_digests
from app.store.db import write_transaction
from app.store.models import RollupRow, RunDigestRow, RunRow, SampleRow
from app.store.records import RunStatus
from app.store.rollups.digests import (
    DIGESTS,
    KEY_COLUMNS,
    ROLLUPS,
    RollupKey,
    RunDigest,
    add_digests,
    by_rollup,
    digest_values,
    rollup_values,
)
from app.store.targets import insert_unless_present

CATCH_UP_BATCH = 200


@dataclass(frozen=True, slots=True)
class _Sample:
    status: str
    total_ms: float
    phases: dict[str, float]
    provenance: dict[str, str]


def catch_up(
    sessions: sessionmaker[Session],
    since: datetime,
    now: datetime,
    batch: int = CATCH_UP_BATCH,
    target: int | None = None,
    between: Callable[[], object] | None = None,
) -> int:
    """Add complete runs started since ``since`` (of one target id, or all) that have no
    digest yet; returns how many.

    A transaction per ``batch`` runs, oldest first, ``between()`` called before each (to
    yield to pushes). A run whose samples were pruned, wholly or in part, is passed over:
    its digest would lie.
    """
    added, cursor = 0, None
    sqlite = sessions.kw["bind"].dialect.name == "sqlite"
    while True:
        if between is not None:
            between()
        with sessions() as session:
            heads = session.execute(_undigested(since, cursor, target).limit(batch)).all()
            if not heads:
                return added
            digests = _digests(session, heads)
            plan = _plan(session, digests, now) if sqlite else None
        added += _written(sessions, plan) if plan is not None else _added(sessions, digests, now)
        cursor = (heads[-1].started_at, heads[-1].id)


def _digests(session: Session, heads: Sequence[Any]) -> list[RunDigest]:
    samples = _samples(session, [head.id for head in heads])
    return [
        RunDigest(head.id, head.target_id, head.vantage, head.started_at, digest_of(found))
        for head in heads
        if len(found := samples.get(head.id, [])) == head.n_samples
    ]


def _added(sessions: sessionmaker[Session], digests: list[RunDigest], now: datetime) -> int:
    with write_transaction(sessions) as session:
        return add_digests(session, digests, now)


# Written outside the lock's hold (SQLite) -------------------------------------------------


class _Stale(Exception):
    """Somebody counted a run or changed a rollup between the plan and its write."""


@dataclass
class _Plan:
    """A batch's rows, ready to write: digests, new rollups, and merged rollups with the
    ``runs`` each had when read (the check that nobody merged into it since)."""

    digests: list[RunDigest]
    fresh: list[dict[str, Any]] = field(default_factory=list)
    new: list[dict[str, Any]] = field(default_factory=list)
    merged: list[dict[str, Any]] = field(default_factory=list)
    now: datetime | None = None


def _plan(session: Session, digests: list[RunDigest], now: datetime) -> _Plan:
    """Everything the batch will write, computed from what the database holds now."""
    plan = _Plan(digests, now=now)
    counted = _counted(session, [d.run_id for d in digests])
    fresh = [d for d in digests if d.run_id not in counted]
    plan.fresh = [digest_values(d) for d in fresh]
    parts = by_rollup(fresh)
    stored = _stored_rollups(session, list(parts))
    for key in sorted(parts):
        keyed = dict(zip(KEY_COLUMNS, key, strict=True))
        found = stored.get(key)
        if found is None:
            plan.new.append({**keyed, **rollup_values(merge_digests(parts[key]), now)})
            continue
        runs, document = found
        digest = merge_digests([Digest.from_json(document), *parts[key]])
        values = {f"new_{k}": v for k, v in rollup_values(digest, now).items()}
        plan.merged.append({**{f"key_{k}": v for k, v in keyed.items()}, **values, "was": runs})
    return plan


def _written(sessions: sessionmaker[Session], plan: _Plan) -> int:
    """Write ``plan`` under the write lock; the ordinary way if it went stale."""
    try:
        with write_transaction(sessions) as session:
            _write(session, plan)
        return len(plan.fresh)
    except _Stale:
        assert plan.now is not None
        return _added(sessions, plan.digests, plan.now)


def _write(session: Session, plan: _Plan) -> None:
    if not plan.fresh:
        return
    statement = insert_unless_present(session, DIGESTS, ["run_id"]).returning(DIGESTS.c.run_id)
    if len(session.scalars(statement, plan.fresh).all()) != len(plan.fresh):
        raise _Stale
    if plan.new:
        keys = insert_unless_present(session, ROLLUPS, list(KEY_COLUMNS))
        keys = keys.returning(ROLLUPS.c.target_id)
        if len(session.execute(keys, plan.new).all()) != len(plan.new):
            raise _Stale
    if plan.merged:
        result: Any = session.connection().execute(_MERGE, plan.merged)
        if result.rowcount != len(plan.merged):
            raise _Stale


_MERGE = (
    ROLLUPS.update()
    .where(
        *(ROLLUPS.c[name] == bindparam(f"key_{name}") for name in KEY_COLUMNS),
        ROLLUPS.c.runs == bindparam("was"),
    )
    .values(
        {
            name: bindparam(f"new_{name}")
            for name in ("runs", "n", "total_p50", "digest", "updated_at")
        }
    )
)


def _counted(session: Session, ids: list[uuid.UUID]) -> set[uuid.UUID]:
    found = select(RunDigestRow.run_id).where(RunDigestRow.run_id.in_(ids))
    return set(session.scalars(found))


def _stored_rollups(
    session: Session, keys: list[RollupKey]
) -> dict[RollupKey, tuple[int, dict[str, Any]]]:
    if not keys:
        return {}
    columns = tuple_(*(getattr(RollupRow, name) for name in KEY_COLUMNS))
    query = select(
        RollupRow.target_id,
        RollupRow.vantage,
        RollupRow.period_s,
        RollupRow.period_start,
        RollupRow.runs,
        RollupRow.digest,
    ).where(columns.in_(keys))
    return {
        (t, v, p, start): (runs, digest) for t, v, p, start, runs, digest in session.execute(query)
    }


# Finding the runs -------------------------------------------------------------------------


def _undigested(
    since: datetime, cursor: tuple[datetime, uuid.UUID] | None, target: int | None
) -> Select[uuid.UUID, int, str, datetime, int]:
    query = (
        select(RunRow.id, RunRow.target_id, RunRow.vantage, RunRow.started_at, RunRow.n_samples)
        .outerjoin(RunDigestRow, RunDigestRow.run_id == RunRow.id)
        .where(RunDigestRow.run_id.is_(None), RunRow.status == RunStatus.COMPLETE)
        .where(RunRow.started_at >= since)
        .order_by(RunRow.started_at, RunRow.id)
    )
    if target is not None:
        query = query.where(RunRow.target_id == target)
    if cursor is not None:
        at, run_id = cursor
        later = or_(RunRow.started_at > at, and_(RunRow.started_at == at, RunRow.id > run_id))
        query = query.where(later)
    return query


def _samples(session: Session, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[_Sample]]:
    found: dict[uuid.UUID, list[_Sample]] = defaultdict(list)
    if not ids:
        return found
    rows = session.execute(
        select(
            SampleRow.run_id,
            SampleRow.status,
            SampleRow.total_ms,
            SampleRow.phases,
            SampleRow.provenance,
        ).where(SampleRow.run_id.in_(ids))
    )
    for run_id, status, total_ms, phases, provenance in rows:
        found[run_id].append(_Sample(status, total_ms, phases, provenance))
    return found
