"""The overview's sparklines: each pair's hourly end-to-end median, from the hourly rollups."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.models import RollupRow, TargetRow
from app.store.rollups.digests import POOLED, period_start


def sparklines(
    session: Session, now: datetime, hours: int = 24
) -> dict[tuple[str, str], list[float | None]]:
    """Hourly end-to-end p50 per (target, vantage), oldest first, the current hour last."""
    first = period_start(now, 3600) - timedelta(hours=hours - 1)
    rows = session.execute(
        select(TargetRow.name, RollupRow.vantage, RollupRow.period_start, RollupRow.total_p50)
        .join(TargetRow, TargetRow.id == RollupRow.target_id)
        .where(RollupRow.period_s == 3600, RollupRow.period_start >= first)
        .where(RollupRow.vantage != POOLED)
    )
    lines: dict[tuple[str, str], list[float | None]] = {}
    for name, vantage, at, p50 in rows:
        index = int((at - first).total_seconds() // 3600)
        if 0 <= index < hours:
            lines.setdefault((name, vantage), [None] * hours)[index] = p50
    return lines
