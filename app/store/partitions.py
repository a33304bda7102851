"""PostgreSQL's samples by UTC day: partitions made ahead, and dropped whole past retention.

Migration 0010 partitions ``samples`` by range of ``started_at``: ``samples_pYYYYMMDD``
holds one UTC day, ``samples_default`` whatever no day holds (a sample older than every
partition, or days ahead of them), so that an insert never fails for want of one. The
upkeep's prune calls ``keep_partitions``: it makes today's partition and ``AHEAD_DAYS``
more (a process that stops for less than that stores into days that exist), a partition
for each day within retention that the default partition holds rows of (moved into it
in the same transaction), and drops each day that ended before the retention cutoff.
What the default partition holds past the cutoff is deleted in short batches.

Every replica's upkeep runs it: each step takes ``PARTITIONS_LOCK_KEY`` (a transaction's
advisory lock) and looks again, so two replicas never make or drop one day twice.

Retention is thereby by whole days: a sample is kept at least ``raw_retention_days`` and
at most a day more. Each DDL statement waits at most ``LOCK_TIMEOUT`` for its locks (a
drop takes the parent's ACCESS EXCLUSIVE lock; a long read would otherwise queue every
store behind it); a day it could not lock is left for the next prune.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import ColumnElement, Connection, Engine, func, literal_column, select
from sqlalchemy.exc import OperationalError

from app.store.models import RunRow, SampleRow

log = logging.getLogger(__name__)

PARENT = "samples"
DEFAULT = "samples_default"
AHEAD_DAYS = 3
LOCK_TIMEOUT = "2s"
DEFAULT_BATCH_ROWS = 1000
_DAY_NAME = re.compile(r"^samples_p(\d{8})$")
_LOCK_NOT_AVAILABLE = "55P03"
PARTITIONS_LOCK_KEY = 0x7068_6173_7061_7274  # "phaspart"


# Reads of samples say which days to look in, so that PostgreSQL opens those days only (a
# read by run id alone would search every day's index, or scan them). A sample starts
# within this long of its run's start (a run lasts minutes); SQLite's queries are left as
# they were.
SAMPLE_LEAD = timedelta(days=1)


def days_of_runs(dialect: str, ids: Iterable[object]) -> list[ColumnElement[bool]]:
    """The days of the samples of the runs ``ids``: from the first one's start, less the
    lead (from the runs' rows, found when the query runs: PostgreSQL prunes then)."""
    if dialect != "postgresql":
        return []
    # The lead inside min(): over a bare column PostgreSQL would find the minimum by walking
    # ix_runs_started_at from the oldest run until one of ``ids`` (most of the table).
    lead: ColumnElement[timedelta] = literal_column(f"interval '{SAMPLE_LEAD.days} days'")
    first = select(func.min(RunRow.started_at - lead)).where(RunRow.id.in_(list(ids)))
    return [SampleRow.started_at >= first.scalar_subquery()]


def days_of_window(dialect: str, start: datetime, end: datetime) -> list[ColumnElement[bool]]:
    """The days of the samples of runs that started in [start, end)."""
    if dialect != "postgresql":
        return []
    return [SampleRow.started_at >= start - SAMPLE_LEAD, SampleRow.started_at < end + SAMPLE_LEAD]


def partition_name(day: date) -> str:
    return f"{PARENT}_p{day:%Y%m%d}"


def day_of(name: str) -> date | None:
    """The UTC day a partition named ``name`` holds; None for any other table."""
    found = _DAY_NAME.match(name)
    return None if found is None else datetime.strptime(found[1], "%Y%m%d").date()


def is_partition(name: str) -> bool:
    """A table that is one of ``samples``' partitions (schema comparison leaves them out)."""
    return name == DEFAULT or day_of(name) is not None


def day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def days_wanted(now: datetime, cutoff: datetime, held: Iterable[date]) -> set[date]:
    """Today and ``AHEAD_DAYS`` after it, and every day of ``held`` (the default
    partition's rows) not wholly before ``cutoff``."""
    today = now.astimezone(UTC).date()
    ahead = {today + timedelta(days=n) for n in range(AHEAD_DAYS + 1)}
    return ahead | {day for day in held if day_start(day) + timedelta(days=1) > cutoff}


def days_past(existing: Iterable[date], cutoff: datetime) -> list[date]:
    """The days whose every instant is before ``cutoff``: dropped whole."""
    return sorted(day for day in existing if day_start(day) + timedelta(days=1) <= cutoff)


@dataclass
class PartitionChanges:
    created: list[date] = field(default_factory=list)
    dropped: list[date] = field(default_factory=list)
    deleted: int = 0  # rows of the default partition past the cutoff
    locked_out: list[date] = field(default_factory=list)  # left for the next prune


def is_partitioned(connection: Connection) -> bool:
    """Whether ``samples`` is partitioned here (PostgreSQL at migration 0010 or later)."""
    if connection.dialect.name != "postgresql":
        return False
    kind = connection.exec_driver_sql(
        "SELECT relkind FROM pg_class WHERE oid = to_regclass(%(name)s)", {"name": PARENT}
    ).scalar()
    return kind == "p"


def existing_days(connection: Connection) -> list[date]:
    names = connection.exec_driver_sql(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = to_regclass(%(name)s)",
        {"name": PARENT},
    ).scalars()
    return sorted(day for day in map(day_of, names) if day is not None)


def days_in_default(connection: Connection) -> list[date]:
    """The UTC days of the default partition's rows (it is small: usually empty)."""
    rows = connection.exec_driver_sql(
        f"SELECT DISTINCT (started_at AT TIME ZONE 'UTC')::date FROM {DEFAULT}"
    ).scalars()
    return sorted(rows)


def keep_partitions(engine: Engine, now: datetime, cutoff: datetime) -> PartitionChanges:
    """Make the days wanted, drop the days past ``cutoff``, delete the default's old rows."""
    changes = PartitionChanges()
    with engine.connect() as connection:
        if not is_partitioned(connection):
            return changes
        existing = existing_days(connection)
        wanted = days_wanted(now, cutoff, days_in_default(connection))
    for day in sorted(wanted - set(existing)):
        _locked(engine, day, changes.created, changes.locked_out, create_partition)
    for day in days_past(existing, cutoff):
        _locked(engine, day, changes.dropped, changes.locked_out, drop_partition)
    changes.deleted = delete_default_before(engine, cutoff)
    return changes


def _locked(
    engine: Engine,
    day: date,
    done: list[date],
    locked_out: list[date],
    step: Callable[[Connection, date], bool],
) -> None:
    """``step(connection, day)`` in a transaction of its own, under ``LOCK_TIMEOUT``; the
    day is ``done`` if the step changed something (another replica may have done it)."""
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PARTITIONS_LOCK_KEY})")
            changed = step(connection, day)
    except OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
            raise
        log.info("partition %s busy, left for the next prune", partition_name(day))
        locked_out.append(day)
        return
    if changed:
        done.append(day)


def _exists(connection: Connection, name: str) -> bool:
    return bool(connection.exec_driver_sql("SELECT to_regclass(%(n)s)", {"n": name}).scalar())


def create_partition(connection: Connection, day: date) -> bool:
    """Make ``day``'s partition with the default partition's rows of that day in it.

    Made beside the table and attached (SHARE UPDATE EXCLUSIVE on ``samples``: stores go
    on), not ``CREATE TABLE … PARTITION OF`` (ACCESS EXCLUSIVE). Attaching checks that the
    default partition holds nothing of the day, which the move has just made true.
    """
    name, start = partition_name(day), day_start(day)
    if _exists(connection, name):
        return False  # another replica made it a moment ago
    bounds = {"start": start, "end": start + timedelta(days=1)}
    connection.exec_driver_sql(
        f"CREATE TABLE {name} (LIKE {PARENT} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
    )
    connection.exec_driver_sql(
        f"WITH moved AS (DELETE FROM {DEFAULT} WHERE started_at >= %(start)s"
        f" AND started_at < %(end)s RETURNING *) INSERT INTO {name} SELECT * FROM moved",
        bounds,
    )
    connection.exec_driver_sql(
        f"ALTER TABLE {PARENT} ATTACH PARTITION {name}"
        f" FOR VALUES FROM ('{start.isoformat()}') TO ('{bounds['end'].isoformat()}')"
    )
    return True


def drop_partition(connection: Connection, day: date) -> bool:
    if not _exists(connection, name := partition_name(day)):
        return False  # another replica dropped it a moment ago
    connection.exec_driver_sql(f"DROP TABLE {name}")
    return True


def delete_default_before(
    engine: Engine, cutoff: datetime, rows_per_batch: int = DEFAULT_BATCH_ROWS
) -> int:
    """Delete the default partition's rows older than ``cutoff``, a batch a transaction."""
    deleted = 0
    while True:
        with engine.begin() as connection:
            count = connection.exec_driver_sql(
                f"DELETE FROM {DEFAULT} WHERE ctid IN (SELECT ctid FROM {DEFAULT}"
                " WHERE started_at < %(cutoff)s LIMIT %(rows)s)",
                {"cutoff": cutoff, "rows": rows_per_batch},
            ).rowcount
        deleted += count
        if count < rows_per_batch:
            return deleted
