"""When each vantage last ran any of its targets: what ``vantage_silent`` reads (beside
what the server heard from agents in memory), so replicas and restarts agree."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.store.models import RunRow, TargetRow
from app.store.reads.browse import Q


def last_runs(
    session: Session, targets_of: Mapping[str, Iterable[str]], since: datetime
) -> dict[str, datetime]:
    """Each vantage's latest run (any status) started since ``since``, among the targets
    ``targets_of`` names for it; a vantage with none is left out."""
    found: dict[str, datetime] = {}
    for vantage, targets in targets_of.items():
        names = sorted(targets)
        if not names:
            continue
        latest = session.scalar(
            _of(select(func.max(RunRow.started_at)), vantage, names).where(
                RunRow.started_at >= since
            )
        )
        if latest is not None:
            found[vantage] = latest
    return found


def ever_ran(session: Session, targets_of: Mapping[str, Iterable[str]]) -> set[str]:
    """The vantages with any run at all, ever, of the targets ``targets_of`` names for
    them: one that has none never reported (an agent not started yet)."""
    found: set[str] = set()
    for vantage, targets in targets_of.items():
        names = sorted(targets)
        if names and session.scalar(_of(select(RunRow.id), vantage, names).limit(1)):
            found.add(vantage)
    return found


def _of(query: Q, vantage: str, names: list[str]) -> Q:
    """``query`` kept to the runs at ``vantage`` of the targets named."""
    joined = query.join(TargetRow, RunRow.target_id == TargetRow.id)
    return joined.where(TargetRow.name.in_(names), RunRow.vantage == vantage)
