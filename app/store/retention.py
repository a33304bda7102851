"""Retention, what the upkeep's prune removes: raw samples, and summaries if asked.

Raw samples go after ``raw_retention_days``: on PostgreSQL (samples partitioned by day,
migration 0010) a day is dropped whole once it has ended before the cutoff
(``app.store.partitions``); on SQLite, and on a PostgreSQL not yet migrated, they are
deleted in short batches (``app.store.prune``).

Summaries (a run's row, its digest, its rollups) are kept forever unless
``summary_retention_days`` is set; then runs, digests and rollups that started before its
cutoff are deleted in short batches. The run rows are a twentieth of the samples' rows and
their deletes stay cheap; samples a deleted run still had go with it (ON DELETE CASCADE).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy import Engine

from app.store.models import RollupRow, RunDigestRow, RunRow
from app.store.partitions import PartitionChanges, is_partitioned, keep_partitions
from app.store.prune import prune_rows, prune_samples
from app.store.rollups.digests import PERIODS

log = logging.getLogger(__name__)


def prune_raw(engine: Engine, now: datetime, cutoff: datetime) -> int:
    """Samples older than ``cutoff``; the rows deleted (days dropped whole are logged)."""
    with engine.connect() as connection:
        partitioned = is_partitioned(connection)
    if not partitioned:
        return prune_samples(engine, cutoff)
    changes = keep_partitions(engine, now, cutoff)
    _log(changes)
    return changes.deleted


def _log(changes: PartitionChanges) -> None:
    if changes.created:
        log.info("samples partitions made: %s", ", ".join(map(str, changes.created)))
    if changes.dropped:
        log.info("samples partitions dropped: %s", ", ".join(map(str, changes.dropped)))


def summaries_cutoff(now: datetime, raw_days: int, summary_days: int | None) -> datetime | None:
    """Where summaries end: never before the samples' own cutoff; None: kept forever."""
    if summary_days is None:
        return None
    return now - timedelta(days=max(summary_days, raw_days))


def prune_summaries(engine: Engine, cutoff: datetime) -> int:
    """Runs, run digests and rollups before ``cutoff``, in short batches; the rows deleted.

    A rollup goes once its whole period is before ``cutoff``; runs go last, so a run's
    digest (which cascades with it) is never left behind in a rollup still kept.
    """
    deleted = 0
    for seconds in PERIODS:  # each period one ordered range of its index
        ended = RollupRow.period_start < cutoff - timedelta(seconds=seconds)
        deleted += prune_rows(
            engine, RollupRow.period_start, (RollupRow.period_s == seconds) & ended
        )
    deleted += prune_rows(engine, RunDigestRow.started_at, RunDigestRow.started_at < cutoff)
    return deleted + prune_rows(engine, RunRow.started_at, RunRow.started_at < cutoff)
