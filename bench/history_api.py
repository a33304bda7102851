"""History API: ``GET /api/v1/targets/{name}/history`` over 90 days, 10 M samples stored.

The database is the query benchmark's (``store_common.populate``: 29 targets x 2 vantages x
90 days x a run every 15 minutes x 20 samples = 10,022,400 samples), made if absent (the
layout options shape only a database made anew), reused if present. It is migrated to head,
then the rollups of the measured targets are built from their raw samples by
``app.store.rollups.catchup.catch_up`` (timed, not part of the goal; in service they are kept up as
runs are stored). Then the real app (``create_app``) is served by uvicorn on loopback and
each case is requested ``--repeat`` times over HTTP, after a cold first call and
``--warmup`` calls; the numbers are client-side latency, request sent to whole body read.

    .venv/bin/python -m bench.history_api                       # PostgreSQL, pw_bench_query
    .venv/bin/python -m bench.history_api --repeat 200 --wait-quiet 300
"""

from __future__ import annotations

import argparse
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from sqlalchemy import func, select

from app.config import Settings, TargetsFile
from app.main import create_app
from app.store.db import make_sessions
from app.store.migrate import upgrade
from app.store.models import RollupRow, RunRow, SampleRow, TargetRow
from app.store.rollups.catchup import catch_up
from bench.common import machine_info, pct, print_table
from bench.store_common import (
    PG_SERVER,
    SQLITE_DIR,
    Layout,
    add_layout_options,
    add_quiet_option,
    bench_database,
    bench_engine,
    database_url,
    layout_from,
    pg_version,
    populate,
    target_kind,
    target_name,
    wait_quiet,
)

GOAL_P95_MS = 100.0
DAY = timedelta(days=1)


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db-name", default="pw_bench_query")
    parser.add_argument("--pg", default=PG_SERVER)
    parser.add_argument("--repeat", type=int, default=100, help="timed requests per case")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--only", default="", help="measure only cases whose label has this")
    add_quiet_option(parser)
    add_layout_options(parser, Layout())
    return parser.parse_args(argv)


def prepare(url: str, pg: str, layout: Layout) -> datetime:
    """The populated database at head, the measured targets' rollups built; its end time."""
    with bench_database(url, pg, keep=True, reuse=True) as reused:
        if not reused:
            print(f"populating: {layout.describe()}", flush=True)
            print(f"populated in {populate(url, layout):.0f} s", flush=True)
    upgrade(url)
    engine = bench_engine(url)
    sessions = make_sessions(engine)
    with sessions() as session:
        first, end = session.execute(
            select(func.min(RunRow.started_at), func.max(RunRow.started_at))
        ).one()
        samples = session.scalar(select(func.count()).select_from(SampleRow))
        print(
            f"{samples:,} samples stored, runs from {first:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M}"
        )
        ids = {
            name: session.scalar(select(TargetRow.id).where(TargetRow.name == name))
            for name in measured()
        }
    for name, target in ids.items():
        began = time.monotonic()
        added = catch_up(sessions, first, end, batch=500, targets=[target])
        print(
            f"rollups of {name}: {added:,} runs added in {time.monotonic() - began:.1f} s",
            flush=True,
        )
    with sessions() as session:
        rows = session.execute(
            select(RollupRow.period_s, func.count())
            .group_by(RollupRow.period_s)
            .order_by(RollupRow.period_s)
        ).all()
        print("rollup rows by period:", ", ".join(f"{p} s: {n:,}" for p, n in rows))
    engine.dispose()
    return end + timedelta(seconds=1)


def measured() -> list[str]:
    """The LLM target: six phases, the most work per bucket."""
    assert target_kind(0) != target_kind(1)
    return [target_name(0)]


def cases(end: datetime) -> list[tuple[str, dict[str, Any]]]:
    (llm,) = measured()
    iso = end.isoformat()

    def span(days: float, **extra: Any) -> dict[str, Any]:
        return {"from": (end - days * DAY).isoformat(), "to": iso, **extra}

    return [
        (f"{llm} 90 d, all vantages (6 h buckets)", {"name": llm, **span(90)}),
        (f"{llm} 90 d, vantage-0 (6 h)", {"name": llm, **span(90, vantage="vantage-0")}),
        (f"{llm} 90 d, 1 d buckets", {"name": llm, **span(90, bucket=86400)}),
        (f"{llm} 30 d (6 h)", {"name": llm, **span(30)}),
        (f"{llm} 7 d (1 h)", {"name": llm, **span(7)}),
        (f"{llm} 24 h (5 min)", {"name": llm, **span(1)}),
        (f"{llm} 6 h (1 min, run digests)", {"name": llm, **span(0.25)}),
    ]


@contextmanager
def served(url: str) -> Iterator[str]:
    settings = Settings(
        config=Path("/nonexistent/phasewatch.yaml"),
        database_url=url,
        spool_dir=Path("/tmp/pw_bench/history-spool"),
    )
    app = create_app(settings, TargetsFile())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, lifespan="off", log_config=None, access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        app.state.service.engine.dispose()


def timed_get(client: httpx.Client, params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    return timed_get_cpu(client, params)[::2]  # type: ignore[return-value]


def timed_get_cpu(
    client: httpx.Client, params: dict[str, Any]
) -> tuple[float, float, dict[str, Any]]:
    """Wall ms, this process's CPU ms (client and server threads: all but PostgreSQL's
    share, and what contention does not inflate much), and the body."""
    query = {k: v for k, v in params.items() if k != "name"}
    began, cpu = time.perf_counter(), time.process_time()
    response = client.get(f"/api/v1/targets/{params['name']}/history", params=query)
    elapsed = (time.perf_counter() - began) * 1000
    used = (time.process_time() - cpu) * 1000
    assert response.status_code == 200, response.text
    return elapsed, used, response.json()


def measure(base: str, end: datetime, args: argparse.Namespace) -> list[list[str]]:
    rows = []
    with httpx.Client(base_url=base, timeout=60) as client:
        for label, params in cases(end):
            if args.only not in label:
                continue
            wait_quiet(args.wait_quiet)
            cold, body = timed_get(client, params)
            for _ in range(args.warmup):
                timed_get(client, params)
            timed = [timed_get_cpu(client, params)[:2] for _ in range(args.repeat)]
            times, cpu = [t for t, _ in timed], [c for _, c in timed]
            p95 = pct(times, 95)
            rows.append(
                [
                    label,
                    f"{len(body['time'])}",
                    f"{sum(body['runs']):,}",
                    f"{sum(body['samples']):,}",
                    body["source"],
                    f"{cold:.1f}",
                    f"{pct(times, 50):.1f}",
                    f"{p95:.1f}",
                    f"{max(times):.1f}",
                    f"{pct(cpu, 50):.1f}",
                    "yes" if p95 <= GOAL_P95_MS else "**no**",
                ]
            )
            print(" | ".join(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    url = database_url("postgresql", args.db_name, args.pg, SQLITE_DIR)
    print(f"{machine_info()}; PostgreSQL {pg_version(args.pg)}")
    end = prepare(url, args.pg, layout_from(args))
    with served(url) as base:
        rows = measure(base, end, args)
    headers = [
        "case",
        "buckets",
        "runs",
        "samples",
        "source",
        "cold ms",
        "p50 ms",
        "p95 ms",
        "max ms",
        "CPU ms p50",
        "p95 ≤ 100 ms",
    ]
    print()
    print_table(headers, rows)


if __name__ == "__main__":
    main()
