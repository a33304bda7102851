"""`phasewatch serve` and two `phasewatch agent`s as real processes on loopback, probing the
demo's simulated endpoint: runs from every vantage are listed with their vantage; the server
stopped for a while, the agents spool, and once it is back every sample the endpoint answered
is stored exactly once; an agent killed is listed as silent until it reports again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest
from sqlalchemy import select

from app.demo.simserver import SimServer
from app.store.db import make_engine, make_sessions
from app.store.models import Base, RunRow, SampleRow, TargetRow
from tests.helpers import eventually, free_port

pytestmark = [pytest.mark.timeout(180), pytest.mark.process]
TOKENS = {"agent-a": "token-a-0123456789abcdef", "agent-b": "token-b-0123456789abcdef"}
SECRET = "sk-agent-a-secret-never-on-the-server"


class Process:
    def __init__(self, log: Path, command: list[str], env: dict[str, str]) -> None:
        self.path = log
        self.log: IO[str] = log.open("a")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", *command],
            env=os.environ | env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=15)
        self.log.close()

    def output(self) -> str:
        return self.path.read_text()


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        if process.process.poll() is None:
            process.process.kill()
            process.process.wait()
        process.log.close()


def config_file(tmp_path: Path, sim: SimServer) -> Path:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(
        "vantages:\n"
        + "".join(f"  {name}: {{token: {token}}}\n" for name, token in TOKENS.items())
        + f"targets:\n  - name: edge\n    kind: http\n    url: {sim.url}/health\n"
        "    interval: 1s\n    samples: 2\n"
        '    headers: {X-Probe: "${PROBE_KEY}"}\n'
        "    vantages: [agent-a, agent-b, server-1]\n"
        f"  - name: b-only-var\n    kind: http\n    url: {sim.url}/health\n"
        '    interval: 1s\n    samples: 1\n    headers: {X-Key: "${ONLY_ON_B}"}\n'
        "    vantages: [agent-a, agent-b]\n"
    )
    return path


def start_serve(tmp_path: Path, config: Path, port: int, db_url: str) -> Process:
    env = {
        "PHASEWATCH_DATABASE_URL": db_url,
        "PHASEWATCH_SPOOL_DIR": str(tmp_path / "server-spool"),
        "PHASEWATCH_VANTAGE": "server-1",
        "PROBE_KEY": "server-key",
    }
    command = ["serve", "--config", str(config), "--port", str(port)]
    served = Process(tmp_path / "serve.log", command, env)
    eventually(lambda: _up(port) or served.process.poll() is not None, 30, "serve up")
    assert served.process.poll() is None, served.output()
    return served


def start_agent(tmp_path: Path, port: int, vantage: str, **env: str) -> Process:
    command = ["agent", "--server", f"http://127.0.0.1:{port}", "--vantage", vantage]
    variables = {
        "PHASEWATCH_AGENT_TOKEN": TOKENS[vantage],
        "PHASEWATCH_SPOOL_DIR": str(tmp_path / f"{vantage}-spool"),
        **env,
    }
    return Process(tmp_path / f"{vantage}.log", [*command, "--refresh", "1"], variables)


def _up(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code < 600
    except httpx.HTTPError:
        return False


def listed_vantages(port: int) -> set[str]:
    answer = httpx.get(
        f"http://127.0.0.1:{port}/api/v1/runs", params={"target": "edge", "limit": 500}, timeout=5
    )
    return {run["vantage"] for run in answer.json()["items"]} if answer.is_success else set()


def spooled(tmp_path: Path, vantage: str) -> int:
    path = tmp_path / f"{vantage}-spool" / "runs.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def stored(db_url: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(vantage, target, status) of every run, and every sample's request id."""
    engine = make_engine(db_url)
    try:
        with make_sessions(engine)() as session:
            query = select(RunRow.vantage, TargetRow.name, RunRow.status).join(TargetRow)
            runs = [(str(v), str(t), str(s)) for v, t, s in session.execute(query)]
            details = session.scalars(select(SampleRow.details))
            return runs, [str(found.get("request_id")) for found in details]
    finally:
        engine.dispose()


def database_dump(db_url: str) -> str:
    engine = make_engine(db_url)
    try:
        with engine.connect() as connection:
            tables = Base.metadata.sorted_tables
            return "\n".join(repr(row) for t in tables for row in connection.execute(t.select()))
    finally:
        engine.dispose()


def silent(port: int) -> set[str] | None:
    answer = httpx.get(f"http://127.0.0.1:{port}/api/v1/vantages", timeout=5)
    return {v["name"] for v in answer.json() if v["silent"]} if answer.is_success else None


def refused_at(port: int, vantage: str) -> dict[str, str]:
    answer = httpx.get(f"http://127.0.0.1:{port}/api/v1/vantages", timeout=5)
    found = {v["name"]: v["refused"] for v in answer.json()} if answer.is_success else {}
    return dict(found.get(vantage) or {})


def test_agents_push_from_their_vantages_spool_through_an_outage_and_lose_nothing(
    tmp_path: Path, sim: SimServer, processes: list[Process], db_url: str
) -> None:
    config = config_file(tmp_path, sim)
    port = free_port()
    processes.append(start_serve(tmp_path, config, port, db_url))
    for vantage in TOKENS:
        extra = {"ONLY_ON_B": "b-value"} if vantage == "agent-b" else {}
        processes.append(start_agent(tmp_path, port, vantage, PROBE_KEY=SECRET, **extra))
    everyone = {"agent-a", "agent-b", "server-1"}
    eventually(lambda: listed_vantages(port) == everyone, 30, "runs from every vantage")
    # agent-a lacks ONLY_ON_B: it refuses that target, says so in its log and to the server.
    refusal = {"b-only-var": "environment variable ONLY_ON_B is not set"}
    eventually(lambda: refused_at(port, "agent-a") == refusal, 10, "the refusal reported")
    assert refused_at(port, "agent-b") == {}

    processes[0].stop()  # the server goes away; the agents probe on, into their spools
    eventually(lambda: all(spooled(tmp_path, v) >= 3 for v in TOKENS), 30, "runs spooled")
    processes.append(start_serve(tmp_path, config, port, db_url))
    eventually(lambda: not any(spooled(tmp_path, v) for v in TOKENS), 60, "spools flushed")
    eventually(lambda: silent(port) == set(), 10, "no vantage silent")
    processes[2].process.kill()  # agent-b crashes: after 3 of its intervals it is silent
    processes[2].process.wait()
    processes[2].log.close()
    eventually(lambda: silent(port) == {"agent-b"}, 15, "agent-b silent")
    processes.append(start_agent(tmp_path, port, "agent-b", PROBE_KEY=SECRET, ONLY_ON_B="b"))
    eventually(lambda: silent(port) == set(), 15, "agent-b heard again")
    for process in (processes[1], processes[4], processes[3]):
        process.stop()

    runs, request_ids = stored(db_url)
    assert {(v, t) for v, t, _ in runs} == {
        *((vantage, "edge") for vantage in everyone),
        ("agent-b", "b-only-var"),
    }
    assert "environment variable ONLY_ON_B is not set" in processes[1].output()
    assert max(Counter(request_ids).values()) == 1  # no sample stored twice
    answered = {truth.request_id for truth in sim.app.truths()}
    assert set(request_ids) <= answered
    # Every answered request is stored but those of runs cut at a stop (at most one sample
    # in flight per run cut: the server's at its stop, the agents' at theirs).
    aborted = [run for run in runs if run[2] == "aborted"]
    assert len(answered - set(request_ids)) <= len(aborted)
    # The outage's runs arrived: agent-a went on probing while the server was away.
    assert sum(1 for v, t, _ in runs if (v, t) == ("agent-a", "edge")) >= 3 + 3
    # The agent's secret never reached the server: not in its database, nor its log.
    assert SECRET not in database_dump(db_url)
    assert SECRET not in processes[0].output() + processes[3].output()
