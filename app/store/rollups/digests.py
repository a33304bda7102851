"""Run digests and rollups: kept in step with the stored runs, once per run.

A complete run's digest (app.analysis.digest) is written beside it and merged into its
rollups, one row per (target, vantage, period) for each period in ``PERIODS``, aligned to
the UTC epoch, and one more per period for the target's vantages pooled (``POOLED``). Each
rollup keeps its period's quantiles beside its sketches once its period has closed
(app.store.rollups.values).

The digest row is the marker that the run is counted: inserting it is ON CONFLICT DO
NOTHING, and only the writer whose insert took merges the rollups, so adding a run twice
(the store hook, then ``catch_up``) counts it once. New rollup rows go in with one
statement; existing ones are merged under a row lock (``FOR UPDATE`` on PostgreSQL; SQLite
has one writer), always in key order, so two writers never deadlock.

Two ways in:
* ``add_run(session, record, now, target_id)`` in the transaction that stores the run
  (``app.store.ingest.store_run``), or just after it;
* ``app.store.rollups.catchup.catch_up(sessions, since, now)`` for complete runs stored without
  it (the service's runs, spool flushes, imports), as long as their samples are still there.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, Table, bindparam, select, tuple_
from sqlalchemy.orm import Session

from app.analysis.digest import Digest, digest_of
from app.store.inlists import padded
from app.store.models import RollupRow, RunDigestRow, TargetRow
from app.store.prune import prune_rows
from app.store.records import RunRecord, RunStatus
from app.store.rollups import coarse, pgrows

# Re-exported: the key's names were this module's before it had a module of their own.
from app.store.rollups.keys import KEY_COLUMNS as KEY_COLUMNS
from app.store.rollups.keys import RollupKey as RollupKey
from app.store.rollups.keys import period_start as period_start
from app.store.rollups.values import RowValues
from app.store.rollups.values import compact_summary as compact_summary
from app.store.rollups.values import rollup_values as rollup_values
from app.store.targets import insert_unless_present

PERIODS = (300, 900, 3600, 21600, 86400)  # 5 min, 15 min, 1 h, 6 h, 1 day
# The vantage of the rollups that pool every vantage of a target: a history of all vantages
# then reads one row per bucket, like a history of one. Never a vantage's own name ("*"
# is not one any probe reports).
POOLED = "*"
# History and the overview read run digests and rollups, added off the store's path (by the
# service's rollup loop, this often) so that storing a run stays one statement; they trail
# the runs by at most this much.
CATCH_UP_EVERY_S = 10.0
# The 5- and 15-minute rollups hold about a row per run (for the vantage, and again pooled)
# and were most of the disk a run keeps (``bench.store_size``). They are kept this
# long; older windows cut into buckets that need them are merged from the run digests, which
# are kept forever (``app.store.reads.timeseries.time_series``): the same numbers, more rows
# to read.
FINE_PERIODS = (300, 900)
FINE_ROLLUPS_KEPT = timedelta(days=35)
# Pruned a day later than reads stop using them: a read near the edge never finds them gone.
_FINE_PRUNE_MARGIN = timedelta(days=1)


def fine_rollups_from(now: datetime) -> datetime:
    """The oldest period start whose 5- and 15-minute rollups reads may rely on at ``now``."""
    return now - FINE_ROLLUPS_KEPT


def fine_prune_before(now: datetime) -> datetime:
    """Where the fine rollups' prune at ``now`` cuts: at a day's start, so every coarse
    period of the rows it deletes has closed (and can be folded first: app.store.rollups.folds)."""
    return period_start(fine_rollups_from(now) - _FINE_PRUNE_MARGIN, PERIODS[-1])


def prune_fine_rollups(engine: Engine, now: datetime) -> int:
    """Delete the 5- and 15-minute rollups reads no longer use, in short batches."""
    before = fine_prune_before(now)
    # A period at a time: each is one ordered range of ix_rollups_period_s_period_start.
    older = [(RollupRow.period_s == p) & (RollupRow.period_start < before) for p in FINE_PERIODS]
    return sum(prune_rows(engine, RollupRow.period_start, where) for where in older)


@dataclass(frozen=True, slots=True)
class RunDigest:
    run_id: uuid.UUID
    target_id: int
    vantage: str
    started_at: datetime
    digest: Digest


def add_run(session: Session, record: RunRecord, now: datetime, target: int | None = None) -> bool:
    """Count a stored run in the rollups; False if it is not complete or already counted.

    ``target`` is the run's target id when the caller has it (``store_run`` does).
    """
    if record.status != RunStatus.COMPLETE:
        return False
    if target is None:
        target = session.scalar(select(TargetRow.id).where(TargetRow.name == record.target))
        if target is None:
            return False
    found = RunDigest(
        record.id, target, record.vantage, record.started_at, digest_of(record.samples)
    )
    return add_digests(session, [found], now) == 1


def add_digests(session: Session, digests: Sequence[RunDigest], now: datetime) -> int:
    """Write the run digests not written yet and merge those into the rollups."""
    if not digests:
        return 0
    inserted = _new_digests(session, [digest_values(d) for d in digests])
    fresh = [d for d in digests if d.run_id in inserted]
    parts = by_rollup(fresh)
    values = RowValues(now)
    merged = {key: values.part(parts[key]) for key in sorted(parts) if not coarse.is_coarse(key)}
    new = _insert_new(session, merged, values)
    _merge_into(session, sorted(merged.keys() - new), merged, values)
    add_coarse(session, parts, now)
    return len(fresh)


def add_coarse(session: Session, parts: dict[RollupKey, list[Digest]], now: datetime) -> None:
    """The coarse rows' share of a batch (``app.store.rollups.coarse``), after its finer
    rows are written: merged into the coarse rows that exist; where a closed period has
    none, every closed period from it on is folded, of the batch's targets (from finer
    rows, which hold the batch); an open period's is left to the fold. In the batch's
    write transaction."""
    keys = sorted(key for key in parts if coarse.is_coarse(key))
    if not keys:
        return
    coarse.serialized(session)
    present = _present(session, keys)
    values = RowValues(now)
    merged = {key: values.part(parts[key]) for key in keys if key in present}
    _merge_into(session, list(merged), merged, values)
    missing = [key for key in keys if key not in present and coarse.closed(key, now)]
    if missing:  # every closed period from the oldest on: the fold's order (folds.py)
        # Of the batch's targets only: the others' are their owners' (app.replicas.rollups).
        targets = {key[0] for key in missing}
        coarse.fold(session, min(key[3] for key in missing), now, insert_built, targets)


def insert_built(session: Session, digests: dict[RollupKey, Digest], now: datetime) -> None:
    """Insert coarse rows built from their finer rows (none is there: their writers hold
    ``coarse.serialized``)."""
    rows = [
        {**dict(zip(KEY_COLUMNS, key, strict=True)), **rollup_values(digests[key], now)}
        for key in sorted(digests)
    ]
    if rows:
        session.execute(ROLLUPS.insert(), rows)


DIGESTS: Table = RunDigestRow.__table__  # type: ignore[assignment]
ROLLUPS: Table = RollupRow.__table__  # type: ignore[assignment]


def by_rollup(digests: Iterable[RunDigest]) -> dict[RollupKey, list[Digest]]:
    groups: dict[RollupKey, list[Digest]] = defaultdict(list)
    for found in digests:
        for seconds in PERIODS:
            start = period_start(found.started_at, seconds)
            for vantage in (found.vantage, POOLED):
                groups[(found.target_id, vantage, seconds, start)].append(found.digest)
    return groups


def _insert_new(
    session: Session, merged: dict[RollupKey, Digest], values: RowValues
) -> set[RollupKey]:
    """Insert the rollup rows that do not exist yet, in one statement; the keys inserted.

    Rows go in key order, as ``_merge_into`` locks them, so two writers never deadlock.
    Only rows not there a moment ago are built (their quantiles are a row's main cost);
    one that another writer adds meanwhile is not inserted, so it is merged into.
    """
    present = _present(session, list(merged))
    rows = [
        {**dict(zip(KEY_COLUMNS, key, strict=True)), **values.new(digest, key)}
        for key, digest in merged.items()
        if key not in present
    ]
    if not rows:
        return set()
    connection = session.connection()
    if connection.dialect.name == "postgresql":  # one JSON parameter: see pgrows
        return pgrows.new_rows(connection, rows)
    statement = insert_unless_present(session, ROLLUPS, list(KEY_COLUMNS)).returning(
        *(ROLLUPS.c[name] for name in KEY_COLUMNS)
    )
    return {(t, v, p, start) for t, v, p, start in session.execute(statement, padded(rows))}


def _new_digests(session: Session, rows: list[dict[str, Any]]) -> set[uuid.UUID]:
    """Insert the run digests not there yet; the run ids inserted."""
    connection = session.connection()
    if connection.dialect.name == "postgresql":  # one JSON parameter: see pgrows
        return pgrows.new_digests(connection, rows)
    statement = insert_unless_present(session, DIGESTS, ["run_id"]).returning(DIGESTS.c.run_id)
    return set(session.scalars(statement, padded(rows)).all())  # a repeated row: skipped


def _present(session: Session, keys: list[RollupKey]) -> set[RollupKey]:
    """Which of ``keys`` have a rollup row (read without a lock: a hint, see ``_insert_new``)."""
    if not keys:
        return set()
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        return pgrows.present(connection, keys)
    key_columns = [ROLLUPS.c[name] for name in KEY_COLUMNS]
    query = select(*key_columns).where(tuple_(*key_columns).in_(keys))
    return {(row[0], row[1], row[2], row[3]) for row in session.execute(query)}


def _merge_into(
    session: Session, keys: list[RollupKey], merged: dict[RollupKey, Digest], values: RowValues
) -> None:
    """Merge each of ``keys``' digest into its existing rollup row, under the rows' locks.

    One read of them all (locked in key order) and one batch of updates, not a locked read
    and an update per row: a run touches ten rollup rows, and statements a row were most
    of a run's cost in ``serve`` (bench/fleet.py).
    """
    if not keys:
        return
    stored = _locked(session, keys)
    write_rows(session, keys, values.merged_all([(stored[key], merged[key], key) for key in keys]))


def _locked(session: Session, keys: list[RollupKey]) -> dict[RollupKey, Any]:
    """The digest documents of ``keys``' rows, locked in key order."""
    connection = session.connection()
    if connection.dialect.name == "postgresql":  # the keys as arrays: see pgrows
        return pgrows.locked(connection, keys)
    key_columns = [ROLLUPS.c[name] for name in KEY_COLUMNS]
    query = (
        select(*key_columns, ROLLUPS.c.digest)
        .where(tuple_(*key_columns).in_(keys))
        .order_by(*key_columns)
        .with_for_update()
    )
    return {(row[0], row[1], row[2], row[3]): row[4] for row in session.execute(query)}


def write_rows(session: Session, keys: list[RollupKey], rows: list[dict[str, Any]]) -> None:
    """Each of ``keys``' rows set to its values (``rollup_values``), in one batch."""
    if not keys:
        return
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        pgrows.update(connection, keys, rows)
        return
    params = []
    for key, new in zip(keys, rows, strict=True):
        keyed = {f"key_{name}": value for name, value in zip(KEY_COLUMNS, key, strict=True)}
        params.append({**keyed, **{f"new_{k}": v for k, v in new.items()}})
    connection.execute(_UPDATE, params)


_UPDATE = (
    ROLLUPS.update()
    .where(*(ROLLUPS.c[name] == bindparam(f"key_{name}") for name in KEY_COLUMNS))
    .values(
        {
            name: bindparam(f"new_{name}")
            for name in ("runs", "n", "total_p50", "digest", "updated_at")
        }
    )
)


def digest_values(found: RunDigest) -> dict[str, Any]:
    return {
        "run_id": found.run_id,
        "target_id": found.target_id,
        "vantage": found.vantage,
        "started_at": found.started_at,
        "digest": found.digest.to_json(),
    }
