"""Query: one target's runs over 90 days, with millions of samples stored.

Measured: ``run_chart`` (the long-window read, served from ``ix_runs_chart``), and
``run_summaries`` (ORM rows with the per-phase ``summary``, meant for short windows).

The database is populated first (not measured; see ``store_common.populate``) with a
realistic history, by default 29 targets x 2 vantages x 90 days x a run every 15 minutes
x 20 samples = 501,120 runs and 10,022,400 samples. Then, per backend:

* cold: the first call in a fresh process (new engine, new connection);
* warm: ``--repeat`` calls in this process, p50/p95/max, for an HTTP and an LLM target,
  all vantages and one vantage, after ``gc.freeze()`` as ``Service.start`` does;
* where the time goes: the same statement through the bare driver, SQLAlchemy Core rows,
  ORM entities, each with and without the ``summary`` JSON column, EXPLAIN ANALYZE, and
  (``--profile``) cProfile of the ORM call.

    .venv/bin/python -m bench.store_query --backends postgresql        # 10M samples
    .venv/bin/python -m bench.store_query --backends sqlite --days 90  # same layout
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import re
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session, defer

from app.store.db import make_sessions
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.reads.chart import run_chart, run_chart_query, run_summaries
from bench.common import REPO_ROOT, machine_info, pct, print_table
from bench.store_common import (
    Layout,
    add_database_options,
    add_layout_options,
    add_quiet_option,
    backend_label,
    backends,
    bench_database,
    bench_engine,
    database_url,
    layout_from,
    one_shot_engine,
    pg_version,
    populate,
    target_kind,
    target_name,
    wait_quiet,
)

GOAL_MS = 50.0
WINDOW = timedelta(days=90)


def window(engine: Engine) -> tuple[datetime, datetime]:
    """The last 90 days of the stored history."""
    with Session(engine) as session:
        last = session.scalar(select(func.max(RunRow.started_at)))
    assert last is not None, "the database holds no runs"
    end = last + timedelta(seconds=1)
    return end - WINDOW, end


def timed(call: Callable[[], Any], repeat: int, budget_s: float = 120.0) -> tuple[list[float], Any]:
    """Seconds per call, ``repeat`` times or until ``budget_s``; and the last result."""
    times: list[float] = []
    deadline = time.monotonic() + budget_s
    result = None
    for _ in range(repeat):
        before = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - before)
        if time.monotonic() > deadline:
            break
    return times, result


def summaries(engine: Engine, target: str, span: tuple[datetime, datetime], **kw: Any) -> int:
    with make_sessions(engine)() as session:
        return len(run_summaries(session, target, *span, **kw))


def chart(engine: Engine, target: str, span: tuple[datetime, datetime], **kw: Any) -> int:
    with make_sessions(engine)() as session:
        return len(run_chart(session, target, *span, **kw))


READS: dict[str, Callable[..., int]] = {"run_chart": chart, "run_summaries": summaries}


# --- cold: a fresh process ------------------------------------------------------------------


def cold_child(url: str, target: str, start: str, end: str, read_name: str) -> None:
    """In a fresh process: connect, first query, second query; one JSON line."""
    read = READS[read_name]
    before = time.perf_counter()
    engine = one_shot_engine(url)
    with engine.connect():
        pass
    connected = time.perf_counter() - before
    span = (datetime.fromisoformat(start), datetime.fromisoformat(end))
    first, rows = timed(lambda: read(engine, target, span), 1)
    second, _ = timed(lambda: read(engine, target, span), 1)
    engine.dispose()
    print(json.dumps({"connect": connected, "first": first[0], "second": second[0], "rows": rows}))


def cold(url: str, target: str, span: tuple[datetime, datetime], read: str) -> dict[str, float]:
    command = [sys.executable, "-m", "bench.store_query", "--cold-child", url, target]
    command += [span[0].isoformat(), span[1].isoformat(), read]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(f"cold query process failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# --- where the time goes -------------------------------------------------------------------


def captured_statement(engine: Engine, target: str, span: tuple[datetime, datetime]) -> Any:
    """The SQL and parameters ``run_summaries`` sends, exactly as the driver gets them."""
    seen: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        summaries(engine, target, span)
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    return seen[-1]


def driver_call(engine: Engine, statement: str, parameters: Any) -> Callable[[], int]:
    raw = engine.raw_connection()

    def call() -> int:
        cursor = raw.cursor()
        cursor.execute(statement, parameters)
        rows = cursor.fetchall()
        cursor.close()
        raw.rollback()
        return len(rows)

    return call


def without_summary(statement: str) -> str:
    """The same statement selecting every column but ``runs.summary``."""
    head, rest = re.split(r"\sFROM\s", statement, maxsplit=1)
    columns = [c.strip() for c in head.removeprefix("SELECT").split(",")]
    kept = [c for c in columns if not c.endswith(".summary")]
    return f"SELECT {', '.join(kept)} FROM {rest}"


def core_call(
    engine: Engine, target: str, span: tuple[datetime, datetime], summary: bool
) -> Callable[[], int]:
    columns = [c for c in RunRow.__table__.c if summary or c.name != "summary"]

    def call() -> int:
        query = (
            select(*columns)
            .join(TargetRow, RunRow.target_id == TargetRow.id)
            .where(TargetRow.name == target, RunRow.started_at >= span[0])
            .where(RunRow.started_at < span[1])
            .order_by(RunRow.started_at)
        )
        with engine.connect() as connection:
            return len(connection.execute(query).all())

    return call


def hourly_call(engine: Engine, target: str, span: tuple[datetime, datetime]) -> Callable[[], int]:
    """A candidate: the database aggregates to one row per vantage and hour."""
    if engine.dialect.name == "postgresql":
        hour = func.date_trunc("hour", RunRow.started_at)
    else:
        hour = func.strftime("%Y-%m-%d %H", RunRow.started_at)

    def call() -> int:
        query = (
            select(
                hour.label("hour"),
                RunRow.vantage,
                func.count(),
                func.sum(RunRow.n_errors),
                func.avg(RunRow.total_p50),
                func.max(RunRow.total_p95),
                func.max(RunRow.total_p99),
            )
            .join(TargetRow, RunRow.target_id == TargetRow.id)
            .where(TargetRow.name == target, RunRow.started_at >= span[0])
            .where(RunRow.started_at < span[1])
            .group_by(hour, RunRow.vantage)
            .order_by(hour)
        )
        with engine.connect() as connection:
            return len(connection.execute(query).all())

    return call


def orm_deferred_call(
    engine: Engine, target: str, span: tuple[datetime, datetime]
) -> Callable[[], int]:
    def call() -> int:
        query = (
            select(RunRow)
            .options(defer(RunRow.summary))
            .join(TargetRow, RunRow.target_id == TargetRow.id)
            .where(TargetRow.name == target, RunRow.started_at >= span[0])
            .where(RunRow.started_at < span[1])
            .order_by(RunRow.started_at)
        )
        with Session(engine) as session:
            return len(session.scalars(query).all())

    return call


def plan(engine: Engine, statement: str, parameters: Any) -> str:
    prefix = "EXPLAIN (ANALYZE, BUFFERS) " if engine.dialect.name == "postgresql" else ""
    prefix = prefix or "EXPLAIN QUERY PLAN "
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(prefix + statement, parameters).all()
    return "\n".join(" | ".join(str(v) for v in row) for row in rows)


def breakdown(
    engine: Engine, target: str, span: tuple[datetime, datetime], repeat: int
) -> list[list[str]]:
    statement, parameters = captured_statement(engine, target, span)
    lean = without_summary(statement)
    ways: list[tuple[str, Callable[[], int]]] = [
        ("driver: execute + fetchall", driver_call(engine, statement, parameters)),
        ("driver, without summary column", driver_call(engine, lean, parameters)),
        ("SQLAlchemy Core rows", core_call(engine, target, span, summary=True)),
        ("SQLAlchemy Core rows, without summary", core_call(engine, target, span, False)),
        ("ORM entities, summary deferred", orm_deferred_call(engine, target, span)),
        ("ORM entities: run_summaries", lambda: summaries(engine, target, span)),
        ("run_chart (ix_runs_chart)", lambda: chart(engine, target, span)),
        ("candidate: SQL GROUP BY hour, vantage", hourly_call(engine, target, span)),
    ]
    rows = [timed_row(name, call, repeat) for name, call in ways]
    gc.unfreeze()  # and the same without gc.freeze(), for comparison
    try:
        rows.append(timed_row("run_chart, no gc.freeze()", ways[6][1], repeat))
        rows.append(timed_row("run_summaries, no gc.freeze()", ways[5][1], repeat))
    finally:
        gc.freeze()
    return rows


def timed_row(name: str, call: Callable[[], int], repeat: int) -> list[str]:
    call()  # warm
    times, count = timed(call, repeat)
    return [name, str(count), f"{pct(times, 50) * 1000:.1f}", f"{pct(times, 95) * 1000:.1f}"]


def chart_plan(engine: Engine, target: str, span: tuple[datetime, datetime]) -> str:
    query = run_chart_query(engine.dialect.name, target, *span)
    compiled = query.compile(dialect=engine.dialect)
    parameters: Any = compiled.params
    if engine.dialect.name == "sqlite":  # qmark style, and times as SQLite keeps them
        values = [compiled.params[name] for name in compiled.positiontup or []]
        parameters = tuple(_sqlite_value(value) for value in values)
    return f"{compiled.string}\n{parameters}\n\n{plan(engine, compiled.string, parameters)}"


def _sqlite_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return value


def profile(engine: Engine, target: str, span: tuple[datetime, datetime]) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        summaries(engine, target, span)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime").print_stats(20)
    return out.getvalue().strip()


# --- the benchmark ----------------------------------------------------------------------


def sizes(engine: Engine) -> str:
    with Session(engine) as session:
        runs = session.scalar(select(func.count()).select_from(RunRow))
        samples = session.scalar(select(func.count()).select_from(SampleRow))
        if engine.dialect.name == "postgresql":
            size = int(session.scalar(select(func.pg_database_size(func.current_database()))) or 0)
        else:
            size = Path(str(engine.url.database)).stat().st_size
    return f"{runs:,} runs, {samples:,} samples stored; database {size / 2**30:.2f} GiB"


def cold_row(url: str, target: str, span: tuple[datetime, datetime], read: str) -> list[str]:
    first = cold(url, target, span, read)
    timings = [f"connect {first['connect'] * 1000:.1f}", f"{first['first'] * 1000:.1f}"]
    timings.append(f"second {first['second'] * 1000:.1f}")
    where = [backend_label(url), read, f"{target} (cold, new process)", "all"]
    return [*where, f"{first['rows']:,}", *timings, "-"]


def warm_row(
    engine: Engine,
    read: str,
    target: str,
    span: tuple[datetime, datetime],
    vantage: str | None,
    n: int,
) -> list[str]:
    def call() -> int:
        return READS[read](engine, target, span, vantage=vantage)

    call()
    times, count = timed(call, n)
    p50, p95, top = pct(times, 50) * 1000, pct(times, 95) * 1000, max(times) * 1000
    met = "yes" if p95 <= GOAL_MS else "NO"
    where = [backend_label(str(engine.url)), read, target, vantage or "all"]
    return [*where, f"{count:,}", f"{p50:.1f}", f"{p95:.1f}", f"{top:.1f}", met]


def measure(url: str, args: argparse.Namespace, layout: Layout) -> list[list[str]]:
    with bench_database(url, args.pg, keep=args.keep, reuse=args.reuse) as reused:
        if reused:
            print("reusing the populated database")
        else:
            print(f"populating: {layout.describe()}")
            print(f"populated in {populate(url, layout, budget_s=args.populate_budget):.0f} s")
        engine = bench_engine(url)
        print(sizes(engine))
        span = window(engine)
        http, llm = target_name(1), target_name(0)
        assert target_kind(0) != target_kind(1)
        wait_quiet(args.wait_quiet)
        rows = [cold_row(url, http, span, read) for read in READS]
        gc.collect()
        gc.freeze()  # as Service.start does once the service has started
        for read in READS:
            for name in (http, llm):
                for vantage in (None, "vantage-0"):
                    wait_quiet(args.wait_quiet)
                    rows.append(warm_row(engine, read, name, span, vantage, args.repeat))
        print_table(HEADERS, rows)
        print(f"\n### where the time goes ({backend_label(url)}, {http}, all vantages, warm)")
        wait_quiet(args.wait_quiet)
        print_table(["path", "rows", "p50 ms", "p95 ms"], breakdown(engine, http, span, 20))
        statement, parameters = captured_statement(engine, http, span)
        print(f"\n```\n{statement}\n{parameters}\n\n{plan(engine, statement, parameters)}\n```")
        print(f"\n```\n{chart_plan(engine, http, span)}\n```")
        if args.profile:
            print(f"\n```\n{profile(engine, http, span)}\n```")
        engine.dispose()
        return rows


HEADERS = [
    "backend",
    "read",
    "target",
    "vantage",
    "rows",
    "p50 ms",
    "p95 ms",
    "max ms",
    "p95 <= 50 ms",
]


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_database_options(parser, "pw_bench_query")
    add_layout_options(parser, Layout())
    add_quiet_option(parser)
    parser.add_argument("--reuse", action="store_true", help="use a kept database as it is")
    parser.add_argument("--repeat", type=int, default=30, help="warm queries per case")
    parser.add_argument("--profile", action="store_true", help="cProfile run_summaries")
    parser.add_argument("--populate-budget", type=float, default=3600.0, metavar="S")
    parser.add_argument("--cold-child", nargs=5, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    if args.cold_child:
        cold_child(*args.cold_child)
        return
    chosen = backends(args.backends)
    pg = f"; PostgreSQL {pg_version(args.pg)}" if "postgresql" in chosen else ""
    print(f"# Query: one target's runs over 90 days\n{machine_info()}{pg}\n")
    layout = layout_from(args)
    rows = []
    for backend in chosen:
        url = database_url(backend, args.db_name, args.pg, args.sqlite_dir)
        print(f"## {backend_label(url)}")
        rows += measure(url, args, layout)
        print()
    print("## all")
    print_table(HEADERS, rows)


if __name__ == "__main__":
    main()
