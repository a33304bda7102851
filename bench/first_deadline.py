"""How late a fresh process cuts its first sample at ``--deadline-ms`` (goal: ≤ 20 ms).

Each round starts a new `phasewatch probe` against a loopback listener that never accepts,
and reads the first sample's ``cut`` mark (when the cut took effect, on the process's own
clock) against the deadline. The rounds run one after another; the load average is printed
beside the numbers, as other processes delay any cut.

    .venv/bin/python -m bench.first_deadline [--rounds 24] [--deadline-ms 40,150,400]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def overrun_ms(url: str, deadline_ms: int) -> float:
    command = [sys.executable, "-m", "app", "probe", url, "--json"]
    command += ["--deadline-ms", str(deadline_ms), "--samples", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ROOT)
    sample = json.loads(done.stdout)["samples"][0]
    return float(sample["marks_ns"]["cut"]) / 1e6 - deadline_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=24)
    parser.add_argument("--deadline-ms", default="40,150,400")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at the start")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        for deadline in (int(text) for text in args.deadline_ms.split(",")):
            late = np.array([overrun_ms(url, deadline) for _ in range(args.rounds)])
            print(
                f"deadline {deadline:4d} ms: first cut late by median {np.median(late):.1f} ms,"
                f" max {late.max():.1f} ms; {int(np.sum(late > 20))}/{len(late)} over 20 ms"
            )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
