"""A small fixed corpus that moves every default detector in a backtest, and the transitions
the backtest makes on it: tests/alerts/test_backtest_same_alerts.py holds every later version of
the replay to the transitions recorded in tests/data/backtest_alerts.json (made with the
code of commit ea6359a, before the backtest's speed-up; re-recorded for dominant_shift's
fast lane, which fires chat's collapse one run sooner, the other 20 transitions unchanged;
and for level_shift, whose 6 transitions are embed's queue median growing with its tail —
the other 22 unchanged; those 6 are gone since level_shift's CUSUM is scaled by the
held-out spread, which counts a 3-day reference's own error: the queue's +23–38 % for 6–12
runs reads 10.5 and 6.7 nats against it (13.7, 13.5 before; the threshold 12), and the
service's tail_shift tells that change from 01-08 00:30 — the other 19 unchanged; and for
dominant_shift's one-round lane, which fires chat's collapse on its first round at both
vantages, 12:00, where it was pending at 12:15 and firing at 12:30 — the other 17 unchanged;
and for tail_shift's heavier-tail members, which fire embed's service queue tail at 01-08
00:15, a run sooner than the inflations' 00:30, told at the p99 as before (3.44 % of 320
samples beyond it, the runs since the CUSUM left 0 reaching a run further back) — the other
17 unchanged).

A detector change that means to change alerts re-records the file, with the changed code:

    .venv/bin/python -m tests.backtestcorpus
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from app.alerts.backtest.csvruns import read_runs
from app.alerts.backtest.jobs import ParamsTable
from app.alerts.backtest.replay import replay

RECORDED = Path(__file__).parent / "data" / "backtest_alerts.json"
PHASES = ("connect", "network", "queue", "prefill", "generation", "transfer")
START = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday
EVERY = timedelta(minutes=15)
DEADLINE_MS = 1500.0


def corpus(days: int = 5, samples: int = 20) -> str:
    """Two targets at two vantages, busy mornings. ``chat``'s generation collapses after
    three and a half days (dominant_shift); from day three, one ``embed`` sample in eight
    waits 650 ms more in the queue (tail_shift, and in busy hours deadline misses)."""
    rng = np.random.default_rng(2026)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    base = ["timestamp", "target", "vantage", "run_id", "status", "total_ms"]
    writer.writerow(base + [f"{phase}_ms" for phase in PHASES])
    for index in range(days * 96):
        at = START + index * EVERY
        for target in ("chat", "embed"):
            for vantage in ("seoul", "frankfurt"):
                _run(writer, rng, at, target, vantage, samples, index / 96)
    return out.getvalue()


def _run(  # type: ignore[no-untyped-def]
    writer, rng: np.random.Generator, at: datetime, target: str, vantage: str, n: int, day: float
) -> None:
    busy = 1.6 if at.hour in (9, 10, 11) else 1.0
    shared = rng.lognormal(0, 0.1)
    collapsed = target == "chat" and day >= 3.5
    tailed = target == "embed" and day >= 3.0
    for k in range(n):
        queue = 167 * busy * shared * rng.lognormal(0, 0.4)
        if tailed and rng.random() < 0.12:
            queue += 650.0
        generation = 120 if collapsed else 900 if target == "chat" else 300
        generation *= rng.lognormal(0, 0.1)
        phases = [1.0, 275 * rng.lognormal(0, 0.03), queue, 30 * rng.lognormal(0, 0.1)]
        phases += [generation, 1.0]
        total, status = sum(phases), "ok"
        if total > DEADLINE_MS:  # cut at the deadline, in the phase it was in
            total, status = DEADLINE_MS, "deadline_exceeded"
        stamp = (at + timedelta(seconds=2 * k)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        run_id = f"{target}-{vantage}-{at:%m%d%H%M}"
        writer.writerow([stamp, target, vantage, run_id, status, repr(total), *map(repr, phases)])


def transitions(text: str) -> list[dict[str, Any]]:
    """The transitions that move an alert in a backtest of ``text``, as the backtest's
    JSON lines say them (numbers and summaries included), alert ids aside (random)."""
    found = []
    for transition in replay(read_runs(io.StringIO(text)), ParamsTable(), seed=0):
        if not transition.moved:
            continue
        as_json = transition.to_json()
        as_json.pop("alert_id")
        found.append(as_json)
    # Through JSON and back: the file's floats and lists, not tuples.
    return list(json.loads(json.dumps(found)))


if __name__ == "__main__":
    RECORDED.write_text(json.dumps(transitions(corpus()), indent=1) + "\n")
