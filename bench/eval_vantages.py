"""An evaluation's cost by the number of vantages of its target, warm: what a run costs the
evaluator once every detector has its reference (days of history), as a steady ``serve``
pays it, where ``bench.push_cpu`` measures runs of an hour with no reference yet.

For each vantage count: one target on a PostgreSQL database of its own, ``--days`` of
15-minute runs (5 samples, an LLM's phases) stored at each vantage through the service's
own sink (``app.main.build_service``, as ``serve`` wires it), a first evaluation of each
vantage (references built), then ``--rounds`` rounds of one new run at every vantage, each
evaluated right after it is stored (``after_store``), timed by the thread's CPU clock; the
statements those evaluations sent and the bytes of their parameters counted.

    .venv/bin/python -m bench.eval_vantages --vantages 1,5,20
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from app.config import Settings
from app.main import build_service
from bench.agents_ingest import targets_file
from bench.common import machine_info, print_table
from bench.store_common import (
    LLM,
    SentStatements,
    Synth,
    create_database,
    database_url,
    drop_database,
)

INTERVAL = timedelta(minutes=15)
SAMPLES = 5


def _measure(url: str, vantages: int, days: float, rounds: int) -> list[str]:
    agents = [f"agent-{k:02d}" for k in range(vantages)]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "phasewatch.yaml"
        targets_file(config, agents, {a: f"token-of-{a}" for a in agents}, 1, True)
        service = build_service(Settings(config=config, database_url=url))
    synth, now = Synth(vantages), datetime.now(UTC)
    count = int(timedelta(days=days) / INTERVAL)
    first = now - (count + rounds) * INTERVAL
    for k in range(count):
        for agent in agents:
            service.sink.store(synth.run("t000", agent, LLM, first + k * INTERVAL, SAMPLES))
    for agent in agents:  # each series' first evaluation: its references built
        service.after_store(synth.run("t000", agent, LLM, first + count * INTERVAL, SAMPLES))
    sent, cpu, evaluated = SentStatements(service.engine), 0.0, 0
    for k in range(count + 1, count + rounds):
        for agent in agents:
            run = synth.run("t000", agent, LLM, first + k * INTERVAL, SAMPLES)
            service.sink.store(run)
            began = time.thread_time()
            with sent.counting():
                service.after_store(run)
            cpu += time.thread_time() - began
            evaluated += 1
    pooled = any(
        "level_pool" in m.cusums for m in service.alerts.evaluator.memories("t000").values()
    )
    service.engine.dispose()
    return [
        str(vantages),
        str(evaluated),
        f"{cpu / evaluated * 1000:.2f}",
        f"{sent.count / evaluated:.1f}",
        f"{sent.bytes / evaluated / 1024:.1f}",
        "yes" if pooled else "no",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vantages", default="1,5,20", help="vantage counts, one target each")
    parser.add_argument("--days", type=float, default=4.0, help="history before the rounds")
    parser.add_argument("--rounds", type=int, default=8, help="new runs at every vantage")
    parser.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--db-name", default="pw_bench_eval_vantages")
    args = parser.parse_args()
    print(machine_info())
    url = database_url("postgresql", args.db_name, args.pg, Path(tempfile.gettempdir()))
    rows = []
    for vantages in (int(v) for v in args.vantages.split(",")):
        create_database(url, args.pg)
        try:
            rows.append(_measure(url, vantages, args.days, args.rounds))
        finally:
            drop_database(url, args.pg)
    headers = ["vantages", "evaluations", "CPU ms an evaluation", "statements", "KiB sent"]
    print_table([*headers, "pooled lane on"], rows)


if __name__ == "__main__":
    main()
