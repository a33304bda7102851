"""Issue 15's ingest goal: one `phasewatch serve` taking pushes from simulated agents.

20 agents × 50 targets (defaults) push recorded runs (``Synth``: 20 samples each, the shape
of the probe's) as `phasewatch agent` does: one gzip ``RunRecord`` per request, one request
at a time per agent, each agent on a connection of its own. Two phases:

* **paced**: every agent pushes at the rate that makes ``--rate`` runs a minute in all (the
  goal's 2,000), for ``--seconds``: runs a minute sustained, push latency p50 / p99 / max;
* **flat out**: every agent pushes back to back for ``--seconds``: the most this server takes.

The server runs in its own process (its CPU is read from /proc, per run stored); the bodies
are built before each phase, so the agents' side costs the server's cores little. Loopback
only; every loop is bounded by its phase's time and a count.

    .venv/bin/python -m bench.agents_ingest --backends postgresql
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from app.agent.wire import RUNS_PATH, SENT_AT_HEADER, VANTAGE_HEADER
from bench.common import RunClock, machine_info, pct, print_table
from bench.store_common import (
    Synth,
    add_database_options,
    backends,
    create_database,
    database_url,
    drop_database,
)

MAX_PUSHES = 200_000  # per phase, whatever the rate


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    failed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def targets_file(
    path: Path, agents: list[str], tokens: dict[str, str], targets: int, detectors: bool
) -> None:
    lines = ["vantage: bench-server", "vantages:"]
    lines += [f"  {name}: {{token: {tokens[name]}}}" for name in agents]
    lines.append("targets:")
    for k in range(targets):
        lines += [
            f"  - name: t{k:03d}",
            "    url: http://127.0.0.1:9/",
            "    interval: 30s",
            f"    vantages: [{', '.join(agents)}]",
        ]
        if not detectors:
            lines.append("    alerts: {enabled: []}")
    path.write_text("\n".join(lines) + "\n")


def bodies(agent: str, targets: int, count: int, seed: int) -> list[bytes]:
    synth = Synth(seed)
    start = datetime.now(UTC) - timedelta(hours=1)
    made = []
    for k in range(count):
        record = synth.run(
            f"t{k % targets:03d}", agent, "http", start + k * timedelta(seconds=1), 20
        )
        made.append(gzip.compress(json.dumps(record.to_json()).encode(), 6))
    return made


def push_all(
    base: str,
    agent: str,
    token: str,
    payloads: list[bytes],
    every_s: float,
    until: float,
    tally: Tally,
) -> None:
    headers = {
        "Authorization": f"Bearer {token}",
        VANTAGE_HEADER: agent,
        "Content-Encoding": "gzip",
    }
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        due = time.monotonic()
        for body in payloads:
            if every_s:
                time.sleep(max(0.0, due - time.monotonic()))
                due += every_s
            if time.monotonic() >= until:
                return
            began = time.monotonic()
            sent = {SENT_AT_HEADER: datetime.now(UTC).isoformat()}
            answer = client.post(RUNS_PATH, content=body, headers=sent)
            took = time.monotonic() - began
            with tally.lock:
                if answer.status_code == 200 and answer.json()["stored"]:
                    tally.latencies.append(took)
                else:
                    tally.failed += 1


def server_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def phase(
    name: str, base: str, pid: int, tokens: dict[str, str], args: argparse.Namespace, paced: bool
) -> list[str]:
    agents = sorted(tokens)
    per_agent_s = len(agents) * 60.0 / args.rate if paced else 0.0
    count = int(args.seconds / per_agent_s) + 2 if paced else args.flat_count
    count = min(count, MAX_PUSHES // len(agents))
    seed = 1 if paced else 2
    payloads = {a: bodies(a, args.targets, count, seed * 1000 + i) for i, a in enumerate(agents)}
    tally = Tally()
    cpu_before, began = server_cpu_s(pid), time.monotonic()
    until = began + args.seconds
    threads = [
        threading.Thread(
            target=push_all,
            args=(base, a, tokens[a], payloads[a], per_agent_s, until, tally),
        )
        for a in agents
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(args.seconds + 60)
    wall = time.monotonic() - began
    cpu = server_cpu_s(pid) - cpu_before
    stored = len(tally.latencies)
    ms = [x * 1000 for x in tally.latencies] or [0.0]
    return [
        name,
        f"{stored / wall * 60:,.0f}",
        f"{pct(ms, 50):.1f}",
        f"{pct(ms, 99):.1f}",
        f"{max(ms):.1f}",
        f"{cpu / max(stored, 1) * 1000:.2f}",
        str(tally.failed),
    ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_backend(backend: str, args: argparse.Namespace) -> list[list[str]]:
    url = database_url(backend, args.db_name, args.pg, args.sqlite_dir)
    create_database(url, args.pg)
    agents = [f"agent-{k:02d}" for k in range(1, args.agents + 1)]
    tokens = {name: secrets.token_urlsafe(24) for name in agents}
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "phasewatch.yaml"
        targets_file(config, agents, tokens, args.targets, not args.no_detectors)
        env = os.environ | {"PHASEWATCH_DATABASE_URL": url, "PHASEWATCH_SPOOL_DIR": f"{tmp}/spool"}
        command = [sys.executable, "-m", "app", "serve", "--config", str(config)]
        log = Path(tmp, "serve.log").open("w")
        server = subprocess.Popen(
            [*command, "--port", str(port), "--log-level", "warning"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        label = f"{backend}{' (no detectors)' if args.no_detectors else ''}"
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            rows = [
                [label, *phase("paced", base, server.pid, tokens, args, paced=True)],
                [label, *phase("flat out", base, server.pid, tokens, args, paced=False)],
            ]
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(15)
            log.close()
            if not args.keep:
                drop_database(url, args.pg)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_options(parser, "pw_bench_agents", "postgresql")
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--targets", type=int, default=50)
    parser.add_argument("--rate", type=float, default=2000.0, help="runs a minute, paced phase")
    parser.add_argument("--seconds", type=float, default=30.0, help="each phase")
    parser.add_argument(
        "--no-detectors",
        action="store_true",
        help="targets with `alerts: {enabled: []}`: the push and the store alone",
    )
    parser.add_argument("--flat-count", type=int, default=400, help="bodies per agent, flat out")
    args = parser.parse_args()
    print(machine_info())
    clock = RunClock()
    rows = []
    for backend in backends(args.backends):
        rows += run_backend(backend, args)
    headers = ["backend", "phase", "runs/min", "push p50 ms", "p99 ms", "max ms"]
    print_table([*headers, "server CPU ms/run", "failed"], rows)
    print(clock.report())


if __name__ == "__main__":
    main()
