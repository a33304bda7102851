"""A rollup row's key: (target id, vantage, period in seconds, period start), UTC-aligned."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

RollupKey = tuple[int, str, int, datetime]
KEY_COLUMNS = ("target_id", "vantage", "period_s", "period_start")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def period_start(at: datetime, seconds: int) -> datetime:
    """The start of the UTC-aligned period of ``seconds`` that holds ``at``."""
    elapsed = int((at - EPOCH).total_seconds() // seconds) * seconds
    return EPOCH + timedelta(seconds=elapsed)
