"""When each vantage last ran any of its targets: what ``vantage_silent`` reads (beside
what the server heard from agents in memory), so replicas and restarts agree. Read from
``series_latest`` (one row a series), not the runs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from sqlalchemy.orm import Session

from app.store.reads.latestruns import vantage_latest


def last_runs(
    session: Session, targets_of: Mapping[str, Iterable[str]], since: datetime
) -> dict[str, datetime]:
    """Each vantage's latest run (any status) started since ``since``, among the targets
    ``targets_of`` names for it; a vantage with none is left out."""
    found: dict[str, datetime] = {}
    for vantage, targets in targets_of.items():
        names = sorted(targets)
        latest = vantage_latest(session, vantage, names) if names else None
        if latest is not None and latest >= since:
            found[vantage] = latest
    return found


def ever_ran(session: Session, targets_of: Mapping[str, Iterable[str]]) -> set[str]:
    """The vantages with any run at all, ever, of the targets ``targets_of`` names for
    them: one that has none never reported (an agent not started yet)."""
    return {
        vantage
        for vantage, targets in targets_of.items()
        if (names := sorted(targets)) and vantage_latest(session, vantage, names) is not None
    }
