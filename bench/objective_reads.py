"""What the objectives cost the surfaces: one target's objectives and goodput as of now
(``target_objectives``, read by the target page, the API and each /metrics scrape) against
the deadline SLO's read (``target_slo``) of the same target, over a 30-day budget window.

Availability alone is read from the run rows, as the deadline's SLO is; a latency
objective (``ttft_ms``) and goodput read every raw sample of the budget window. Populated
first (not measured): one LLM target, one vantage, a run every 15 minutes for 30 days,
20 samples a run (``store_common.populate``).

    .venv/bin/python -m bench.objective_reads --backends sqlite
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from app.config.targets import Target
from app.store.db import make_sessions
from app.store.models import TargetRow
from app.store.reads.objectives import target_objectives
from app.store.reads.slo import target_slo
from bench.common import machine_info
from bench.store_common import (
    Layout,
    add_database_options,
    backends,
    bench_database,
    bench_engine,
    database_url,
    populate,
    target_name,
)

OBJECTIVES: dict[str, dict[str, Any]] = {
    "availability only": {"availability": {"target": 99.5}},
    "availability + ttft_ms": {
        "availability": {"target": 99.5},
        "ttft_ms": {"p": 99, "below": 500},
    },
}


@dataclass(frozen=True)
class OneTarget(Layout):
    def target(self, index: int) -> Target:
        return Target.model_validate(
            {
                "name": target_name(index),
                "kind": "openai",
                "deadline_ms": 1500,
                "url": "https://api.example.com/v1",
                "interval": 900,
            }
        )


def timed(read: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The first call (cold: every run's samples read) and the median of the next."""
    started = time.perf_counter()
    read()
    cold = time.perf_counter() - started
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        read()
        times.append(time.perf_counter() - started)
    return cold * 1000, statistics.median(times) * 1000


def with_objectives(session: Session, name: str, objectives: dict[str, Any]) -> None:
    row = session.query(TargetRow).filter_by(name=name).one()
    config = dict(row.config)
    config["alerts"] = {**(config.get("alerts") or {}), "objectives": objectives}
    session.execute(update(TargetRow).where(TargetRow.id == row.id).values(config=config))


def measure(url: str, args: argparse.Namespace) -> None:
    layout = OneTarget(targets=1, vantages=1, days=30.0)
    with bench_database(url, args.pg, keep=args.keep, reuse=args.reuse) as reused:
        if not reused:
            print(f"populated in {populate(url, layout):.0f} s: {layout.describe()}")
        sessions = make_sessions(bench_engine(url))
        name, now = target_name(0), datetime.now(UTC)
        with sessions() as session:
            floor = timed(lambda: target_slo(session, name, now), args.repeat)[1]
        print(f"| read | first call, ms | then, ms (median of {args.repeat}) | × target_slo |")
        print("|---|---|---|---|")
        print(f"| target_slo (deadline) | | {floor:.1f} | 1 |")
        for label, objectives in OBJECTIVES.items():
            with sessions.begin() as session:
                with_objectives(session, name, objectives)
            with sessions() as session:
                cold, ms = timed(lambda: target_objectives(session, name, now), args.repeat)
            print(f"| target_objectives, {label} | {cold:.0f} | {ms:.1f} | {ms / floor:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_options(parser, "pw_bench_objectives", "sqlite")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--reuse", action="store_true", help="measure a kept database again")
    args = parser.parse_args()
    print(machine_info())
    for backend in backends(args.backends):
        print(f"\n{backend}")
        measure(database_url(backend, args.db_name, args.pg, args.sqlite_dir), args)


if __name__ == "__main__":
    main()
