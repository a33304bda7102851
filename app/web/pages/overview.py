"""GET / — one row per target and vantage: what dominates now, how it trends, is it alerting."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from app.alerts.views import AlertView, open_alerts_by_series
from app.analysis.breakdown import Breakdown
from app.clock import utcnow
from app.durations import format_duration
from app.store.db import Session
from app.store.reads.digestbreakdowns import digest_breakdowns
from app.store.reads.latestruns import latest_runs
from app.store.reads.seriesrank import (
    FleetCounts,
    Only,
    SeriesFilter,
    SeriesRank,
    ranked_slice,
    series_ranks,
)
from app.store.reads.sparklines import sparklines
from app.store.rollups.digests import CATCH_UP_EVERY_S
from app.web.deps import ServiceDep, SessionDep
from app.web.pages import view
from app.web.pages.overviewpaging import (
    SHOWS,
    SORTS,
    BadQuery,
    OverviewQuery,
    Paged,
    SeriesFacts,
    kept_sorted,
    missed_share,
    page_links,
    parse_query,
    ranked_apart,
    split_page,
)
from app.web.pages.palette import PHASE_COLOURS
from app.web.pages.render import error_page, page

router = APIRouter()

WINDOW = timedelta(hours=1)
SPARK_HOURS = 24
Series = tuple[str, str]
_UNKNOWN = 10**12  # series beyond the alerted ones, before the database has counted them


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
    """Rows in the order given (the page's); a series shows its own open alerts, then its
    target's cross-vantage ones. Stale: no run for two intervals or, interval unknown, none
    within the overview's window."""
    rows = []
    for b in breakdowns:
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


def series_facts(
    ranks: Iterable[SeriesRank],
    alerts: Mapping[tuple[str, str | None], Sequence[AlertView]],
    now: datetime,
) -> list[SeriesFacts]:
    """What ranks each series, from its newest run, its alerts and its interval."""
    found = []
    for run in ranks:
        mine = [*alerts.get((run.target, run.vantage), ()), *alerts.get((run.target, None), ())]
        last = datetime.fromtimestamp(run.started_s, UTC)
        found.append(
            SeriesFacts(
                target=run.target,
                vantage=run.vantage,
                firing=sum(a.state == "firing" for a in mine),
                open=len(mine),
                missed=missed_share(run.n_samples, run.n_errors, run.n_deadline_exceeded),
                stale=view.is_stale(last, now, run.interval_s, unknown_after=WINDOW),
            )
        )
    return found


@dataclass(frozen=True, slots=True)
class RankedPage:
    paged: Paged
    ranks: dict[Series, SeriesRank]  # the page's series and every alerted target's
    alerted_targets: set[str]  # targets of open alerts that have a series
    fleet: FleetCounts


def ranked_page(
    session: Session,
    query: OverviewQuery,
    alerts: Mapping[tuple[str, str | None], Sequence[AlertView]],
    now: datetime,
) -> RankedPage:
    """The page's series. Alerts rank first but are few and in a table of their own: the
    alerted series are ranked here, the rest of the fleet by the database (filtered,
    sorted, counted and cut to the page there, with the summary's counts, in one
    statement), so a page reads its own rows, not every series'. Sorted by name, alerts do
    not matter to the order: all of it is the database's."""
    touched = series_ranks(session, {target for target, _ in alerts})
    alerted = [f for f in series_facts(touched, alerts, now) if f.open]
    apart = ranked_apart(query)
    ahead = kept_sorted(alerted, query) if apart else []
    ids = {(r.target, r.vantage): r.target_id for r in touched}
    left_out = {(ids[(f.target, f.vantage)], f.vantage) for f in alerted} if apart else set()
    where = SeriesFilter(tuple(query.q.lower().split()), _only(query), frozenset(left_out))
    only_alerted = query.show in ("firing", "alerting")
    # The slice for the page asked for, as if it were not past the last: the count comes
    # in the same statement, and only a page past the last (a link older than a shrink)
    # needs a second one.
    _, offset, count = split_page(ahead, 0 if only_alerted else _UNKNOWN, query)
    found = ranked_slice(session, now, where, query.sort, offset, count)
    rest = 0 if only_alerted else found.matching
    paged, start, size = split_page(ahead, rest, query)
    rows = found.rows[:size]
    if size and (start != offset or size > len(found.rows)):
        rows = ranked_slice(session, now, where, query.sort, start, size).rows
    items = [*paged.items, *series_facts(rows, alerts, now)]
    ranks = {(r.target, r.vantage): r for r in (*touched, *rows)}
    return RankedPage(replace(paged, items=items), ranks, {r.target for r in touched}, found.fleet)


def _only(query: OverviewQuery) -> Only:
    return "missing" if query.show == "missing" else "stale" if query.show == "stale" else "all"


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def overview(request: Request, session: SessionDep, service: ServiceDep) -> HTMLResponse:
    try:
        query = parse_query(request.query_params)
    except BadQuery as exc:
        return error_page(request, 400, "Bad overview query", f"{exc}.")
    now = utcnow()
    alerts = open_alerts_by_series(session)
    ranked = ranked_page(session, query, alerts, now)
    paged, ranks = ranked.paged, ranked.ranks
    pairs = [(ranks[(f.target, f.vantage)].target_id, f.vantage) for f in paged.items]
    shown = {(run.target_id, run.vantage): run for run in latest_runs(session, _ids(pairs))}
    last = {pair: shown[pair].started_at for pair in pairs if pair in shown}
    pairs = [pair for pair in pairs if pair in last]  # a series gone meanwhile: not shown
    intervals = {run.target: run.interval_s for run in ranks.values()}
    # Merged run digests, not raw samples: 200 targets' raw samples take far longer than
    # the page's budget to decode (bench.dashboard_overview); the sketches' quantiles stay
    # within their 1 % bound (app/analysis/sketch.py), and a run
    # counts once the rollup loop has digested it (the page says so).
    breakdowns = digest_breakdowns(session, (now - WINDOW, now), last, pairs)
    sparks = sparklines(session, now, hours=SPARK_HOURS, series=pairs)
    rows = overview_rows([breakdowns[p] for p in pairs], sparks, alerts, intervals, now)
    fleet = ranked.fleet
    return page(
        request,
        "overview.html.j2",
        now=now,
        section="overview",
        rows=rows,
        query=query,
        paged=paged,
        links=page_links(query, paged),
        shows=SHOWS,
        sorts=SORTS,
        series_count=fleet.series,
        target_count=fleet.targets,
        # Each firing alert once, whether it shows on one row, on several (across vantages)
        # or on none (a vantage's silence; a target with no row).
        firing=sum(1 for group in alerts.values() for a in group if a.state == "firing"),
        elsewhere=_without_row(alerts, ranked.alerted_targets),
        stale=fleet.stale,
        legend=_legend(rows),
        window_text="hour",
        spark_hours=SPARK_HOURS,
        digest_every_s=CATCH_UP_EVERY_S,
        # What the targets file asks for and nobody probes, and a refused reload.
        unprobed=service.coverage.problems(),
    )


def _ids(pairs: Sequence[tuple[int, str]]) -> set[int]:
    return {target for target, _ in pairs}


def _every(interval: float | None) -> str:
    return f"every {format_duration(interval)}" if interval else "interval unknown"


def _without_row(
    alerts: Mapping[tuple[str, str | None], Sequence[AlertView]], shown: set[str]
) -> list[AlertView]:
    """Open alerts no row shows on any page: a vantage's silence (target ``*``), a target
    with no series."""
    return [a for (target, _), group in sorted(alerts.items(), key=str) for a in group
            if target not in shown]  # fmt: skip


def _legend(rows: Sequence[OverviewRow]) -> list[str]:
    seen = {segment.phase for row in rows for segment in row.segments}
    return [phase for phase in PHASE_COLOURS if phase in seen]
