"""Each series' newest run at 10,000 series, three ways, on a database the overview benchmark
kept (``bench.dashboard_overview --db`` / ``--pg-db``): why the overview reads ``series_latest``.

    .venv/bin/python -m bench.series_latest_reads sqlite:////tmp/pagesbench/t10k.db \\
        postgresql+psycopg://postgres@127.0.0.1:5432/pw_bench_pages10k

* ``grouped scan`` — main's ``last_runs``: the last day's runs grouped by series, then the
  pairs of the daily rollups (a seek for each one older than a day);
* ``lateral seeks`` — the pairs of the daily rollups, each one's newest run by one backward
  seek of ``ix_runs_target_id_vantage_started_at`` (an index-only lateral lookup);
* ``series_latest`` — one row a series, kept by ingest.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import timedelta

from sqlalchemy import TextClause, bindparam, func, select, text

from app.store.db import make_engine
from app.store.models import RunRow, UTCDateTime
from bench.common import machine_info

PAIRS = "SELECT DISTINCT target_id, vantage FROM rollups WHERE period_s = 86400 AND vantage <> '*'"
READS = {
    "grouped scan": [
        "SELECT target_id, vantage, max(started_at) FROM runs WHERE started_at >= :since"
        " GROUP BY target_id, vantage",
        PAIRS,
    ],
    "lateral seeks": [
        f"SELECT p.target_id, p.vantage, (SELECT r.started_at FROM runs r"
        f" WHERE r.target_id = p.target_id AND r.vantage = p.vantage"
        f" ORDER BY r.started_at DESC LIMIT 1) FROM ({PAIRS}) AS p"
    ],
    "series_latest": [
        "SELECT s.target_id, t.name, s.vantage, s.started_at, s.status, s.n_samples,"
        " s.n_errors, s.n_deadline_exceeded FROM series_latest s"
        " JOIN targets t ON t.id = s.target_id"
    ],
}


def time_reads(url: str, repeat: int) -> dict[str, tuple[float, int]]:
    engine = make_engine(url)
    found = {}
    with engine.connect() as connection:
        newest = connection.scalar(select(func.max(RunRow.started_at)))
        assert newest is not None, "an empty database"
        since = {"since": newest - timedelta(days=1)}
        for name, statements in READS.items():
            timings, rows = [], 0
            for _ in range(repeat):
                started = time.perf_counter()
                rows = sum(len(connection.execute(_typed(sql), since).all()) for sql in statements)
                timings.append((time.perf_counter() - started) * 1000)
            found[name] = (statistics.median(timings), rows)
    engine.dispose()
    return found


def _typed(sql: str) -> TextClause:
    """``:since`` bound as the runs' times are (UTC text on SQLite, timestamptz on PostgreSQL)."""
    clause = text(sql)
    return clause.bindparams(bindparam("since", type_=UTCDateTime())) if ":since" in sql else clause


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("urls", nargs="+")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(machine_info())
    for url in args.urls:
        print(f"\n## {url.split(':')[0]}")
        for name, (ms, rows) in time_reads(url, args.repeat).items():
            print(f"{name}: median {ms:.1f} ms of {args.repeat} ({rows} rows)")


if __name__ == "__main__":
    main()
