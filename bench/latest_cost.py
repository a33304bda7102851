"""What ``series_latest``'s upsert costs a run (``bench.store_ingest --latest-cost``): the
pipeline's store with it and without it, taking turns on one database, so both see the
same machine.

"Without" is ingest's own code with the upsert taken out of its statements for the turn:
on PostgreSQL the run's statement is rebuilt with the ``latest`` CTE a bare ``SELECT 1``
(unreferenced, so never run); on SQLite the upsert's statement is swapped for a
``SELECT 1`` that is still executed, so "without" keeps a few microseconds of it and the
difference is a little under the upsert's whole cost.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from sqlalchemy import Engine, text

import app.store.ingest as ingest
from app.store.db import make_sessions
from bench.store_common import wait_quiet
from bench.store_ingest import (
    TURN_SAMPLES,
    Result,
    _store_share,
    _Tally,
    as_pipeline,
    make_runs,
)


@contextmanager
def without_series_latest() -> Iterator[None]:
    saved = ingest._POSTGRES_RUN_INSERT, ingest._SQLITE_LATEST_UPSERT, ingest.postgres_upsert_from
    ingest.postgres_upsert_from = lambda cte: "SELECT 1"
    ingest._POSTGRES_RUN_INSERT = ingest._postgres_run_insert()
    ingest._SQLITE_LATEST_UPSERT = text("SELECT 1")  # type: ignore[assignment]
    try:
        yield
    finally:
        ingest._POSTGRES_RUN_INSERT, ingest._SQLITE_LATEST_UPSERT = saved[:2]
        ingest.postgres_upsert_from = saved[2]


def paired(engine: Engine, size: int, seed: int, args: argparse.Namespace) -> tuple[Result, Result]:
    """The store with the upsert and without it, in turns of ``TURN_SAMPLES`` samples."""
    count = max(1, args.samples // size)
    runs, others = make_runs(size, count, seed), make_runs(size, count, seed + 1)
    store, turn = as_pipeline(make_sessions(engine)), max(1, TURN_SAMPLES // size)
    with_it, without = _Tally(), _Tally()
    wait_quiet(args.wait_quiet)
    for start in range(0, count, turn):
        with_it.turn(engine, partial(_store_share, store, runs[start : start + turn], math.inf))
        with without_series_latest():
            without.turn(
                engine, partial(_store_share, store, others[start : start + turn], math.inf)
            )
    backend = engine.dialect.name
    return with_it.result(backend, size, False), without.result(backend, size, False)


def cost_row(backend: str, size: int, pairs: list[tuple[Result, Result]]) -> list[str]:
    """Per run: wall µs with and without, their difference (median over the pairs), and the
    client's and the server's CPU a run of each side."""

    def us(result: Result, seconds: float | None) -> float:
        return math.nan if seconds is None else seconds / result.runs * 1e6

    walls = sorted(us(a, a.seconds) - us(b, b.seconds) for a, b in pairs)
    a, b = sorted(pairs, key=lambda p: us(p[0], p[0].seconds) - us(p[1], p[1].seconds))[
        len(pairs) // 2
    ]
    return [
        backend, str(size), f"{a.runs:,} + {b.runs:,}",
        f"{us(a, a.seconds):.0f}", f"{us(b, b.seconds):.0f}",
        f"{walls[len(walls) // 2]:+.0f} ({walls[0]:+.0f} to {walls[-1]:+.0f})",
        f"{us(a, a.client_cpu_s):.0f} / {us(b, b.client_cpu_s):.0f}",
        f"{us(a, a.server_cpu_s):.0f} / {us(b, b.server_cpu_s):.0f}",
    ]  # fmt: skip


HEADERS = ["backend", "samples/run", "runs (with + without)", "µs a run with",
           "without", "upsert's cost µs a run (range)", "client CPU µs a run with / without",
           "server CPU µs a run with / without"]  # fmt: skip
