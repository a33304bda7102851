"""Overview page speed: 200 targets with 30 days of history, GET / on a real server.

Goal (issue 5): the overview renders in ≤ 300 ms p95; (issue 38) still at 10,000 targets,
paged on the server: the first page, a filtered page and a later page.

    .venv/bin/python -m bench.dashboard_overview                      # SQLite and PostgreSQL
    .venv/bin/python -m bench.dashboard_overview --backends sqlite --vantages 2
    .venv/bin/python -m bench.dashboard_overview --targets 10000 --days 1 --sample-days 0.02 \
        --paths / '/?q=endpoint-99' '/?page=100'

``--downgrade-to-0008`` takes a kept database (``--db``, ``--pg-db``) back to the schema before
``series_latest`` (the table dropped, Alembic stamped 0008), so that main's code can time the
same data: the "before" of bench/README.md.

The database holds what 30 days of watching leaves: every run's row, summary and digest
(every 15 minutes by default; the store never prunes digests), raw samples for the newest
day (older samples pruned, as a short retention would), and the rollups the overview and
charts read: hourly, 6-hourly and daily for all 30 days, 5- and 15-minute ones for the
newest day. Runs repeat one of
24 hour-of-day shapes per target profile, so generation is fast; the queries see the same
row counts and index shapes as real history. A few alerts are firing.

Then uvicorn serves the app on loopback (one process, started as ``serve`` starts it, but
with probing off) and the benchmark GETs
``/`` ``--requests`` times after ``--warmup`` requests, one at a time, timing each request
from send to last byte. It also times each data-layer call the page makes, so a slow page
names its slow call.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from sqlalchemy import Table, func, insert, pool, select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.views import open_alerts_by_series
from app.analysis.digest import Digest, digest_of, merge_digests
from app.config import Settings, Target, TargetsFile
from app.main import create_app
from app.runtime.targetsync import target_values
from app.store.db import make_engine, make_sessions
from app.store.migrate import downgrade, upgrade
from app.store.models import RollupRow, RunDigestRow, RunRow, SampleRow
from app.store.reads.digestbreakdowns import digest_breakdowns
from app.store.reads.latestruns import latest_times
from app.store.reads.seriesrank import fleet_counts, series_ranks
from app.store.reads.sparklines import sparklines
from app.store.rollups.digests import period_start
from app.store.serieslatest import rebuild
from app.store.targets import sync_targets, target_intervals
from app.web.pages.overview import WINDOW, overview_rows, ranked_page
from app.web.pages.overviewpaging import (
    PER_PAGE,
    SHOWS,
    SORTS,
    OverviewQuery,
    page_links,
)
from app.web.pages.render import templates
from bench.common import RunClock, machine_info
from tests.historyfactory import Server, add_fired_alert, medians_at
from tests.runfactory import make_run, record_of

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
PROFILES = 8
BATCH = 5000
LONG_PERIODS = (3600, 21600, 86400)
SHORT_PERIODS = (300, 900)
VANTAGE_NAMES = ("eu", "us", "ap")
FIRING_ALERTS = 10


@dataclass(frozen=True)
class Shape:
    """One run as stored: its summary columns, samples and digest (reused across days)."""

    values: dict[str, Any]
    samples: list[dict[str, Any]]
    digest: Digest


def shapes(seed: int = 1) -> dict[tuple[int, int], Shape]:
    """(profile, hour of day) → a run: busy hours queue more; profiles differ in scale."""
    rng = np.random.default_rng(seed)
    found = {}
    for profile in range(PROFILES):
        scale = 0.6 + 0.15 * profile
        for hour in range(24):
            at = datetime(2026, 1, 1, hour, tzinfo=UTC)
            medians = {k: v * scale for k, v in medians_at("t", "eu", at, http=False).items()}
            record = record_of(make_run(rng, at, medians, n=20))
            found[(profile, hour)] = _shape(record)
    return found


def _shape(record: Any) -> Shape:
    summary = record.summary()
    total = summary["total"]
    values = {
        "status": "complete",
        "n_samples": len(record.samples),
        "n_ok": sum(s.status == "ok" for s in record.samples),
        "n_errors": summary["errors"],
        "n_deadline_exceeded": summary["deadline_exceeded"],
        "dominant_phase": summary["dominant"],
        **{f"total_{q}": total.get(q) for q in ("p50", "p90", "p95", "p99")},
        "summary": summary,
    }
    samples = [
        {
            "idx": s.idx,
            "status": s.status,
            "error_class": None,
            "error": None,
            "http_status": 200,
            "total_ms": s.total_ms,
            "phases": s.phases,
            "provenance": dict.fromkeys(s.phases, "measured"),
            "marks": {},
            "details": {},
        }
        for s in record.samples
    ]
    return Shape(values, samples, digest_of(record.samples))


@dataclass(frozen=True)
class Scale:
    targets: int
    vantages: int
    days: int
    interval: timedelta
    sample_days: float


def targets_of(scale: Scale) -> list[Target]:
    interval = scale.interval.total_seconds()
    names = [f"endpoint-{i:04d}" for i in range(scale.targets)]
    return [Target(name=n, url=f"http://127.0.0.1:9/{n}", interval=interval) for n in names]


def fill(sessions: sessionmaker[Session], scale: Scale, now: datetime) -> dict[str, int]:
    """Write the fleet in bulk; returns row counts."""
    targets = targets_of(scale)
    names = [target.name for target in targets]
    with sessions.begin() as session:
        ids = sync_targets(session, target_values(targets), now)
    found = shapes()
    merged: dict[tuple[int, tuple[int, ...]], Digest] = {}
    counts = {"runs": 0, "samples": 0, "run_digests": 0, "rollups": 0}
    vantages = VANTAGE_NAMES[: scale.vantages]
    for index, name in enumerate(names):
        for vantage in vantages:
            series = _Series(ids[name], vantage, index % PROFILES, found, merged)
            with sessions.begin() as session:
                _write_series(session, series, scale, now, counts)
    with sessions.begin() as session:
        for name in names[:FIRING_ALERTS]:
            add_fired_alert(session, name, vantages[0], now)
        # Written in bulk above, not through ingest: made from the runs once, as migration
        # 0011 makes it for a database that has runs.
        rebuild(session.connection())
    return counts


@dataclass(frozen=True)
class _Series:
    target_id: int
    vantage: str
    profile: int
    shapes: dict[tuple[int, int], Shape]
    merged: dict[tuple[int, tuple[int, ...]], Digest]  # shared: (profile, hours) → merged

    def shape(self, at: datetime) -> Shape:
        return self.shapes[(self.profile, at.hour)]


def _run_times(scale: Scale, now: datetime) -> list[datetime]:
    count = int(timedelta(days=scale.days) / scale.interval)
    first = now - count * scale.interval + scale.interval / 3
    return [first + i * scale.interval for i in range(count)]


def _write_series(
    session: Session, series: _Series, scale: Scale, now: datetime, counts: dict[str, int]
) -> None:
    times = _run_times(scale, now)
    raw_since = now - timedelta(days=scale.sample_days)
    runs, samples, digests = [], [], []
    for at in times:
        shape, run_id = series.shape(at), uuid.uuid4()
        runs.append({"id": run_id, "target_id": series.target_id, "vantage": series.vantage,
                     "scheduled_at": at, "started_at": at, "finished_at": at + timedelta(seconds=5),
                     **shape.values})  # fmt: skip
        if at >= raw_since:
            samples += [{**s, "run_id": run_id, "started_at": at} for s in shape.samples]
        digests.append({"run_id": run_id, "target_id": series.target_id,
                        "vantage": series.vantage, "started_at": at,
                        "digest": shape.digest.to_json()})  # fmt: skip
    rollups = list(_rollups(series, times, raw_since, now))
    for table, rows in (
        (RunRow.__table__, runs),
        (SampleRow.__table__, samples),
        (RunDigestRow.__table__, digests),
        (RollupRow.__table__, rollups),
    ):
        _insert(session, table, rows)  # type: ignore[arg-type]
    for key, rows in (("runs", runs), ("samples", samples), ("run_digests", digests)):
        counts[key] += len(rows)
    counts["rollups"] += len(rollups)


def _rollups(
    series: _Series, times: list[datetime], raw_since: datetime, now: datetime
) -> Iterator[dict[str, Any]]:
    """Rollup rows as the store writes them, merged once per distinct set of shapes."""
    for seconds in (*LONG_PERIODS, *SHORT_PERIODS):
        groups: dict[datetime, list[datetime]] = {}
        for at in times:
            if seconds in SHORT_PERIODS and at < raw_since:
                continue
            groups.setdefault(period_start(at, seconds), []).append(at)
        for start, members in groups.items():
            key = (series.profile, tuple(at.hour for at in members))
            if key not in series.merged:
                series.merged[key] = merge_digests([series.shape(at).digest for at in members])
            digest = series.merged[key]
            yield {"target_id": series.target_id, "vantage": series.vantage,
                   "period_s": seconds, "period_start": start, "runs": digest.runs,
                   "n": digest.n, "total_p50": digest.total.quantiles({"p50": 0.5}).get("p50"),
                   "digest": digest.to_json(), "updated_at": now}  # fmt: skip


def _insert(session: Session, table: Table, rows: list[dict[str, Any]]) -> None:
    for first in range(0, len(rows), BATCH):
        session.execute(insert(table), rows[first : first + BATCH])


# Measuring --------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def time_pages(base: str, warmup: int, requests: int, path: str = "/") -> tuple[list[float], int]:
    timings = []
    size = 0
    with httpx.Client(base_url=base, timeout=120) as client:
        for index in range(warmup + requests):
            started = time.perf_counter()
            response = client.get(path)
            elapsed = (time.perf_counter() - started) * 1000
            response.raise_for_status()
            size = len(response.content)
            if index >= warmup:
                timings.append(elapsed)
    return timings, size


def time_calls(sessions: sessionmaker[Session], now: datetime, repeat: int) -> dict[str, float]:
    """Median ms of each data-layer call the overview makes (for its first page)."""
    with sessions() as session:
        page = sorted(latest_times(session))[:PER_PAGE]
    last = dict.fromkeys(page, now)
    calls: dict[str, Callable[[Session], object]] = {
        "ranked_page (first page, in SQL)": lambda s: ranked_page(
            s, OverviewQuery(), open_alerts_by_series(s), now
        ),
        "fleet_counts": lambda s: fleet_counts(s, now),
        "page breakdowns": lambda s: digest_breakdowns(s, (now - WINDOW, now), last, page),
        "page sparklines": lambda s: sparklines(s, now, series=page),
        "open_alerts_by_series": open_alerts_by_series,
        "target_intervals": target_intervals,
    }
    found = {}
    for name, call in calls.items():
        timings = []
        for _ in range(repeat):
            with sessions() as session:
                started = time.perf_counter()
                call(session)
                timings.append((time.perf_counter() - started) * 1000)
        found[name] = statistics.median(timings)
    return found


def time_render(sessions: sessionmaker[Session], now: datetime, repeat: int) -> float:
    """Median ms of the page's own work once its data is read: its rows built from the data,
    and the template (the ranking is the database's: ``ranked_page`` in ``time_calls``)."""
    with sessions() as session:
        ranks = series_ranks(session)
        alerts = open_alerts_by_series(session)
        paged = ranked_page(session, OverviewQuery(), alerts, now).paged
        intervals = {run.target: run.interval_s for run in ranks}
        page = sorted((run.target_id, run.vantage) for run in ranks)[:PER_PAGE]
        last = dict.fromkeys(page, now)
        found = digest_breakdowns(session, (now - WINDOW, now), last, page)
        sparks = sparklines(session, now, series=page)
    template = templates.get_template("overview.html.j2")
    query = OverviewQuery()
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        rows = overview_rows([found[p] for p in page], sparks, alerts, intervals, now)
        template.render(
            rows=rows, now=now, section="overview", target_count=len(rows), firing=0, stale=0,
            legend=[], window_text="hour", spark_hours=24, digest_every_s=10.0, query=query,
            paged=paged, links=page_links(query, paged), shows=SHOWS, sorts=SORTS,
            series_count=len(ranks), elsewhere=[], unprobed=[],
        )  # fmt: skip
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


def run_backend(url: str, args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    upgrade(url)
    if args.downgrade_to_0008:
        downgrade(url, "0008")
        return {}
    engine = make_engine(url)
    sessions = make_sessions(engine)
    interval = timedelta(seconds=args.interval)
    scale = Scale(args.targets, args.vantages, args.days, interval, args.sample_days)
    started = time.perf_counter()
    filled = filled_at(sessions, scale)
    if filled is None:
        now = datetime.now(UTC)
        counts = fill(sessions, scale, now)
    else:
        now, counts = filled, row_counts(sessions)
    fill_s = time.perf_counter() - started
    calls = time_calls(sessions, now, repeat=5)
    calls["rows and template (the page itself)"] = time_render(sessions, now, repeat=5)
    engine.dispose()
    result = {"counts": counts, "fill_s": fill_s, "reused": filled is not None, "calls": calls}
    if not args.no_page:
        result.update(time_server(url, scale, args, directory))
    return result


def time_server(
    url: str, scale: Scale, args: argparse.Namespace, directory: Path
) -> dict[str, Any]:
    settings = Settings(database_url=url, spool_dir=directory / "spool", vantage="eu",
                        config=directory / "absent.yaml")  # fmt: skip
    # As `serve` runs, start-up included (gc.freeze), but with nothing probed.
    app = create_app(settings, TargetsFile(targets=targets_of(scale)), probing=False)
    with Server(app, lifespan="on") as server:
        # --settle: let start-up's catch-up pass of the rollup loop (all retained runs)
        # finish, to time the page as a server that has been up for a while serves it.
        time.sleep(args.settle)
        pages = {}
        for path in args.paths:
            clock = RunClock()
            timings, size = time_pages(server.base, args.warmup, args.requests, path)
            pages[path] = {"timings": timings, "size": size, "busy": clock.report()}
    return {"pages": pages}


def filled_at(sessions: sessionmaker[Session], scale: Scale) -> datetime | None:
    """The ``now`` a kept database was filled at (from its newest run); None when empty."""
    with sessions() as session:
        newest = session.scalar(select(func.max(RunRow.started_at)))
    # _run_times: the newest run starts two thirds of an interval before ``now``.
    return None if newest is None else newest + scale.interval * 2 / 3


def row_counts(sessions: sessionmaker[Session]) -> dict[str, int]:
    tables = {"runs": RunRow, "samples": SampleRow, "run_digests": RunDigestRow,
              "rollups": RollupRow}  # fmt: skip
    with sessions() as session:
        return {
            name: session.scalar(select(func.count()).select_from(table)) or 0
            for name, table in tables.items()
        }


@contextmanager
def _pg_database(server: str, keep: str | None = None) -> Iterator[str]:
    """A fresh database, dropped afterwards; or ``keep``, made if missing and kept."""
    name = keep or f"pw_bench_{uuid.uuid4().hex[:8]}"
    admin = make_engine(server, poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        found = connection.exec_driver_sql(
            "SELECT 1 FROM pg_database WHERE datname = %(name)s", {"name": name}
        ).first()
        if found is None:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        if keep is None:
            with admin.connect() as connection:
                connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def report(backend: str, result: dict[str, Any], args: argparse.Namespace) -> None:
    counts = result["counts"]
    print(f"\n## {backend}")
    how = "reused as kept" if result["reused"] else f"filled in {result['fill_s']:.0f} s"
    print(
        f"fleet: {args.targets} targets × {args.vantages} vantage(s), {args.days} days every "
        f"{args.interval:g} s; rows: {counts} ({how})"
    )
    for path, timed in result.get("pages", {}).items():
        timings = timed["timings"]
        print(
            f"GET {path} ({timed['size'] / 1024:.0f} KiB), {len(timings)} requests after "
            f"{args.warmup} warm-up: p50 {pct(timings, 50):.0f} ms, "
            f"p95 {pct(timings, 95):.0f} ms, max {max(timings):.0f} ms  (goal p95 ≤ 300 ms: "
            f"{'met' if pct(timings, 95) <= 300 else 'NOT met'})"
        )
        print(f"requests took {timed['busy']}")
        slowest = sorted(range(len(timings)), key=lambda i: -timings[i])[:5]
        print("slowest (request: ms): " + ", ".join(f"{i}: {timings[i]:.0f}" for i in slowest))
    print("data-layer calls, median of 5: " + ", ".join(
        f"{name} {ms:.0f} ms" for name, ms in result["calls"].items()
    ))  # fmt: skip


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--targets", type=int, default=200)
    parser.add_argument("--vantages", type=int, default=1, choices=(1, 2, 3))
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--interval", type=float, default=900.0, help="seconds between runs")
    parser.add_argument(
        "--sample-days", type=float, default=1.0, help="days of raw samples kept (the newest)"
    )
    parser.add_argument("--paths", nargs="+", default=["/"], help="pages to time, in turn")
    parser.add_argument(
        "--downgrade-to-0008",
        action="store_true",
        help="take the kept database back to revision 0008 (main's schema) and stop",
    )
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--pg", default=DEFAULT_PG, help="PostgreSQL server (a database is made)")
    parser.add_argument(
        "--db",
        type=Path,
        help="SQLite file to fill and keep; one already filled is reused as it is (the calls "
        "are timed at the time it was filled at; the page at the clock's time)",
    )
    parser.add_argument("--pg-db", help="PostgreSQL database to fill and keep, as --db")
    parser.add_argument("--no-page", action="store_true", help="time the calls only, no server")
    parser.add_argument(
        "--settle", type=float, default=0.0, help="seconds between server start and warm-up"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    print(machine_info())
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for backend in args.backends:
            if backend == "sqlite":
                path = args.db or directory / "bench.db"
                result = run_backend(f"sqlite:///{path}", args, directory)
            else:
                with _pg_database(args.pg, args.pg_db) as url:
                    result = run_backend(url, args, directory)
            if result:
                report(backend, result, args)


if __name__ == "__main__":
    main()
