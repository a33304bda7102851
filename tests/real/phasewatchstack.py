"""A real ``phasewatch serve`` and a real ``phasewatch agent`` on loopback, probing the demo's
simulated endpoint every second, for the Prometheus tests: every family of /metrics has
series (phases, end-to-end, outcomes, errors, deadline misses and their SLO, the
objectives' SLOs and goodput, open alerts, an agent's vantage)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.demo.sim.server import SimServer
from tests import agentprocs
from tests.helpers import FAST_SIM, eventually, free_port

TOKEN = "token-prom-0123456789abcdef"
SERVER_VANTAGE = "server-1"
AGENT_VANTAGE = "agent-a"


# Objectives (docs/slo.md), so their burn rates, budgets and goodput have series: met by
# ``edge``, and ``late``'s availability burns (a cut sample is not an ok answer).
OBJECTIVES = "    alerts:\n      objectives:\n        availability: {target: 99.5}\n"


def config_file(directory: Path, sim: SimServer) -> Path:
    """``edge`` from both vantages within its deadline and objectives, ``late`` past its
    deadline on every sample (so the deadline's and availability's SLOs burn), ``down``
    refused on every request (so probe_failing fires)."""
    closed = free_port()
    path = directory / "phasewatch.yaml"
    path.write_text(
        f"vantages:\n  {AGENT_VANTAGE}: {{token: {TOKEN}}}\n"
        "targets:\n"
        f"  - name: edge\n    url: {sim.url}/health\n    interval: 1s\n    samples: 3\n"
        f"    deadline_ms: 5000\n    vantages: [{AGENT_VANTAGE}, {SERVER_VANTAGE}]\n"
        f"{OBJECTIVES}        end_to_end_ms: {{p: 99, below: 5000}}\n"
        f"  - name: late\n    url: {sim.url}/health\n    interval: 1s\n    samples: 2\n"
        f"    deadline_ms: 0.01\n    cooldown: 0s\n{OBJECTIVES}"
        f"  - name: down\n    url: http://127.0.0.1:{closed}/\n    interval: 1s\n    samples: 1\n"
    )
    return path


@dataclass
class Stack:
    port: int
    serve: agentprocs.Process
    agent: agentprocs.Process

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def metrics(self) -> str:
        return httpx.get(f"http://{self.address}/metrics", timeout=10).text

    def output(self) -> str:
        """Each process's warnings and errors, then the end of its log (a scrape's
        ``access`` lines would push what went wrong out of the tail)."""
        return f"serve:\n{_said(self.serve.output())}\nagent:\n{_said(self.agent.output())}"


def _said(log: str) -> str:
    lines = log.splitlines()
    loud = [line for line in lines if " WARNING " in line or " ERROR " in line]
    return "\n".join([*loud[-20:], "…", *lines[-15:]])


@contextmanager
def running_stack(workdir: Path) -> Iterator[Stack]:
    with SimServer(FAST_SIM) as sim:
        config = config_file(workdir, sim)
        port = free_port()
        db_url = f"sqlite:///{workdir / 'phasewatch.db'}"
        serve = agentprocs.start_serve(workdir, config, port, db_url, vantage=SERVER_VANTAGE)
        try:
            agent = agentprocs.start_agent(workdir, port, AGENT_VANTAGE, TOKEN)
            try:
                stack = Stack(port, serve, agent)
                pushed = f'phasewatch_agent_runs_pushed_total{{vantage="{AGENT_VANTAGE}"}}'
                eventually(lambda: pushed in stack.metrics(), 60, "the agent pushed a run")
                yield stack
            finally:
                agent.stop()
        finally:
            serve.stop()
