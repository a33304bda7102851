"""GET / — one row per target and vantage: what dominates now, how it trends, is it alerting."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from app.alerts.views import AlertView, open_alerts_by_series
from app.analysis.breakdown import Breakdown
from app.clock import utcnow
from app.durations import format_duration
from app.store.reads.breakdown import current_breakdowns
from app.store.reads.sparklines import sparklines
from app.store.rollups.digests import CATCH_UP_EVERY_S
from app.store.targets import target_intervals
from app.web.deps import ServiceDep, SessionDep
from app.web.pages import view
from app.web.pages.palette import PHASE_COLOURS
from app.web.pages.render import page

router = APIRouter()

WINDOW = timedelta(hours=1)
SPARK_HOURS = 24
Series = tuple[str, str]


@dataclass(frozen=True, slots=True)
class OverviewRow:
    breakdown: Breakdown
    segments: list[view.Segment]
    shares: Markup
    spark: Markup
    alerts: list[AlertView]  # its own open alerts, then its target's across vantages
    stale: bool
    interval_text: str


def overview_rows(
    breakdowns: Sequence[Breakdown],
    sparks: Mapping[Series, Sequence[float | None]],
    alerts: Mapping[tuple[str, str | None], Sequence[AlertView]],
    intervals: Mapping[str, float],
    now: datetime,
) -> list[OverviewRow]:
    """Rows by target then vantage; a series shows its own open alerts, then its target's
    cross-vantage ones. Stale: no run for two intervals or, interval unknown, none within
    the overview's window."""
    rows = []
    for b in sorted(breakdowns, key=lambda b: (b.target, b.vantage)):
        values = sparks.get((b.target, b.vantage or ""), [])
        interval = intervals.get(b.target)
        segments = view.share_segments((p.phase, p.share) for p in b.phases)
        rows.append(
            OverviewRow(
                breakdown=b,
                segments=segments,
                shares=view.sharebar_html(segments, "phase shares"),
                spark=view.spark_html(values, "p50"),
                alerts=[*alerts.get((b.target, b.vantage), ()), *alerts.get((b.target, None), ())],
                stale=view.is_stale(b.last_run_at, now, interval, unknown_after=WINDOW),
                interval_text=_every(interval),
            )
        )
    return rows


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def overview(request: Request, session: SessionDep, service: ServiceDep) -> HTMLResponse:
    now = utcnow()
    alerts = open_alerts_by_series(session)
    rows = overview_rows(
        # Merged run digests, not raw samples: 200 targets' raw samples take far longer than
        # the page's budget to decode (bench.dashboard_overview); the sketches' quantiles stay
        # within their 1 % bound (app/analysis/sketch.py), and a run
        # counts once the rollup loop has digested it (the page says so).
        current_breakdowns(session, now, window=WINDOW, exact=False),
        sparklines(session, now, hours=SPARK_HOURS),
        alerts,
        target_intervals(session),
        now,
    )
    return page(
        request,
        "overview.html.j2",
        now=now,
        section="overview",
        rows=rows,
        target_count=len({row.breakdown.target for row in rows}),
        # Each firing alert once, whether it shows on one row, on several (across vantages)
        # or on none (a vantage's silence; a target with no row).
        firing=sum(1 for group in alerts.values() for a in group if a.state == "firing"),
        elsewhere=_without_row(alerts, rows),
        stale=sum(1 for row in rows if row.stale),
        legend=_legend(rows),
        window_text="hour",
        spark_hours=SPARK_HOURS,
        digest_every_s=CATCH_UP_EVERY_S,
        # What the targets file asks for and nobody probes, and a refused reload.
        unprobed=service.coverage.problems(),
    )


def _every(interval: float | None) -> str:
    return f"every {format_duration(interval)}" if interval else "interval unknown"


def _without_row(
    alerts: Mapping[tuple[str, str | None], Sequence[AlertView]], rows: Sequence[OverviewRow]
) -> list[AlertView]:
    """Open alerts no row shows: a vantage's silence (target ``*``), a target with no row."""
    shown = {row.breakdown.target for row in rows}
    return [a for (target, _), group in sorted(alerts.items(), key=str) for a in group
            if target not in shown]  # fmt: skip


def _legend(rows: Sequence[OverviewRow]) -> list[str]:
    seen = {segment.phase for row in rows for segment in row.segments}
    return [phase for phase in PHASE_COLOURS if phase in seen]
