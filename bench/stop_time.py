"""Shutdown: seconds from SIGTERM to the exit of a real ``phasewatch serve``, in the cases
that used to keep it alive (issue 12), each a few times.

    .venv/bin/python -m bench.stop_time [--repeat 3] [--cap-s 20]

Cases: idle; a client holding a POST body open; a long run in flight; PostgreSQL frozen
(SIGSTOP, a private cluster) with a store stuck in it; and all three at once. A process
still alive ``--cap-s`` after SIGTERM is killed and reported as "> cap". Bounded: every
case stops by itself or is killed, the cluster is always removed.
"""

from __future__ import annotations

import argparse
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from app.demo.sim.app import SimConfig
from app.demo.sim.server import SimServer
from bench.common import RunClock, machine_info, print_table
from tests.pgcluster import PgCluster, Serve, eventually, private_cluster

FAST = SimConfig(one_way_ms=1, queue_median_ms=2, queue_sigma=0, prefill_ms=1, tokens=3)
PARTIAL_POST = (
    b"POST /api/v1/silences HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nContent-Length: 4096\r\n\r\n{"
)


@dataclass
class Case:
    name: str
    postgres: bool = False
    client: bool = False  # a connection that sent half a POST body
    long_run: bool = False  # a run of 200 samples, 50 ms apart, in flight
    freeze: bool = False


CASES = [
    Case("idle"),
    Case("client holds a POST body open", client=True),
    Case("a run in flight", long_run=True),
    Case("PostgreSQL frozen, a store stuck", postgres=True, freeze=True),
    Case("all three at once", postgres=True, client=True, long_run=True, freeze=True),
]


def targets(directory: Path, sim: SimServer, case: Case) -> Path:
    fields = "    samples: 200\n    spacing: 50ms\n" if case.long_run else "    samples: 2\n"
    path = directory / "phasewatch.yaml"
    path.write_text(
        f"targets:\n  - name: api\n    kind: http\n    url: {sim.url}/health\n"
        f"    interval: 1s\n{fields}"
    )
    return path


def stuck(served: Serve) -> bool:
    """A run journalled 2 s ago and more: with runs measured in milliseconds, its store
    hangs (read from the spool, not /healthz, so that older versions can be measured)."""
    journals = (served.spool_dir / "inflight").glob("*.json")
    return any(time.time() - path.stat().st_mtime > 2 for path in journals)


@contextmanager
def held_request(port: int) -> Iterator[None]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(PARTIAL_POST)
        time.sleep(0.5)
        yield


def measure(case: Case, sim: SimServer, cluster: PgCluster | None, cap_s: float) -> float | None:
    """Seconds from SIGTERM to exit; None past the cap (then killed)."""
    with tempfile.TemporaryDirectory(prefix="stop-time-") as name, ExitStack() as stack:
        workdir = Path(name)
        url = cluster.url if cluster is not None else f"sqlite:///{workdir}/pw.db"
        env = {"PHASEWATCH_DATABASE_URL": url}
        served = Serve(workdir / "serve", targets(workdir, sim, case), env)
        stack.callback(served.kill)
        served.wait_ready(60)
        time.sleep(1.5)  # a run or two stored; the long run, if any, under way
        if case.freeze and cluster is not None:
            cluster.freeze()
            stack.callback(cluster.thaw)
            eventually(lambda: stuck(served), 30, "a store stuck")
        if case.client:
            stack.enter_context(held_request(served.port))
        began = time.monotonic()
        served.process.send_signal(signal.SIGTERM)
        try:
            served.process.wait(timeout=cap_s)
        except subprocess.TimeoutExpired:
            return None
        return time.monotonic() - began


def summary(times: list[float | None], cap_s: float) -> list[str]:
    done = [t for t in times if t is not None]
    late = len(times) - len(done)
    cells = [f"{f(done):.2f}" for f in (min, statistics.median, max)] if done else ["–"] * 3
    return [*cells, f"{late} (> {cap_s:.0f} s)" if late else "0"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cap-s", type=float, default=20.0)
    args = parser.parse_args()
    clock = RunClock()
    rows = []
    with SimServer(FAST) as sim, ExitStack() as stack:
        cluster: PgCluster | None = None
        for case in CASES:
            if case.postgres and cluster is None:
                cluster = stack.enter_context(private_cluster())
            database = cluster if case.postgres else None
            times = [measure(case, sim, database, args.cap_s) for _ in range(args.repeat)]
            rows.append([case.name, *summary(times, args.cap_s)])
            print(f"# {case.name}: {times}", flush=True)
    print(f"# Shutdown: SIGTERM to exit of `phasewatch serve`\n{machine_info()}\n")
    print_table(["case", "min s", "median s", "max s", "not stopped"], rows)
    print(f"\n{clock.report()}")


if __name__ == "__main__":
    main()
