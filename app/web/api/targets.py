"""/api/v1 — targets: the list, and one target with its current breakdown per vantage."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response

from app.analysis.detectors.deadline import SloStatus
from app.runtime.coverage import Unprobed
from app.store.db import Session
from app.store.models import TargetRow
from app.store.reads.breakdown import breakdown
from app.store.reads.latestruns import latest_runs
from app.store.reads.objectives import ObjectivesStatus, target_objectives
from app.store.reads.paging import BadCursor, text_after
from app.store.reads.slo import target_slo
from app.store.targets import target_count, target_row, targets_after
from app.web.api.listpaging import LIST_HEADERS, ListLimitParam, paging_headers, trimmed
from app.web.api.params import (
    TARGET_ERRORS,
    CursorParam,
    RecentWindowDep,
    bad_request,
    not_found,
)
from app.web.deps import ServiceDep, SessionDep, maintenance_windows
from app.web.errors import errors
from app.web.schemas import (
    BreakdownOut,
    TargetDetail,
    TargetOut,
    TargetVantageOut,
    UnprobedOut,
    redacted_url,
)

router = APIRouter(tags=["targets"])


@router.get(
    "/targets",
    response_model=list[TargetOut],
    responses=errors(422) | {200: {"headers": LIST_HEADERS}},
)
def list_targets(
    session: SessionDep,
    service: ServiceDep,
    request: Request,
    response: Response,
    limit: ListLimitParam = None,
    cursor: CursorParam = None,
) -> list[TargetOut]:
    """Every target known (from the targets file or by its runs), by name, with its vantages
    and those where nobody probes it although the file asks for it (``unprobed``). With
    ``limit``, a page; the next one's link in ``Link``, the count in ``X-Total-Count``."""
    try:
        after = None if cursor is None else text_after(cursor)
    except BadCursor as exc:
        raise bad_request(str(exc)) from None
    rows, following = trimmed(targets_after(session, after, limit), lambda row: row.name, limit)
    seen = _vantages(session, [row.id for row in rows])
    unprobed = service.coverage.by_target()
    paging_headers(request, response, target_count(session), following)
    return [_target_out(row, seen.get(row.id, {}), unprobed.get(row.name, [])) for row in rows]


@router.get("/targets/{name:target}", response_model=TargetDetail, responses=TARGET_ERRORS)
def get_target(
    name: str, session: SessionDep, service: ServiceDep, window: RecentWindowDep
) -> TargetDetail:
    """One target, and the breakdown of the window (default: the last hour) per vantage."""
    row = target_row(session, name)
    if row is None:
        raise not_found(f"no target {name!r}")
    seen = _vantages(session, [row.id]).get(row.id, {})
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


def _vantages(session: Session, targets: list[int]) -> dict[int, dict[str, datetime]]:
    """Each target's vantages and the newest run at each (``series_latest``)."""
    found: dict[int, dict[str, datetime]] = {}
    for run in latest_runs(session, targets):
        found.setdefault(run.target_id, {})[run.vantage] = run.started_at
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
