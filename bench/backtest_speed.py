"""How long `phasewatch backtest` takes on the issue's size: 16 targets × 2 vantages ×
10 days of 15-minute runs of 20 samples (614,400 samples). Goal: ≤ 60 s on 2 cores.

The corpus has structure to find (a generation collapse halfway, busy hours every day) so
the detectors do their full work, bootstrap and all, not only the cheap early exits.

    .venv/bin/python -m bench.backtest_speed [--targets 16] [--days 10]
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

PHASES = ("connect", "network", "queue", "prefill", "generation", "transfer")
START = datetime(2026, 1, 1, tzinfo=UTC)


def write_corpus(path: Path, targets: int, days: int, samples: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    rows = 0
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(
            ["timestamp", "target", "vantage", "run_id", "status", "total_ms"]
            + [f"{p}_ms" for p in PHASES]
        )
        for index in range(days * 96):
            at = START + timedelta(minutes=15 * index)
            busy = 1.8 if at.hour in (9, 10, 11) else 1.0
            collapsed = index >= days * 48
            for target in range(targets):
                for vantage in ("seoul-old", "seoul-new"):
                    rows += _run(
                        writer, rng, at, f"target-{target}", vantage, samples, busy, collapsed
                    )
    return rows


def _run(writer, rng, at, target, vantage, samples, busy, collapsed) -> int:  # type: ignore[no-untyped-def]
    run_id, shared = str(uuid.uuid4()), rng.lognormal(0, 0.1)
    for k in range(samples):
        generation = (150 if collapsed else 1500) * rng.lognormal(0, 0.1)
        queue = 167 * busy * shared * rng.lognormal(0, 0.4)
        phases = [
            1.0,
            275 * rng.lognormal(0, 0.03),
            queue,
            30 * rng.lognormal(0, 0.1),
            generation,
            1.0,
        ]
        stamp = (at + timedelta(seconds=2 * k)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        writer.writerow(
            [stamp, target, vantage, run_id, "ok", repr(sum(phases)), *map(repr, phases)]
        )
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, default=16)
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        corpus = Path(directory) / "corpus.csv"
        rows = write_corpus(corpus, args.targets, args.days, args.samples, args.seed)
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "app", "backtest", str(corpus), "--format", "jsonl"],
            check=True,
            capture_output=True,
            text=True,
        )
        elapsed = time.perf_counter() - began
    firing = sum('"state": "firing"' in line for line in done.stdout.splitlines())
    print(f"samples            {rows:>10,}")
    print(f"backtest wall time {elapsed:>10.1f} s   (goal ≤ 60 s)")
    print(f"throughput         {rows / elapsed:>10,.0f} samples/s")
    print(f"firing transitions {firing:>10}")


if __name__ == "__main__":
    main()
