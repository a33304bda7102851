"""Issue 15's ingest goal: one `phasewatch serve` taking pushes from simulated agents.

20 agents × 50 targets (defaults) push recorded runs (``Synth``: 20 samples each, the shape
of the probe's) as `phasewatch agent` does: one gzip ``RunRecord`` per request, one request
at a time per agent, each agent on a connection of its own. Two phases:

* **paced**: every agent pushes at the rate that makes ``--rate`` runs a minute in all (the
  goal's 2,000), for ``--seconds``: runs a minute sustained, push latency p50 / p99 / max.
  The agents' first pushes are spread over one interval, as independent agents' are
  (``--aligned``: all at the same instant, a burst of 20 each interval, as before);
* **flat out**: every agent pushes back to back for ``--seconds``: the most this server takes;
* **batched** (``--batch N``): paced at ``--rate`` as the first, each agent sending ``N`` runs
  a request (``/api/v1/agent/batches``, as an agent flushes its spool), every ``N`` intervals:
  the latency is a request's, the count the runs stored.

The server runs in its own process (its CPU is read from /proc, per run stored); the bodies
and their requests' heads are built before each phase, and the agents are coroutines of one
event loop on raw kept-alive connections (``bench.rawpush``), so the agents' side costs the
server's cores little. Each phase says the runs a minute offered and how late the agents
sent (p99 behind each push's due time): a rate not offered on time is the generator's
limit, not the server's. Loopback only; every loop is bounded by its phase's time and a
count.

    .venv/bin/python -m bench.agents_ingest --backends postgresql
    .venv/bin/python -m bench.agents_ingest --backends postgresql --phases paced,batched --batch 10
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from app.agents.wire import BATCH_PATH, RUNS_PATH, SENT_AT_HEADER, VANTAGE_HEADER
from bench.common import RunClock, machine_info, pct, print_table
from bench.rawpush import PushError, RawPusher, request_head
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
    batch: int = 0
    latencies: list[float] = field(default_factory=list)  # of requests all stored
    late: list[float] = field(default_factory=list)  # each push's send behind its due time
    offered: int = 0  # runs sent
    stored: int = 0
    failed: int = 0


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


Payload = tuple[bytes, bytes, int]  # the request's head, its gzip body, the runs in it


def bodies(agent: str, targets: int, count: int, seed: int, batch: int) -> list[tuple[bytes, int]]:
    """Each request's gzip body and the runs in it: one ``RunRecord`` when ``batch`` is 0,
    else ``{"runs": [...]}`` of ``batch`` of them."""
    synth = Synth(seed)
    start = datetime.now(UTC) - timedelta(hours=1)
    runs = [
        synth.run(f"t{k % targets:03d}", agent, "http", start + k * timedelta(seconds=1), 20)
        for k in range(count)
    ]
    if not batch:
        return [(gzip.compress(json.dumps(r.to_json()).encode(), 6), 1) for r in runs]
    made = []
    for k in range(0, count, batch):
        chunk = [r.to_json() for r in runs[k : k + batch]]
        made.append((gzip.compress(json.dumps({"runs": chunk}).encode(), 6), len(chunk)))
    return made


def requests(
    host: str, agent: str, token: str, batch: int, made: list[tuple[bytes, int]]
) -> list[Payload]:
    """Each body with the head of its request (all but the sent-at header)."""
    headers = {
        "Authorization": f"Bearer {token}",
        VANTAGE_HEADER: agent,
        "Content-Encoding": "gzip",
        "Content-Type": "application/json",
    }
    path = BATCH_PATH if batch else RUNS_PATH
    return [(request_head(host, path, headers, len(body)), body, runs) for body, runs in made]


@dataclass
class Window:
    """The phase's time, opened when every agent holds its connection (making twenty
    clients took part of a 20 s window and showed as a lower rate than the one offered)."""

    seconds: float
    pid: int
    began: float = 0.0
    until: float = 0.0
    cpu_before: float = 0.0

    def open(self) -> None:
        self.cpu_before, self.began = server_cpu_s(self.pid), time.monotonic()
        self.until = self.began + self.seconds


async def push_all(
    pusher: RawPusher,
    payloads: list[Payload],
    every_s: float,
    window: Window,
    tally: Tally,
    offset_s: float = 0.0,
) -> None:
    due, until = window.began + offset_s, window.until
    for head, body, runs in payloads:
        if every_s:
            ahead = due - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)
        if time.monotonic() >= until:
            return
        began = time.monotonic()
        if every_s:
            tally.late.append(max(0.0, began - due))
            due += every_s
        tally.offered += runs
        try:
            stored = (await pusher.post(head, SENT_AT_HEADER, body)).stored()
        except PushError:
            tally.failed += runs
            return
        took = time.monotonic() - began
        tally.stored += stored
        tally.failed += runs - stored
        if stored == runs:
            tally.latencies.append(took)


async def drive(
    port: int, payloads: dict[str, list[Payload]], every_s: float, window: Window,
    tally: Tally, starts: list[float],
) -> None:  # fmt: skip
    """Every agent connected before the window opens, then all of them pushing."""
    pushers = [await RawPusher.connect("127.0.0.1", port) for _ in payloads]
    window.open()
    try:
        await asyncio.gather(*(
            push_all(pusher, mine, every_s, window, tally, offset)
            for pusher, mine, offset in zip(pushers, payloads.values(), starts, strict=True)
        ))  # fmt: skip
    finally:
        for pusher in pushers:
            await pusher.close()


def server_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


PHASES = ("paced", "flat", "batched")


def offsets(agents: int, every_s: float, aligned: bool) -> list[float]:
    """When each agent first pushes: spread evenly over one interval, as independent agents
    are; ``aligned``, all at once, so every interval begins with a burst of ``agents``."""
    return [0.0 if aligned else k * every_s / agents for k in range(agents)]


def phase(
    name: str, port: int, pid: int, tokens: dict[str, str], args: argparse.Namespace
) -> list[str]:
    agents = sorted(tokens)
    paced = name != "flat"
    batch = args.batch if name == "batched" else 0
    per_agent_s = len(agents) * 60.0 / args.rate if paced else 0.0
    count = int(args.seconds / per_agent_s) + 2 if paced else args.flat_count
    count = min(count, MAX_PUSHES // len(agents))
    seed = PHASES.index(name) + 1
    host = f"127.0.0.1:{port}"
    payloads = {
        a: requests(host, a, tokens[a], batch,
                    bodies(a, args.targets, count, seed * 1000 + i, batch))
        for i, a in enumerate(agents)
    }  # fmt: skip
    per_agent_s *= max(batch, 1)
    tally, window = Tally(batch), Window(args.seconds, pid)
    starts = offsets(len(agents), per_agent_s, args.aligned)
    own_cpu = time.process_time()
    asyncio.run(
        asyncio.wait_for(drive(port, payloads, per_agent_s, window, tally, starts),
                         args.seconds + 60)
    )  # fmt: skip
    wall = time.monotonic() - window.began
    cpu = server_cpu_s(pid) - window.cpu_before
    own_cpu = time.process_time() - own_cpu
    stored = tally.stored
    ms = [x * 1000 for x in tally.latencies] or [0.0]
    late = [x * 1000 for x in tally.late] or [0.0]
    return [
        f"batched ({batch} a push)" if batch else {"flat": "flat out"}.get(name, name),
        f"{tally.offered / wall * 60:,.0f}",
        f"{pct(late, 99):.1f}",
        f"{stored / wall * 60:,.0f}",
        f"{pct(ms, 50):.1f}",
        f"{pct(ms, 99):.1f}",
        f"{max(ms):.1f}",
        f"{cpu / max(stored, 1) * 1000:.2f}",
        f"{own_cpu / max(tally.offered, 1) * 1000:.2f}",
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
            rows = [[label, *phase(name, port, server.pid, tokens, args)] for name in args.phases]
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
    parser.add_argument(
        "--phases", default="paced,flat", help=f"comma-separated, in order: {', '.join(PHASES)}"
    )
    parser.add_argument("--batch", type=int, default=10, help="runs a request, batched phase")
    parser.add_argument(
        "--aligned",
        action="store_true",
        help="paced agents all push at the same instant (a burst each interval), not spread",
    )
    args = parser.parse_args()
    args.phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = set(args.phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phase(s) {sorted(unknown)}: choose from {', '.join(PHASES)}")
    print(machine_info())
    clock = RunClock()
    rows = []
    for backend in backends(args.backends):
        rows += run_backend(backend, args)
    headers = ["backend", "phase", "offered/min", "sent late p99 ms", "runs/min", "push p50 ms",
               "p99 ms", "max ms"]  # fmt: skip
    print_table([*headers, "server CPU ms/run", "agents' CPU ms/run", "failed"], rows)
    print(clock.report())


if __name__ == "__main__":
    main()
