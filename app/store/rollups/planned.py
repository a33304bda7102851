"""A catch-up batch written on SQLite outside the write lock's hold (``app.store.rollups.catchup``).

The batch's rows are computed from what the database holds (``plan_of``), outside any write
transaction; ``written`` writes them under the write lock in a transaction that checks that
nobody counted those runs or changed those rollups meanwhile, and adds the batch the
ordinary way (``add_digests``, everything inside the transaction) should somebody have.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select, tuple_
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.digest import Digest
from app.store.db import write_transaction
from app.store.inlists import padded
from app.store.models import RollupRow, RunDigestRow
from app.store.rollups.coarse import is_coarse
from app.store.rollups.digests import (
    DIGESTS,
    KEY_COLUMNS,
    ROLLUPS,
    RollupKey,
    RunDigest,
    add_coarse,
    add_digests,
    by_rollup,
    digest_values,
)
from app.store.rollups.values import RowValues
from app.store.targets import insert_unless_present


class _Stale(Exception):
    """Somebody counted a run or changed a rollup between the plan and its write."""


@dataclass
class Plan:
    """A batch's rows, ready to write: digests, new rollups, and merged rollups with the
    ``runs`` each had when read (the check that nobody merged into it since)."""

    digests: list[RunDigest]
    fresh: list[dict[str, Any]] = field(default_factory=list)
    new: list[dict[str, Any]] = field(default_factory=list)
    merged: list[dict[str, Any]] = field(default_factory=list)
    now: datetime | None = None
    # The coarse rows' parts: merged or built in the write's transaction (``add_coarse``)
    coarse: dict[RollupKey, list[Digest]] = field(default_factory=dict)


def plan_of(session: Session, digests: list[RunDigest], now: datetime) -> Plan:
    """Everything the batch will write, computed from what the database holds now."""
    plan = Plan(digests, now=now)
    counted = _counted(session, [d.run_id for d in digests])
    fresh = [d for d in digests if d.run_id not in counted]
    plan.fresh = [digest_values(d) for d in fresh]
    parts = by_rollup(fresh)
    plan.coarse = {key: parts.pop(key) for key in list(parts) if is_coarse(key)}
    stored = _stored_rollups(session, list(parts))
    rows = RowValues(now)
    for key in sorted(parts):
        keyed = dict(zip(KEY_COLUMNS, key, strict=True))
        found, part = stored.get(key), rows.part(parts[key])
        if found is None:
            plan.new.append({**keyed, **rows.new(part, key)})
            continue
        runs, document = found
        values = {f"new_{k}": v for k, v in rows.merged(document, part, key).items()}
        plan.merged.append({**{f"key_{k}": v for k, v in keyed.items()}, **values, "was": runs})
    return plan


def written(sessions: sessionmaker[Session], plan: Plan) -> int:
    """Write ``plan`` under the write lock; the ordinary way if it went stale."""
    try:
        with write_transaction(sessions) as session:
            _write(session, plan)
        return len(plan.fresh)
    except _Stale:
        assert plan.now is not None
        with write_transaction(sessions) as session:
            return add_digests(session, plan.digests, plan.now)


def _write(session: Session, plan: Plan) -> None:
    if not plan.fresh:
        return
    statement = insert_unless_present(session, DIGESTS, ["run_id"]).returning(DIGESTS.c.run_id)
    # Rows padded as IN lists are (app.store.inlists): a repeated row conflicts, not counted.
    if len(session.scalars(statement, padded(plan.fresh)).all()) != len(plan.fresh):
        raise _Stale
    if plan.new:
        keys = insert_unless_present(session, ROLLUPS, list(KEY_COLUMNS))
        keys = keys.returning(ROLLUPS.c.target_id)
        if len(session.execute(keys, padded(plan.new)).all()) != len(plan.new):
            raise _Stale
    if plan.merged:
        result: Any = session.connection().execute(_MERGE, plan.merged)
        if result.rowcount != len(plan.merged):
            raise _Stale
    assert plan.now is not None
    add_coarse(session, plan.coarse, plan.now)


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
    found = select(RunDigestRow.run_id).where(RunDigestRow.run_id.in_(padded(ids)))
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
    ).where(columns.in_(padded(keys)))
    return {
        (t, v, p, start): (runs, digest) for t, v, p, start, runs, digest in session.execute(query)
    }
