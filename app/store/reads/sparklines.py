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
    session: Session, now: datetime, hours: int = 24, targets: Collection[int] | None = None
) -> dict[tuple[str, str], list[float | None]]:
    """Hourly end-to-end p50 per (target, vantage), oldest first, the current hour last; of
    ``targets`` only (by id, a page's: through the rollups' key), when given."""
    first = period_start(now, 3600) - timedelta(hours=hours - 1)
    query = (
        select(TargetRow.name, RollupRow.vantage, RollupRow.period_start, RollupRow.total_p50)
        .join(TargetRow, TargetRow.id == RollupRow.target_id)
        .where(RollupRow.period_s == 3600, RollupRow.period_start >= first)
        .where(RollupRow.vantage != POOLED)
    )
    if targets is not None:
        query = query.where(RollupRow.target_id.in_(padded(sorted(targets))))
    rows = session.execute(query)
    lines: dict[tuple[str, str], list[float | None]] = {}
    for name, vantage, at, p50 in rows:
        index = int((at - first).total_seconds() // 3600)
        if 0 <= index < hours:
            lines.setdefault((name, vantage), [None] * hours)[index] = p50
    return lines
