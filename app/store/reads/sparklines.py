"""The overview's sparklines: each pair's hourly end-to-end median, from the hourly rollups."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.inlists import padded
from app.store.models import RollupRow, TargetRow
from app.store.rollups.digests import POOLED, period_start


def sparklines(
    session: Session,
    now: datetime,
    hours: int = 24,
    series: Collection[tuple[int, str]] | None = None,
) -> dict[tuple[str, str], list[float | None]]:
    """Hourly end-to-end p50 per (target, vantage), oldest first, the current hour last; of
    ``series`` (target id, vantage: a page's) when given, and perhaps a few more of their
    targets and vantages."""
    first = period_start(now, 3600) - timedelta(hours=hours - 1)
    query = (
        select(TargetRow.name, RollupRow.vantage, RollupRow.period_start, RollupRow.total_p50)
        .join(TargetRow, TargetRow.id == RollupRow.target_id)
        .where(RollupRow.period_s == 3600, RollupRow.period_start >= first)
        .where(RollupRow.vantage != POOLED)
    )
    if series is not None:
        # Both leading columns of the rollups' key given, so the read is a range of the key
        # per series: with the target alone, both databases chose (period_s, period_start)
        # and read every series' hours (1.7 s on SQLite at 10,000; bench/README.md).
        targets, vantages = {t for t, _ in series}, {v for _, v in series}
        query = query.where(RollupRow.target_id.in_(padded(sorted(targets))))
        query = query.where(RollupRow.vantage.in_(padded(sorted(vantages))))
    rows = session.execute(query)
    lines: dict[tuple[str, str], list[float | None]] = {}
    for name, vantage, at, p50 in rows:
        index = int((at - first).total_seconds() // 3600)
        if 0 <= index < hours:
            lines.setdefault((name, vantage), [None] * hours)[index] = p50
    return lines
