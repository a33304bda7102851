"""When ``availability_slo`` fires for a partial outage that starts and stays: minutes from
the first failing run to the alert, and its severity, by objective, probing interval and
failing share, through the real evaluator (``replay``) with the default windows.

Deterministic (simulated runs of 20 samples, seeded): a table of the defaults' behaviour,
not a timing. A day of clean runs first, then three hours of the outage.

    .venv/bin/python -m bench.objective_paging
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np

from app.alerts.backtest.replay import replay
from app.analysis.detectors import DetectorParams
from app.analysis.runs import RunData
from tests.runfactory import T0, make_run

CASES = [(every, share) for every in (5, 15) for share in (10, 15, 30)]


def outage(every: int, failing_pct: int) -> tuple[list[RunData], int]:
    rng = np.random.default_rng(7)
    step, start = timedelta(minutes=every), 24 * 60 // every
    failed = 20 * failing_pct // 100
    runs = [
        make_run(rng, T0 + i * step, n=20 - failed * (i >= start), failed=failed * (i >= start))
        for i in range(start + 180 // every)
    ]
    return runs, start


def first_alert(target: float, every: int, failing_pct: int) -> str:
    params = DetectorParams.model_validate(
        {"enabled": ["availability_slo"], "objectives": {"availability": {"target": target}}}
    )
    runs, start = outage(every, failing_pct)
    began = runs[start].at
    for t in replay(runs, lambda _: params):
        if t.moved and t.after.value == "firing":
            minutes = (t.at - began).total_seconds() / 60
            kind = "page" if t.identity.severity == "critical" else "ticket"
            return f"{kind} after {minutes:g} min"
    return "nothing in 3 h"


def main() -> None:
    print("| objective | run every | failing | first alert |")
    print("|---|---|---|---|")
    for target in (99.5, 99.9):
        for every, share in CASES:
            found = first_alert(target, every, share)
            print(f"| availability {target:g} % | {every} min | {share} % | {found} |")


if __name__ == "__main__":
    main()
