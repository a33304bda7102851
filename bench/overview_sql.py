"""What one overview request asks PostgreSQL: every statement a GET sends (each EXPLAIN
ANALYZEd, with how many rows of ``series_latest`` and ``targets`` it read), and the CPU of
the ranking (``ranked_page``) a call, this process's and the database backend's.

Run it on a database ``bench.dashboard_overview`` filled and kept (``--pg-db``), from each
tree in turn (its PYTHONPATH) to compare two versions on the same data:

    python -m bench.overview_sql postgresql+psycopg://postgres@127.0.0.1:5432/pw_bench \\
        --paths / '/?q=endpoint-99' '/?page=100' --calls 20

Backend CPU is read from ``/proc/<backend pid>/stat`` (the server on this machine): on a
busy machine it moves less than wall time, which is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from sqlalchemy import event, pool, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from app.alerts.views import open_alerts_by_series
from app.config import Settings, TargetsFile
from app.main import create_app
from app.store.db import make_engine, make_sessions
from app.web.pages.overview import ranked_page
from app.web.pages.overviewpaging import parse_query
from bench.common import machine_info
from bench.dashboard_overview import Scale, targets_of

FLEET_READS = re.compile(r"on (series_latest|targets)\b.*actual time=\S+ rows=(\d+) loops=(\d+)")


def statements(url: str, targets: int, path: str) -> list[tuple[str, dict[str, Any]]]:
    """The statements one GET of ``path`` sends (after one GET to warm), in order: those of
    the thread that read ``series_latest`` (the handler's; the service's loops run too)."""
    sent: list[tuple[int, str, dict[str, Any]]] = []
    on = threading.Event()

    def grab(conn: Any, cursor: Any, statement: str, params: Any, *rest: Any) -> None:
        if on.is_set() and statement.lstrip().upper().startswith(("SELECT", "WITH")):
            sent.append((threading.get_ident(), statement, params))

    event.listen(Engine, "before_cursor_execute", grab)
    scale = Scale(targets, 1, 1, timedelta(hours=1), 0.05)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            settings = Settings(database_url=url, spool_dir=d / "spool", vantage="eu",
                                config=d / "absent.yaml")  # fmt: skip
            app = create_app(settings, TargetsFile(targets=targets_of(scale)), probing=False)
            with TestClient(app, base_url="http://127.0.0.1:8000") as client:
                client.get(path)
                on.set()
                client.get(path).raise_for_status()
                on.clear()
    finally:
        event.remove(Engine, "before_cursor_execute", grab)
    handler = next(thread for thread, statement, _ in sent if "series_latest" in statement)
    return [(statement, params) for thread, statement, params in sent if thread == handler]


def explain(session: Session, statement: str, params: dict[str, Any]) -> list[str]:
    raw = session.connection().connection.dbapi_connection
    assert raw is not None
    with raw.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement, params)
        return [line for (line,) in cursor.fetchall()]


def backend_cpu_s(session: Session) -> float:
    pid = session.execute(text("SELECT pg_backend_pid()")).scalar()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ranking_cpu(url: str, path: str, calls: int) -> tuple[float, float, float]:
    """ms a ``ranked_page`` call: this thread's CPU, the backend's CPU, wall."""
    engine = make_engine(url, poolclass=pool.StaticPool)
    query, now = parse_query(dict(parse_qsl(path.partition("?")[2]))), datetime.now(UTC)
    with make_sessions(engine)() as session:
        alerts = open_alerts_by_series(session)
        ranked_page(session, query, alerts, now)
        backend, thread, wall = backend_cpu_s(session), time.thread_time(), time.perf_counter()
        for _ in range(calls):
            ranked_page(session, query, alerts, now)
        backend = backend_cpu_s(session) - backend
        thread, wall = time.thread_time() - thread, time.perf_counter() - wall
    engine.dispose()
    return thread * 1000 / calls, backend * 1000 / calls, wall * 1000 / calls


def report(url: str, args: argparse.Namespace) -> None:
    engine = make_engine(url, poolclass=pool.NullPool)
    for path in args.paths:
        sent = statements(url, args.targets, path)
        print(f"\n## GET {path}: {len(sent)} statements")
        with make_sessions(engine)() as session:
            for statement, params in sent:
                plan = explain(session, statement, params)
                reads = [(m[1], int(m[2]) * int(m[3])) for m in map(FLEET_READS.search, plan) if m]
                print(f"- {' '.join(statement.split())[:100]}…\n  {plan[-1].strip()}; "
                      f"rows read: {reads or 'none of the fleet'}")  # fmt: skip
                if args.plans:
                    print("\n".join(f"    {line}" for line in plan))
        thread, backend, wall = ranking_cpu(url, path, args.calls)
        print(f"ranked_page, {args.calls} calls: CPU here {thread:.1f} ms, PostgreSQL backend "
              f"{backend:.1f} ms, wall {wall:.1f} ms a call")  # fmt: skip
    engine.dispose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="a PostgreSQL database filled by bench.dashboard_overview")
    parser.add_argument("--targets", type=int, default=10000, help="as it was filled with")
    parser.add_argument("--paths", nargs="+", default=["/", "/?q=endpoint-99", "/?page=100"])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--plans", action="store_true", help="print each plan whole")
    args = parser.parse_args(argv)
    print(machine_info())
    report(args.url, args)


if __name__ == "__main__":
    main()
