"""What the CSV export's goodput columns cost a row: ``verdict`` (app.analysis.verdicts)
against ``llm_values``, which an export of LLM samples already works out per row; and the
same verdict by the objectives' numpy readings of one sample, as first written.

    .venv/bin/python -m bench.csv_verdicts [--rows 20000]

A ratio, taken in one process a few times over: absolute times on a shared machine say
little (bench/README.md, "Goodput in the CSV export")."""

from __future__ import annotations

import argparse
import os
import timeit
from collections.abc import Callable, Sequence

import numpy as np

from app.analysis.llmmetrics import llm_values
from app.analysis.objectives import CUT, Objective, Seen, goodput, latency_tally, readings
from app.analysis.verdicts import verdict

OBJECTIVES = (
    Objective("ttft_ms", 0.99, 300),
    Objective("availability", 0.995),
    Objective("tpot_ms", 0.99, 50),
)
STREAM = {"answer_tokens": 22, "reasoning_tokens": 0, "arrivals": 22, "stall_ms": 40.0,
          "itl_ms": {"p50": 9.0, "p90": 12.0, "max": 40.0}, "stall_at_ms": 300.0,
          "stall_token": 3, "stall_open": False}  # fmt: skip
SEEN: Seen = (
    "ok",
    331.0,
    {"first_answer_token": 120_000_000, "last_answer_token": 330_000_000},
    {"tokens": {"prompt": 20, "completion": 22, "reasoning": None}, "stream": STREAM},
)


def by_arrays(objectives: Sequence[Objective], seen: Seen) -> tuple[bool, list[bool | None]]:
    """The verdict by the run's vectorised counting over a one-sample run (the first way)."""
    reads = readings([seen])
    met: list[bool | None] = []
    for objective in objectives:
        reading = reads.get(objective.metric)
        if reading is None or objective.below_ms is None:
            met.append(seen[0] == "ok")
            continue
        counted = latency_tally(reading, objective.below_ms)
        met.append(None if counted.counted == 0 else counted.bad == 0)
    good = goodput(objectives, 1, reads, np.array([seen[0] == CUT])).bad == 0
    return good, met


def per_row(call: Callable[[], object], rows: int) -> float:
    return min(timeit.repeat(call, number=rows, repeat=5)) / rows * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=20_000)
    rows = parser.parse_args().rows
    llm = per_row(lambda: llm_values(*SEEN), rows)
    plain = per_row(lambda: verdict(OBJECTIVES, SEEN), rows)
    arrays = per_row(lambda: by_arrays(OBJECTIVES, SEEN), rows)
    print(f"load {os.getloadavg()[0]:.1f}; µs a row (best of 5):")
    print(f"  llm_values {llm:.1f}, verdict {plain:.1f} ({plain / llm:.2f}×),")
    print(f"  verdict by numpy arrays of one {arrays:.1f} ({arrays / llm:.2f}×)")


if __name__ == "__main__":
    main()
