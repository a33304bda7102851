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
  the latency is a request's, the count the runs stored;
* **warm** (``--warm-seconds``, first in ``--phases``): paced as the first, runs older than
  every later phase's, so the phases after it meet a server that has judged each series
  before, as one running for days has. Without it the first phase's pushes share the
  server with every series' first evaluation (its reference read, its detectors' state
  made), ~14 ms each against ~9 after (``bench.push_cpu``): 1,000 series at 10,000 a minute
  make every one of them in the phase's first six seconds.

The server runs in its own process (its CPU is read from /proc, per run stored); the bodies
and their requests' heads are built before each phase, and the agents are coroutines of one
event loop on raw kept-alive connections (``bench.rawpush``), so the agents' side costs the
server's cores little. Each phase says the runs a minute offered and how late the agents
sent (p99 behind each push's due time): a rate not offered on time is the generator's
limit, not the server's. Loopback only; every loop is bounded by its phase's time and a
count.

``--replicas N`` starts N ``serve`` replicas on the one PostgreSQL database
(``bench.push_replicas``) and waits until they share the targets out; each agent pushes to
one of them (``--spread agent``: agent k to replica k mod N) or to each in turn
(``--spread request``). Each replica's row says the pushes it took, their latency, its CPU
a run it stored and the evaluations it asked of a target's owner or claimed as one; the
``all`` row, everything, with the database's backends' CPU a run beside. ``--profile S``
records py-spy (``--gil``) on each serve for S seconds of each phase; ``--app-tree`` runs
serve from another checkout (the other side of a before/after pair).

    .venv/bin/python -m bench.agents_ingest --backends postgresql
    .venv/bin/python -m bench.agents_ingest --backends postgresql --phases paced,batched --batch 10
    .venv/bin/python -m bench.agents_ingest --backends postgresql --phases paced --rate 10000 \
        --replicas 2
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from app.agents.wire import BATCH_PATH, RUNS_PATH, SENT_AT_HEADER, VANTAGE_HEADER
from bench.common import RunClock, machine_info, pct, print_table
from bench.push_replicas import Profiles, Servers, backends_cpu_s, cpu_s, metrics_of
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


def bodies(agent: str, targets: int, count: int, seed: int, batch: int, recent: bool = False,
           earlier: timedelta = timedelta()) -> list[tuple[bytes, int]]:  # fmt: skip
    """Each request's gzip body and the runs in it: one ``RunRecord`` when ``batch`` is 0,
    else ``{"runs": [...]}`` of ``batch`` of them. The runs start a second apart, the first
    an hour ago (a late push: their 15-minute and hourly periods are closed, so the rollups'
    catch-up folds and merges coarse rows for them); ``recent``, the last one now (as an
    agent pushes a run it has just measured: its coarse periods still open); all of them
    ``earlier`` than that."""
    synth = Synth(seed)
    start = datetime.now(UTC) - (timedelta(seconds=count) if recent else timedelta(hours=1))
    start -= earlier
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
    clients took part of a 20 s window and showed as a lower rate than the one offered);
    the servers' CPU and their database backends' at its start."""

    seconds: float
    pids: list[int]
    database: str
    began: float = 0.0
    until: float = 0.0
    cpu_before: list[float] = field(default_factory=list)
    backends_before: dict[int, float] = field(default_factory=dict)

    def open(self) -> None:
        self.cpu_before = [cpu_s(pid) for pid in self.pids]
        self.backends_before = backends_cpu_s(self.database)
        self.began = time.monotonic()
        self.until = self.began + self.seconds

    def servers_cpu_s(self) -> list[float]:
        return [cpu_s(pid) - was for pid, was in zip(self.pids, self.cpu_before, strict=True)]

    def backends_cpu_s(self) -> float:
        """The database's backends, those of the window's start and those opened since."""
        now = backends_cpu_s(self.database)
        return sum(cpu - self.backends_before.get(pid, 0.0) for pid, cpu in now.items())


@dataclass
class Agent:
    """One agent's connections (one, or one to each replica) and which replica each is to;
    its ``k``-th push goes to ``pushers[(first + k) % len(pushers)]``."""

    pushers: list[RawPusher]
    replicas: list[int]
    first: int = 0


async def push_all(
    agent: Agent,
    payloads: list[Payload],
    every_s: float,
    window: Window,
    tallies: list[Tally],
    offset_s: float = 0.0,
) -> None:
    due, until = window.began + offset_s, window.until
    for k, (head, body, runs) in enumerate(payloads):
        if every_s:
            ahead = due - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)
        if time.monotonic() >= until:
            return
        which = (agent.first + k) % len(agent.pushers)
        pusher, tally = agent.pushers[which], tallies[agent.replicas[which]]
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


async def connect(ports: list[int], k: int, spread: str) -> Agent:
    """Agent ``k``'s connections: to replica ``k % N`` alone (``agent``), or to every
    replica, its pushes taken in turn beginning at ``k % N`` (``request``: a balancer that
    sends each request elsewhere)."""
    if spread == "agent":
        mine = [k % len(ports)]
    else:
        mine = list(range(len(ports)))
    pushers = [await RawPusher.connect("127.0.0.1", ports[r]) for r in mine]
    return Agent(pushers, mine, 0 if spread == "agent" else k % len(ports))


async def drive(
    ports: list[int], payloads: dict[str, list[Payload]], every_s: float, window: Window,
    tallies: list[Tally], starts: list[float], spread: str,
) -> None:  # fmt: skip
    """Every agent connected before the window opens, then all of them pushing."""
    agents = [await connect(ports, k, spread) for k in range(len(payloads))]
    window.open()
    try:
        await asyncio.gather(*(
            push_all(agent, mine, every_s, window, tallies, offset)
            for agent, mine, offset in zip(agents, payloads.values(), starts, strict=True)
        ))  # fmt: skip
    finally:
        for agent in agents:
            for pusher in agent.pushers:
                await pusher.close()


PHASES = ("paced", "flat", "batched", "warm")


def offsets(agents: int, every_s: float, aligned: bool) -> list[float]:
    """When each agent first pushes: spread evenly over one interval, as independent agents
    are; ``aligned``, all at once, so every interval begins with a burst of ``agents``."""
    return [0.0 if aligned else k * every_s / agents for k in range(agents)]


def phase(name: str, servers: Servers, tokens: dict[str, str], args: argparse.Namespace,
          database: str) -> list[list[str]]:  # fmt: skip
    """The phase's rows: one a replica, then (several) all of them."""
    agents = sorted(tokens)
    paced = name != "flat"
    batch = args.batch if name == "batched" else 0
    seconds = args.warm_seconds if name == "warm" else args.seconds
    per_agent_s = len(agents) * 60.0 / args.rate if paced else 0.0
    count = int(seconds / per_agent_s) + 2 if paced else args.flat_count
    count = min(count, MAX_PUSHES // len(agents))
    seed = PHASES.index(name) + 1
    # The warm-up's runs end before any later phase's begin (a later phase's start from
    # the clock then is at least as late), so none of those arrives out of order.
    earlier = timedelta(seconds=count) if name == "warm" else timedelta()
    host = "127.0.0.1"  # every replica's: the Host header names no port
    payloads = {
        a: requests(host, a, tokens[a], batch,
                    bodies(a, args.targets, count, seed * 1000 + i, batch, args.recent, earlier))
        for i, a in enumerate(agents)
    }  # fmt: skip
    per_agent_s *= max(batch, 1)
    tallies = [Tally(batch) for _ in servers.ports]
    window = Window(seconds, servers.pids, database)
    starts = offsets(len(agents), per_agent_s, args.aligned)
    before = [metrics_of(port) for port in servers.ports]
    own_cpu = time.process_time()
    spy = Profiles(servers.pids, min(args.profile, seconds), args.profile_dir, name)
    asyncio.run(
        asyncio.wait_for(drive(servers.ports, payloads, per_agent_s, window, tallies, starts,
                               args.spread), seconds + 60)
    )  # fmt: skip
    wall = time.monotonic() - window.began
    cpu, pg_cpu = window.servers_cpu_s(), window.backends_cpu_s()
    own_cpu = time.process_time() - own_cpu
    spy.wait()
    after = [metrics_of(port) for port in servers.ports]
    evaluations = [_asked_claimed(was, now) for was, now in zip(before, after, strict=True)]
    names = {"flat": "flat out", "warm": "warm-up"}
    label = f"batched ({batch} a push)" if batch else names.get(name, name)
    if len(tallies) == 1:
        return [
            [label, "1", *_numbers(tallies[0], wall, cpu[0], evaluations[0], (pg_cpu, own_cpu))]
        ]
    rows = [[label, f"{k + 1} of {len(tallies)}", *_numbers(tally, wall, cpu[k], evaluations[k])]
            for k, tally in enumerate(tallies)]  # fmt: skip
    asked = sum(e[0] for e in evaluations), sum(e[1] for e in evaluations)
    whole = _numbers(_merged(tallies), wall, sum(cpu), asked, (pg_cpu, own_cpu))
    return [*rows, [label, "all", *whole]]


def _asked_claimed(before: dict[str, float], after: dict[str, float]) -> tuple[int, int]:
    """Evaluations this replica asked of an owner, and claimed as the owner, in the phase."""
    asked = after.get("asked", 0) - before.get("asked", 0)
    return int(asked), int(after.get("claimed", 0) - before.get("claimed", 0))


def _merged(tallies: list[Tally]) -> Tally:
    merged = Tally(tallies[0].batch)
    for tally in tallies:
        merged.latencies += tally.latencies
        merged.late += tally.late
        merged.offered += tally.offered
        merged.stored += tally.stored
        merged.failed += tally.failed
    return merged


def _numbers(tally: Tally, wall: float, cpu: float, evaluations: tuple[int, int],
             shared: tuple[float, float] | None = None) -> list[str]:  # fmt: skip
    """offered/min, sent late p99, runs/min, p50, p99, max, the server's CPU a run, then
    (``shared``: the database's backends' CPU and the agents', on the phase's whole row
    only) theirs a run, the evaluations asked / claimed, failed."""
    ms = [x * 1000 for x in tally.latencies] or [0.0]
    late = [x * 1000 for x in tally.late] or [0.0]
    per_run = 1000 / max(tally.stored, 1)
    return [
        f"{tally.offered / wall * 60:,.0f}",
        f"{pct(late, 99):.1f}",
        f"{tally.stored / wall * 60:,.0f}",
        f"{pct(ms, 50):.1f}",
        f"{pct(ms, 99):.1f}",
        f"{max(ms):.1f}",
        f"{cpu * per_run:.2f}",
        "–" if shared is None else f"{shared[0] * per_run:.2f}",
        "–" if shared is None else f"{shared[1] * 1000 / max(tally.offered, 1):.2f}",
        f"{evaluations[0]:,} / {evaluations[1]:,}",
        str(tally.failed),
    ]


def run_backend(backend: str, args: argparse.Namespace) -> list[list[str]]:
    url = database_url(backend, args.db_name, args.pg, args.sqlite_dir)
    if backend == "sqlite" and args.replicas > 1:
        raise SystemExit("replicas share PostgreSQL only: SQLite serves one process")
    create_database(url, args.pg)
    agents = [f"agent-{k:02d}" for k in range(1, args.agents + 1)]
    tokens = {name: secrets.token_urlsafe(24) for name in agents}
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "phasewatch.yaml"
        targets_file(config, agents, tokens, args.targets, not args.no_detectors)
        env = os.environ | {"PHASEWATCH_DATABASE_URL": url}
        if args.app_tree is not None:  # the serve's app from another checkout (a pair)
            env["PYTHONPATH"] = str(args.app_tree.resolve())
            # ``python -m`` puts the working directory ahead of PYTHONPATH: without this,
            # a bench started from a checkout ran that checkout's app, whatever the tree.
            env["PYTHONSAFEPATH"] = "1"
        command = [sys.executable, "-m", "app", "serve", "--config", str(config)]
        servers = Servers(command, env, Path(tmp), args.replicas)
        label = f"{backend}{' (no detectors)' if args.no_detectors else ''}"
        try:
            servers.start()
            servers.wait_ready(args.targets)
            rows = [[label, *row] for name in args.phases
                    for row in phase(name, servers, tokens, args, args.db_name)]  # fmt: skip
        finally:
            servers.stop()
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
        "--warm-seconds", type=float, default=60.0, help="the warm phase, paced at --rate"
    )
    parser.add_argument(
        "--no-detectors",
        action="store_true",
        help="targets with `alerts: {enabled: []}`: the push and the store alone",
    )
    parser.add_argument(
        "--recent",
        action="store_true",
        help="runs that end as the bodies are built (their coarse periods open), not an hour ago",
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
    parser.add_argument(
        "--replicas", type=int, default=1, help="serve replicas on the one PostgreSQL database"
    )
    parser.add_argument(
        "--spread",
        choices=("agent", "request"),
        default="agent",
        help="with replicas: each agent to one replica (agent k to replica k mod N), or each"
        " agent's pushes to every replica in turn",
    )
    parser.add_argument(
        "--profile", type=float, default=0.0, help="seconds of py-spy on each serve a phase"
    )
    parser.add_argument("--profile-dir", type=Path, default=Path("/tmp/pw-agents-ingest"))
    parser.add_argument(
        "--app-tree",
        type=Path,
        help="run serve with this checkout's app (PYTHONPATH): the other side of a pair",
    )
    args = parser.parse_args()
    args.phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = set(args.phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phase(s) {sorted(unknown)}: choose from {', '.join(PHASES)}")
    if "warm" in args.phases[1:]:
        parser.error("the warm phase comes first: its runs are older than the others'")
    print(machine_info())
    clock = RunClock()
    rows = []
    for backend in backends(args.backends):
        rows += run_backend(backend, args)
    headers = ["backend", "phase", "replica", "offered/min", "sent late p99 ms", "runs/min",
               "push p50 ms", "p99 ms", "max ms", "server CPU ms/run", "PostgreSQL CPU ms/run",
               "agents' CPU ms/run", "evaluations asked / claimed", "failed"]  # fmt: skip
    print_table(headers, rows)
    print(clock.report())


if __name__ == "__main__":
    main()
