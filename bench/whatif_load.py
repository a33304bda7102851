"""What-ifs hammered on a real `serve` (issue 36, row 7): what its probe, /healthz and its
memory do meanwhile.

The setting of tests/faults/test_whatif_load.py, measured rather than asserted: a SQLite
database with 64,000 samples of one target (8,000 runs of 8), `serve` probing another
target every second, ``--clients`` clients asking for 1,000-resample what-ifs of the big one
for ``--seconds`` (a 429 is followed by 0.2 s, not its Retry-After). Reported: the answers by
status, a 200's time, the RSS of `serve` and of its children (the what-if worker) before,
at most and after, the probe's runs stored against those due and their lateness (start minus
due, from the stored runs), and /healthz's time (polled every 0.25 s).

``--app-dir`` runs `serve` from another checkout (the code before a change, for comparison).

    nice -n 10 .venv/bin/python -m bench.whatif_load
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from app.demo.sim.server import SimServer
from bench.common import machine_info, pct, print_table
from tests.faults import whatifload as load
from tests.faults.support import early_name
from tests.helpers import FAST_SIM
from tests.pgcluster import Serve


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=load.CLIENTS)
    parser.add_argument("--seconds", type=float, default=load.HAMMER_S)
    parser.add_argument("--app-dir", default="", help="run serve from this checkout")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    load.CLIENTS, load.HAMMER_S = args.clients, args.seconds
    with tempfile.TemporaryDirectory() as tmp, SimServer(FAST_SIM) as sim:
        directory = Path(tmp)
        url = f"sqlite:///{directory}/pw.db"
        load.fill(url, datetime.now(UTC))
        live = early_name("live", 1.0)
        wrap = ("env", f"--chdir={args.app_dir}") if args.app_dir else ()
        env = {"PHASEWATCH_DATABASE_URL": url}
        served = Serve(directory / "serve", load.config(directory, sim, live), env, (), wrap)
        try:
            served.wait_ready()
            time.sleep(5)
            report(served, url, live)
        finally:
            served.kill()


def report(served: Serve, url: str, live: str) -> None:
    before = load.rss_mb(served.process.pid)
    began = datetime.now(UTC)
    seen = load.hammer(served)
    ended = datetime.now(UTC)
    time.sleep(3)
    after = load.rss_mb(served.process.pid)
    window = [
        (due, start)
        for due, start in load.runs_of(url, live)
        if began <= due < ended - timedelta(seconds=2)
    ]
    late = [(start - due).total_seconds() for due, start in window] or [0.0]
    counts = {code: seen.statuses.count(code) for code in sorted(set(seen.statuses))}
    answered = seen.answered_s or [0.0]
    print(machine_info())
    print_table(
        ["measure", "value"],
        [
            ["clients x seconds", f"{load.CLIENTS} x {load.HAMMER_S:g}"],
            ["answers by status", ", ".join(f"{k}: {v}" for k, v in counts.items())],
            ["a 200's time p50 / max", f"{pct(answered, 50):.1f} / {max(answered):.1f} s"],
            [
                "serve RSS before / max / 3 s after",
                f"{before:.0f} / {max(seen.server_mb):.0f} / {after:.0f} MB",
            ],
            ["workers' RSS max", f"{max(seen.worker_mb):.0f} MB"],
            [
                "probe runs stored / due",
                f"{len(window)} / {(ended - began).total_seconds() - 2:.0f}",
            ],
            ["probe lateness p50 / max", f"{pct(late, 50):.2f} / {max(late):.2f} s"],
            ["/healthz p50 / max", f"{pct(seen.health_s, 50):.2f} / {max(seen.health_s):.2f} s"],
        ],
    )


if __name__ == "__main__":
    main()
