"""GET /targets/{name} — how the bottleneck moved: charts (drawn in the browser from the history
API), the current breakdown per vantage, the alert timeline and the recent runs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from app.alerts.views import AlertView, list_alerts
from app.analysis.breakdown import Breakdown
from app.analysis.connectsplit import connect_moved
from app.analysis.maintenance import MaintenanceWindow, spans_between
from app.clock import utcnow
from app.store.db import Session
from app.store.models import RunRow
from app.store.reads.breakdown import breakdown
from app.store.reads.browse import first_run_at, vantages_since
from app.store.reads.chart import run_summaries
from app.store.reads.connectsplit import connect_split
from app.store.reads.objectives import target_objectives
from app.store.reads.slo import target_slo
from app.store.targets import target_row
from app.web.deps import ServiceDep, SessionDep, WorkersDep, maintenance_windows
from app.web.pages.levers import levers_view
from app.web.pages.render import error_page, not_found, page

router = APIRouter()

RANGES = {
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
    "90d": timedelta(days=90),
}
LONGEST_DEFAULT = "7d"
CURRENT_WINDOW = timedelta(hours=1)
# What the last hour's connect split is held against (a note when it moved).
CONNECT_BEFORE = timedelta(hours=24)
RECENT_RUNS = 20
RECENT_RUNS_WITHIN = timedelta(days=2)
VANTAGES_WITHIN = timedelta(days=90)
TIMELINE_ALERTS = 20
# The LLM metrics the recent runs show (docs/metrics.md): metric, percentile, heading.
LLM_COLUMNS = (
    ("ttft_ms", "p50", "TTFT p50"),
    ("tpot_ms", "p50", "TPOT p50"),
    ("stall_ms", "p99", "stall p99"),
    ("output_tokens_per_s", "p50", "tokens/s p50"),
)


def fitting_range(first_run_at: datetime | None, now: datetime) -> str:
    """The shortest range that holds a target's whole history, at most 7 days: three hours
    of runs at the edge of a 7-day chart are a sliver no one can read."""
    if first_run_at is None:
        return LONGEST_DEFAULT
    for name, span in RANGES.items():
        if now - first_run_at <= span or name == LONGEST_DEFAULT:
            return name
    return LONGEST_DEFAULT


def recent_runs(session: Session, target: str, vantage: str | None, now: datetime) -> list[RunRow]:
    runs = run_summaries(session, target, now - RECENT_RUNS_WITHIN, now, vantage)
    return list(reversed(runs[-RECENT_RUNS:]))


def llm_cells(runs: Sequence[RunRow]) -> list[list[float | None]] | None:
    """Each run's ``LLM_COLUMNS`` from its summary, or None when no run has any (an HTTP
    target, or runs stored before the metrics were measured): no empty columns then."""
    found = [
        [((run.summary.get("llm") or {}).get(name) or {}).get(q) for name, q, _ in LLM_COLUMNS]
        for run in runs
    ]
    return found if any(v is not None for row in found for v in row) else None


def alert_marks(
    alerts: Sequence[AlertView], shaded: Sequence[tuple[str, datetime, datetime]] = ()
) -> str:
    """Where the charts draw a line: when each alert fired (or opened, if it never fired);
    and a shaded band over each maintenance span (``until``: its end)."""
    marks: list[dict[str, Any]] = [
        {"at": (alert.fired_at or alert.opened_at).timestamp(), "label": alert.summary}
        for alert in alerts
    ]
    marks += [
        {"at": start.timestamp(), "until": end.timestamp(), "label": f"maintenance: {name}"}
        for name, start, end in shaded
    ]
    # Inside a <script> element: "<" escaped so no summary can close it.
    return json.dumps(marks).replace("<", "\\u003c")


def connect_view(
    session: Session, target: str, vantage: str | None, now: datetime
) -> dict[str, Any]:
    """The last hour's connect split (dns, tcp, tls), and a note if it moved from the day
    before it (app.analysis.connectsplit)."""
    start = now - CURRENT_WINDOW
    split = connect_split(session, target, start, now, vantage)
    before = connect_split(session, target, start - CONNECT_BEFORE, start, vantage)
    return {"split": split, "note": connect_moved(before, split)}


def current(
    session: Session, target: str, vantages: Sequence[str], now: datetime
) -> list[Breakdown]:
    start = now - CURRENT_WINDOW
    found = (breakdown(session, target, start, now, vantage=v) for v in vantages)
    return [b for b in found if b is not None]


@router.get("/targets/{name}", response_class=HTMLResponse, include_in_schema=False)
async def target_page(
    request: Request,
    session: SessionDep,
    service: ServiceDep,
    workers: WorkersDep,
    name: str,
    range_: Annotated[str | None, Query(alias="range")] = None,
    vantage: str | None = None,
) -> HTMLResponse:
    """The page's reads on a thread, its levers in a worker (app.web.pages.levers)."""
    now = utcnow()
    try:
        windows = maintenance_windows(service)
        found = await run_in_threadpool(
            _context, request, session, name, range_, vantage, now, windows
        )
    finally:
        session.close()  # its connection back before the wait for a worker
    if isinstance(found, HTMLResponse):
        return found
    job = (service.resolved.database_url, service.settings.whatif_max_samples)
    levers = await levers_view(workers, job, name, vantage or None, now)
    unprobed = service.coverage.by_target().get(name, [])
    return await run_in_threadpool(
        page, request, "target.html.j2", **found, levers=levers, unprobed=unprobed
    )


def _context(
    request: Request,
    session: Session,
    name: str,
    range_: str | None,
    vantage: str | None,
    now: datetime,
    windows: Sequence[MaintenanceWindow],
) -> dict[str, Any] | HTMLResponse:
    """What the page shows but its levers; an error page for a bad name or range."""
    row = target_row(session, name)
    if row is None:
        return not_found(request, f"target named {name!r}")
    range_ = range_ or fitting_range(first_run_at(session, row.id), now)
    if range_ not in RANGES:
        choices = ", ".join(RANGES)
        return error_page(request, 400, "Unknown range", f"range must be one of {choices}.")
    vantages = vantages_since(session, name, now - VANTAGES_WITHIN)
    if vantage and vantage not in vantages:
        return not_found(request, f"vantage {vantage!r} for target {name!r}")
    shown = [vantage] if vantage else vantages
    alerts = list_alerts(session, target=name, limit=TIMELINE_ALERTS).items
    slo = target_slo(session, name, now, windows) or {}
    objectives = target_objectives(session, name, now, windows) or {}
    shaded = maintenance_spans(windows, name, vantage, now - RANGES[range_], now)
    runs = recent_runs(session, name, vantage, now)
    return {
        "now": now,
        "target": row,
        "ranges": list(RANGES),
        "range": range_,
        "range_seconds": int(RANGES[range_].total_seconds()),
        "vantage": vantage or "",
        "vantages": vantages,
        "breakdowns": current(session, name, shown, now),
        "connect": connect_view(session, name, vantage, now),
        "slo": [(v, slo[v]) for v in shown if v in slo],
        "objectives": [(v, objectives[v]) for v in shown if v in objectives],
        "alerts": alerts,
        "marks": alert_marks(alerts, shaded),
        "maintenance": shaded,
        "runs": runs,
        "llm_columns": [heading for _, _, heading in LLM_COLUMNS],
        "llm_cells": llm_cells(runs),
        "window_text": "hour",
    }


def maintenance_spans(
    windows: Sequence[MaintenanceWindow], name: str, vantage: str | None, a: datetime, b: datetime
) -> list[tuple[str, datetime, datetime]]:
    """The spans over [a, b] of the windows of ``name`` (at ``vantage``; None: any), each
    with its window's name, oldest first."""
    found = [
        (start, end, window.name)
        for window in windows
        if window.covers(name, vantage)
        for start, end in spans_between(window, a, b)
    ]
    return [(label, start, end) for start, end, label in sorted(found)]
