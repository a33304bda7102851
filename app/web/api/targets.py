"""/api/v1 — targets: the list, and one target with its current breakdown per vantage."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter

from app.analysis.detectors.deadline import SloStatus
from app.clock import utcnow
from app.runtime.coverage import Unprobed
from app.store.db import Session
from app.store.models import TargetRow
from app.store.reads.breakdown import breakdown, last_runs
from app.store.reads.objectives import ObjectivesStatus, target_objectives
from app.store.reads.slo import target_slo
from app.store.targets import all_targets, target_row
from app.web.api.params import TARGET_ERRORS, RecentWindowDep, not_found
from app.web.deps import ServiceDep, SessionDep, maintenance_windows
from app.web.schemas import (
    BreakdownOut,
    TargetDetail,
    TargetOut,
    TargetVantageOut,
    UnprobedOut,
    redacted_url,
)

router = APIRouter(tags=["targets"])


@router.get("/targets", response_model=list[TargetOut])
def list_targets(session: SessionDep, service: ServiceDep) -> list[TargetOut]:
    """Every target known (from the targets file or by its runs), by name, with its vantages
    and those where nobody probes it although the file asks for it (``unprobed``)."""
    rows = all_targets(session)
    seen = _vantages(session)
    unprobed = service.coverage.by_target()
    return [_target_out(row, seen.get(row.id, {}), unprobed.get(row.name, [])) for row in rows]


@router.get("/targets/{name:target}", response_model=TargetDetail, responses=TARGET_ERRORS)
def get_target(
    name: str, session: SessionDep, service: ServiceDep, window: RecentWindowDep
) -> TargetDetail:
    """One target, and the breakdown of the window (default: the last hour) per vantage."""
    row = target_row(session, name)
    if row is None:
        raise not_found(f"no target {name!r}")
    seen = _vantages(session).get(row.id, {})
    found = [breakdown(session, name, window.start, window.end, v) for v in sorted(seen)]
    windows = maintenance_windows(service)
    slo = target_slo(session, name, window.end, windows) or {}
    objectives = target_objectives(session, name, window.end, windows) or {}
    return TargetDetail(
        **_target_out(row, seen, service.coverage.by_target().get(name, [])).model_dump(),
        window_from=window.start,
        window_to=window.end,
        breakdowns=[_with_slo(b.to_json(), slo, objectives) for b in found if b is not None],
    )


def _with_slo(
    breakdown: dict[str, Any],
    slo: dict[str | None, SloStatus],
    objectives: dict[str | None, ObjectivesStatus],
) -> BreakdownOut:
    status, others = slo.get(breakdown["vantage"]), objectives.get(breakdown["vantage"])
    shown = {"slo": status and status.to_json(), **(others.to_json() if others else {})}
    return BreakdownOut.model_validate(breakdown | shown)


def _vantages(session: Session) -> dict[int, dict[str, datetime]]:
    found: dict[int, dict[str, datetime]] = {}
    for (target, vantage), at in last_runs(session, utcnow()).items():
        found.setdefault(target, {})[vantage] = at
    return found


def _target_out(
    row: TargetRow, vantages: dict[str, datetime], unprobed: list[Unprobed]
) -> TargetOut:
    config: dict[str, Any] = row.config or {}
    return TargetOut(
        name=row.name,
        kind=row.kind,
        url=redacted_url(row.url) if row.url else "",
        interval_s=row.interval_s,
        samples=config.get("samples"),
        deadline_ms=config.get("deadline_ms"),
        active=row.active,
        header_names=sorted(config.get("headers") or {}),
        vantages=[TargetVantageOut(name=v, last_run_at=at) for v, at in sorted(vantages.items())],
        last_run_at=max(vantages.values(), default=None),
        unprobed=[UnprobedOut(vantage=u.vantage, reason=u.reason) for u in unprobed],
    )
