"""A target's history as the charts read it: bucketed series over a window.

Per bucket, the quantiles stored with the rollup of that period (when the bucket is one:
5 min … 1 day), or the rollups of the largest period that divides the bucket merged, or,
for buckets finer than 5 minutes, the runs' digests merged (app.analysis.series). A
bucket's quantile is the quantile of all its samples (within 1 %), never a mean of run
quantiles. Buckets are aligned to the UTC epoch.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Select, select
from sqlalchemy.orm import Session

from app.analysis.digest import Digest
from app.analysis.series import (
    Series,
    digest_columns,
    pick_bucket,
    rounded,
    summary_columns,
    window_json,
)
from app.store.models import RollupRow, RunDigestRow
from app.store.rollups.coarse import FINER, resolved
from app.store.rollups.digests import (
    FINE_PERIODS,
    PERIODS,
    POOLED,
    compact_summary,
    fine_rollups_from,
    period_start,
)
from app.store.targets import target_key


@dataclass(frozen=True)
class TimeSeries:
    """A bucketed time series, columnar as uPlot draws it; an empty bucket holds None."""

    target: str
    vantage: str | None
    start: datetime
    end: datetime
    bucket_seconds: int
    source: str  # runs: merged run digests | rollups: merged rollups
    phases: list[str]
    time: list[int]  # bucket starts, epoch seconds UTC
    runs: list[int]
    samples: list[int]
    deadline_misses: list[int]
    errors: list[int]
    total: dict[str, Series]
    phase_quantiles: dict[str, dict[str, Series]]
    shares: dict[str, Series]
    dominant: list[str | None]

    def to_json(self) -> dict[str, Any]:
        return {
            **window_json(self.target, self.vantage, self.start, self.end),
            "bucket_seconds": self.bucket_seconds,
            "source": self.source,
            "phases": self.phases,
            "time": self.time,
            "runs": self.runs,
            "samples": self.samples,
            "deadline_misses": self.deadline_misses,
            "errors": self.errors,
            "total": {name: rounded(values, 3) for name, values in self.total.items()},
            "phase_quantiles": {
                phase: {name: rounded(values, 3) for name, values in quantiles.items()}
                for phase, quantiles in self.phase_quantiles.items()
            },
            "shares": {name: rounded(values, 4) for name, values in self.shares.items()},
            "dominant": self.dominant,
        }


def bucket_count(start: datetime, end: datetime, bucket_seconds: int) -> int:
    first = period_start(start, bucket_seconds)
    return max(1, math.ceil((end - first).total_seconds() / bucket_seconds))


def time_series(
    session: Session,
    target: str,
    start: datetime,
    end: datetime,
    vantage: str | None = None,
    bucket_seconds: int | None = None,
    *,
    now: datetime,
) -> TimeSeries:
    """Buckets covering [start, end), aligned to the epoch (the first may begin before start).

    Buckets that need the 5- or 15-minute rollups, in a window older than those are kept
    at ``now``, are merged from the run digests instead.
    """
    bucket = bucket_seconds or pick_bucket(start, end)
    first = period_start(start, bucket)
    count = bucket_count(start, end, bucket)
    period = source_period(bucket)
    if period in FINE_PERIODS and first < fine_rollups_from(now):
        period = None
    times = [int(first.timestamp()) + i * bucket for i in range(count)]
    source = "runs" if period is None else "rollups"
    key = target_key(session, target)
    if key is None:
        columns = digest_columns([[] for _ in range(count)])
        return TimeSeries(target, vantage, start, end, bucket, source, time=times, **columns)
    span = (first, first + timedelta(seconds=bucket * count))
    if period == bucket:
        series = (key, vantage or POOLED, period)
        query = _stored_summaries(*series, span)
        stored: dict[datetime, Any] = dict(session.execute(query).all())
        stored.update(_summarized(session, series, [at for at, s in stored.items() if s is None]))
        tail = _unfolded(session, series, span, set(stored))
        stored.update({at: compact_summary(digest) for at, digest in tail.items()})
        summaries = [(_index(at, first, bucket), data) for at, data in stored.items()]
        columns = summary_columns(count, summaries)
        return TimeSeries(target, vantage, start, end, bucket, source, time=times, **columns)
    found = [
        (at, Digest.from_json(data))
        for at, data in session.execute(_stored_digests(key, vantage, period, span))
    ]
    if period is not None:
        series = (key, vantage or POOLED, period)
        found += _unfolded(session, series, span, {at for at, _ in found}).items()
    groups: list[list[Digest]] = [[] for _ in range(count)]
    for at, digest in found:
        groups[_index(at, first, bucket)].append(digest)
    columns = digest_columns(groups)
    return TimeSeries(target, vantage, start, end, bucket, source, time=times, **columns)


def _unfolded(
    session: Session,
    series: tuple[int, str, int],
    span: tuple[datetime, datetime],
    have: Collection[datetime],
) -> dict[datetime, Digest]:
    """The coarse rows of ``series`` (target, vantage, period) in ``span`` that are not
    stored (``have``: the starts that are), merged from their finer rows:
    a coarse period is folded when it closes (app.store.rollups.coarse), and a read gives
    the same numbers before."""
    target, vantage, period = series
    if period not in FINER:
        return {}
    step = timedelta(seconds=period)
    count = int((span[1] - span[0]) / step)
    starts = [span[0] + i * step for i in range(count)]
    keys = [(target, vantage, period, at) for at in starts if at not in have]
    return {key[3]: digest for key, digest in resolved(session, keys).items()}


def _summarized(
    session: Session, series: tuple[int, str, int], starts: list[datetime]
) -> dict[datetime, Any]:
    """The quantiles of the rows of ``series`` at ``starts``, stored without them (written
    while their period was open: app.store.rollups.values), found from their sketches."""
    if not starts:
        return {}
    target, vantage, period = series
    query = select(RollupRow.period_start, RollupRow.digest).where(
        *_rollups_of(target, vantage, period, (min(starts), max(starts) + timedelta(seconds=1)))
    )
    wanted = set(starts)
    rows = session.execute(query)
    return {at: compact_summary(Digest.from_json(doc)) for at, doc in rows if at in wanted}


def _index(at: datetime, first: datetime, bucket: int) -> int:
    return int((at - first).total_seconds() // bucket)


def source_period(bucket_seconds: int) -> int | None:
    """The largest rollup period that divides the bucket; None: merge run digests."""
    fitting = [p for p in PERIODS if bucket_seconds % p == 0]
    return max(fitting) if fitting else None


def _stored_digests(
    target: int, vantage: str | None, period: int | None, span: tuple[datetime, datetime]
) -> Select[datetime, dict[str, Any]]:
    if period is None:
        runs = select(RunDigestRow.started_at, RunDigestRow.digest).where(
            RunDigestRow.target_id == target,
            RunDigestRow.started_at >= span[0],
            RunDigestRow.started_at < span[1],
        )
        return runs if vantage is None else runs.where(RunDigestRow.vantage == vantage)
    return select(RollupRow.period_start, RollupRow.digest).where(
        *_rollups_of(target, vantage or POOLED, period, span)
    )


def _stored_summaries(
    target: int, vantage: str, period: int, span: tuple[datetime, datetime]
) -> Select[datetime, Any]:
    """Only each rollup's quantiles, taken out of its JSON by the database."""
    summary = RollupRow.digest["summary"]
    return select(RollupRow.period_start, summary).where(
        *_rollups_of(target, vantage, period, span)
    )


def _rollups_of(
    target: int, vantage: str, period: int, span: tuple[datetime, datetime]
) -> list[ColumnElement[bool]]:
    return [
        RollupRow.target_id == target,
        RollupRow.vantage == vantage,
        RollupRow.period_s == period,
        RollupRow.period_start >= span[0],
        RollupRow.period_start < span[1],
    ]
