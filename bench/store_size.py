"""Disk: how many bytes a stored run takes, table by table, once its rollups are kept.

Runs of ``--samples-per-run`` samples (``Synth``, as the ingest benchmark builds them) for
20 targets, each target's runs 15 minutes apart as a default schedule spaces them, stored
with ``store_run`` and added to the rollups with ``catch_up`` as the service does. Then the
size of each table with its indexes and TOAST, per run, a sample's by part (each column,
the heap or pages, each index), and what one (target, vantage)
probed every 15 minutes adds in a year: first with every rollup, then once the 5- and
15-minute rollups are past their keeping and pruned (``prune_fine_rollups``, as the service
does it; the tables compacted afterwards, ``VACUUM FULL`` / ``VACUUM``, so that the sizes are
those of the rows that stay). The database is dropped at the end.

    .venv/bin/python -m bench.store_size --backends postgresql,sqlite
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, text

from app.store.db import make_sessions
from app.store.ingest import store_run
from app.store.models import SampleRow
from app.store.records import RunRecord
from app.store.rollups.catchup import catch_up
from app.store.rollups.digests import FINE_ROLLUPS_KEPT, prune_fine_rollups
from bench.common import machine_info, print_table
from bench.store_common import (
    add_database_options,
    backends,
    bench_database,
    bench_engine,
    database_url,
    partition_days,
)
from bench.store_ingest import TARGETS, make_runs

TABLES = ("runs", "samples", "run_digests", "rollups")
KEPT = ("runs", "run_digests", "rollups")  # never pruned; samples go after the retention
INTERVAL = timedelta(minutes=15)
RUNS_A_YEAR = 365 * 24 * 4  # one (target, vantage) every 15 minutes


def spaced(runs: list[RunRecord], start: datetime) -> list[RunRecord]:
    """Each target's runs ``INTERVAL`` apart from ``start`` (the synth packs them closer)."""
    return [_moved(run, start + INTERVAL * (i // TARGETS)) for i, run in enumerate(runs)]


def _moved(run: RunRecord, at: datetime) -> RunRecord:
    shift = at - run.started_at
    samples = tuple(replace(s, started_at=s.started_at + shift) for s in run.samples)
    finished = None if run.finished_at is None else run.finished_at + shift
    return replace(run, started_at=at, scheduled_at=at, finished_at=finished, samples=samples)


def table_bytes(engine: Engine, table: str) -> int:
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":  # a partitioned table's size is its partitions'
            query = text(
                "SELECT sum(pg_total_relation_size(oid)) FROM pg_class"
                " WHERE oid = to_regclass(:name)"
                " OR oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass(:name))"
            )
        else:  # the table and its indexes, from SQLite's dbstat
            query = text(
                "SELECT sum(pgsize) FROM dbstat WHERE name = :name"
                " OR name IN (SELECT name FROM sqlite_master WHERE tbl_name = :name)"
            )
        return int(connection.execute(query, {"name": table}).scalar() or 0)


def measure(url: str, args: argparse.Namespace, parts: list[list[str]]) -> list[list[str]]:
    engine = bench_engine(url)
    sessions = make_sessions(engine)
    start = datetime.now(UTC) - timedelta(days=args.days + 1)
    count = int(args.days * 96) * TARGETS
    runs = spaced(make_runs(args.samples_per_run, count, seed=11), start)
    partition_days(engine, start, datetime.now(UTC))
    for run in runs:
        with sessions.begin() as session:
            store_run(session, run, datetime.now(UTC))
    while catch_up(sessions, start - timedelta(days=1), datetime.now(UTC)):
        pass
    rows = sized(engine, len(runs), "every rollup")
    found = sample_parts(engine) if engine.dialect.name == "postgresql" else sqlite_parts(engine)
    parts += [[engine.dialect.name, *part] for part in found]
    later = datetime.now(UTC) + FINE_ROLLUPS_KEPT + timedelta(days=args.days + 2)
    prune_fine_rollups(engine, later)
    rows += sized(engine, len(runs), "fine ones pruned")
    engine.dispose()
    return rows


def sized(engine: Engine, runs: int, when: str) -> list[list[str]]:
    compact = "VACUUM FULL ANALYZE" if engine.dialect.name == "postgresql" else "VACUUM"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql(compact)
    sizes = {table: table_bytes(engine, table) for table in TABLES}
    backend = engine.dialect.name
    rows = [[backend, when, t, f"{sizes[t] / 1e6:.1f}", f"{sizes[t] / runs:,.0f}"] for t in TABLES]
    kept = sum(sizes[t] for t in KEPT) / runs
    rows.append([backend, when, "kept forever, a year", "", f"{kept * RUNS_A_YEAR / 1e6:,.0f} MB"])
    return rows


SAMPLE_INDEXES = ("pk_samples", "ix_samples_started_at")


def sample_parts(engine: Engine) -> list[list[str]]:
    """PostgreSQL: a sample's bytes by part: each column's stored size (mean), the row's
    share of heap pages, TOAST, each index."""
    columns = [c.name for c in SampleRow.__table__.columns]
    mean = ", ".join(f"avg(pg_column_size({c}))" for c in columns)
    tree = "SELECT relid FROM pg_partition_tree(CAST(:name AS regclass)) WHERE isleaf"
    with engine.connect() as connection:
        n, *sizes = connection.execute(text(f"SELECT count(*), {mean} FROM samples")).one()
        heap = connection.execute(
            text(f"SELECT sum(pg_relation_size(relid)), sum(pg_table_size(relid)) FROM ({tree}) t"),
            {"name": "samples"},
        ).one()
        indexes = {
            name: connection.execute(
                text(f"SELECT coalesce(sum(pg_relation_size(relid)), 0) FROM ({tree}) t"),
                {"name": name},
            ).scalar()
            or connection.execute(
                text("SELECT pg_relation_size(CAST(:name AS regclass))"), {"name": name}
            ).scalar()
            for name in SAMPLE_INDEXES
        }
    rows = [
        [f"column {c}", f"{float(size or 0):,.1f}"] for c, size in zip(columns, sizes, strict=True)
    ]
    rows.append(["heap pages", f"{int(heap[0] or 0) / n:,.1f}"])
    rows.append(["TOAST and maps", f"{(int(heap[1] or 0) - int(heap[0] or 0)) / n:,.1f}"])
    rows += [[f"index {name}", f"{int(size or 0) / n:,.1f}"] for name, size in indexes.items()]
    return rows


def sqlite_parts(engine: Engine) -> list[list[str]]:
    """SQLite: a sample's bytes by part: each column's stored bytes (mean, of the values
    present), the table's pages and each index's (dbstat) a sample."""
    columns = [c.name for c in SampleRow.__table__.columns]
    mean = ", ".join(f"avg(length(CAST({c} AS BLOB)))" for c in columns)
    pages = "SELECT name, sum(pgsize) FROM dbstat WHERE name = 'samples' OR name IN"
    pages += " (SELECT name FROM sqlite_master WHERE tbl_name = 'samples') GROUP BY name"
    with engine.connect() as connection:
        n, *sizes = connection.execute(text(f"SELECT count(*), {mean} FROM samples")).one()
        by_name = connection.execute(text(pages)).all()
    rows = [
        [f"column {c}", f"{float(size or 0):,.1f}"] for c, size in zip(columns, sizes, strict=True)
    ]
    rows += [[f"pages {name}", f"{int(size) / n:,.1f}"] for name, size in sorted(by_name)]
    return rows


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_database_options(parser, "pw_bench_size")
    parser.add_argument("--days", type=float, default=2.0, help="days of runs per target")
    parser.add_argument("--samples-per-run", type=int, default=20)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    print("# Disk per stored run")
    print(machine_info())
    rows: list[list[str]] = []
    parts: list[list[str]] = []
    for backend in backends(args.backends):
        url = database_url(backend, args.db_name, args.pg, args.sqlite_dir)
        with bench_database(url, args.pg, keep=args.keep):
            rows += measure(url, args, parts)
    print_table(["backend", "rollups", "table", "MB", "bytes per run"], rows)
    if parts:
        print("\n# A sample's bytes, by part")
        print_table(["backend", "part", "bytes per sample"], parts)


if __name__ == "__main__":
    main()
