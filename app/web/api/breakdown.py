"""/api/v1 — the breakdown of one target over a window: the seed's table as JSON."""

from __future__ import annotations

from fastapi import APIRouter

from app.store.reads.breakdown import breakdown
from app.store.reads.connectsplit import connect_split
from app.store.reads.objectives import target_objectives
from app.store.reads.slo import target_slo
from app.web.api.params import (
    TARGET_ERRORS,
    VantageParam,
    WindowDep,
    check_vantage,
    target_id_or_404,
)
from app.web.deps import ServiceDep, SessionDep, maintenance_windows
from app.web.schemas import BreakdownOut

router = APIRouter(tags=["breakdown"])


@router.get("/targets/{name:path}/breakdown", response_model=BreakdownOut, responses=TARGET_ERRORS)
def get_breakdown(
    name: str,
    session: SessionDep,
    service: ServiceDep,
    window: WindowDep,
    vantage: VantageParam = None,
) -> BreakdownOut:
    """Per-phase p50/p90/p95/p99 with n, shares, the dominant phase and deadline misses,
    for [from, to) (default: the last 24 hours), one vantage or all pooled; with the
    deadline SLO as of ``to`` (error budget left, burn rate per window), the target's
    other objectives and goodput likewise, and ``connect`` split into dns, tcp and tls over
    the window's new connections.

    Exact while the window's raw samples are kept (``source: samples``); from merged
    digests, within 1 %, once some were pruned (``source: digests``).
    """
    target = target_id_or_404(session, name)
    check_vantage(session, target, name, vantage)
    found = breakdown(session, name, window.start, window.end, vantage)
    assert found is not None  # the target exists
    windows = maintenance_windows(service)
    slo = (target_slo(session, name, window.end, windows) or {}).get(vantage)
    objectives = (target_objectives(session, name, window.end, windows) or {}).get(vantage)
    split = connect_split(session, name, window.start, window.end, vantage)
    shown = {
        "slo": slo and slo.to_json(),
        "connect_split": split and split.to_json(),
        **(objectives.to_json() if objectives else {}),
    }
    return BreakdownOut.model_validate(found.to_json() | shown)
