"""A flush tried while the sink is away, against the spool's size.

``serve`` tries a flush at every run that finds runs waiting (and the agent at its ticks),
so while the database is away a try must cost little however deep the spool has grown.
Each try here is timed in CPU against the floor of reading the same file once, in the same
run: a try that reads one block stays near zero, one that reads the file is ≈ 1× or more.

    .venv/bin/python -m bench.spool_flush                      # spools of 1,000 to 36,000 runs
    .venv/bin/python -m bench.spool_flush --runs 36000 --tries 20

36,000 runs is an hour of 100 targets every 10 s, 5 samples a run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from app.runs.sink import SinkAway, Stored
from app.runs.spool import Spool
from app.store.records import RunRecord
from tests.runfactory import make_run, record_of


def _away(records: Sequence[RunRecord]) -> list[Stored]:
    raise SinkAway("the database is away")


def _spool_of(directory: Path, runs: int) -> Spool:
    spool = Spool(directory)
    record = record_of(make_run(np.random.default_rng(1), datetime.now(UTC), n=5))
    spool.append(record)
    line = spool.path.read_bytes()
    same = str(record.id).encode()
    spool.path.write_bytes(
        b"".join(line.replace(same, str(uuid.uuid4()).encode()) for _ in range(runs))
    )
    return spool


def measure(runs: int, tries: int) -> tuple[float, float, float]:
    """(MB spooled, CPU ms a try, CPU ms of one read of the whole file)."""
    with tempfile.TemporaryDirectory() as folder:
        spool = _spool_of(Path(folder), runs)
        began = time.process_time()
        for _ in range(tries):
            assert spool.flush(_away, 50, 4 << 20) == 0
        per_try = (time.process_time() - began) / tries
        began = time.process_time()
        for _ in range(tries):
            spool.path.read_text().splitlines()
        floor = (time.process_time() - began) / tries
        return spool.path.stat().st_size / 1e6, per_try * 1e3, floor * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="*", default=[1_000, 6_000, 36_000])
    parser.add_argument("--tries", type=int, default=20)
    args = parser.parse_args()
    print("| runs spooled | MB | CPU a try (ms) | one read of the file (ms) | ratio |")
    print("|---|---|---|---|---|")
    for runs in args.runs:
        size, per_try, floor = measure(runs, args.tries)
        print(f"| {runs:,} | {size:.1f} | {per_try:.2f} | {floor:.2f} | {per_try / floor:.3f} |")


if __name__ == "__main__":
    main()
