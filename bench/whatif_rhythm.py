"""The what-if's sample read with and without a stream's rhythm (``tpot_ms``, ``stall_ms``):
what a target with a TPOT or stall objective pays over one without.

One LLM target probed every 864 s for 30 days, 20 samples a run (60,000 samples), in a
SQLite file (populated, not measured), as bench.whatif_speed. Each repetition reads the
window with ``load_sample_set`` twice in this process: bare (three columns, the common
what-if) and with ``rhythm=("tpot_ms", "stall_ms")`` (marks and details parsed too). CPU
seconds of this process (``time.process_time``), median over the repetitions; the bare read
is the floor the ratio is taken against.

    nice -n 5 .venv/bin/python -m bench.whatif_rhythm [--repeat 5] [--days 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

from sqlalchemy import create_engine

from app.analysis.whatif.samples import RHYTHM
from app.store.reads.whatifsamples import load_sample_set
from bench.common import RunClock, print_header
from bench.store_common import (
    PG_SERVER,
    SQLITE_DIR,
    Layout,
    bench_database,
    database_url,
    populate,
    target_name,
)


def main(repeat: int, days: float, keep: bool = False) -> None:
    print_header("whatif_rhythm", "the what-if's sample read, bare and with the rhythm (CPU s)")
    clock = RunClock()
    layout = Layout(targets=1, vantages=1, days=days, interval_s=864.0, samples_per_run=20)
    url = database_url("sqlite", "pw_bench_whatif", PG_SERVER, SQLITE_DIR)
    with bench_database(url, PG_SERVER, keep=keep, reuse=keep) as reused:
        if not reused:
            print(f"populating: {layout.describe()} in {populate(url, layout):.1f} s")
        engine = create_engine(url)
        args = (engine, target_name(0), None, layout.start, layout.end)
        bare, rhythm, n = [], [], 0
        for _ in range(repeat):
            started = time.process_time()
            found = load_sample_set(*args)
            bare.append(time.process_time() - started)
            started = time.process_time()
            load_sample_set(*args, rhythm=RHYTHM)
            rhythm.append(time.process_time() - started)
            n = 0 if found is None else found.n
        engine.dispose()
    floor, paced = statistics.median(bare), statistics.median(rhythm)
    print(f"samples {n:,}; over {repeat} repetitions, median CPU:")
    print(f"bare read (three columns): {floor:.3f} s (max {max(bare):.3f})")
    print(f"with tpot_ms and stall_ms: {paced:.3f} s (max {max(rhythm):.3f}); x{paced / floor:.2f}")
    print(f"finished in {clock.report()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--keep", action="store_true", help="keep (and reuse) the database")
    args = parser.parse_args()
    main(args.repeat, args.days, args.keep)
