"""Agents end to end, with real processes on loopback: one `phasewatch serve` on
PostgreSQL and three `phasewatch agent`s, each on its own simulated route to one simulated
endpoint (the sim's ``paths``: the agent names itself in ``X-Sim-Client``, a header
template it fills from its own environment).

Runs from all three appear; a longer route at one agent is a ``path`` alert there; a slower
server is one ``service`` alert "at 3/3 vantages"; the server stopped for two intervals
loses no run and stores none twice; an agent killed raises ``vantage_silent``, which
resolves when it comes back; a forged vantage or target is refused; a replayed push stores
nothing; the agents' secret is nowhere on the server."""

from __future__ import annotations

import gzip
import json
import re
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import func, select

from app.agents.wire import RUNS_PATH, VANTAGE_HEADER
from app.demo.sim.app import SimConfig
from app.demo.sim.server import SimServer
from app.store.db import make_engine
from app.store.models import RunRow
from app.store.records import RunRecord
from tests.agentprocs import (
    Process,
    api,
    database_dump,
    listed_vantages,
    processes,
    spooled,
    start_agent,
    start_serve,
    stored,
)
from tests.helpers import eventually, free_port
from tests.runfactory import make_run, record_of

pytestmark = [pytest.mark.timeout(600), pytest.mark.process]
__all__ = ["processes"]  # the fixture, used by name
AGENTS = {
    "agent-a": ("token-a-0123456789abcdef", 2.0),  # (token, one-way route in ms)
    "agent-b": ("token-b-0123456789abcdef", 8.0),
    "agent-c": ("token-c-0123456789abcdef", 15.0),
}
SECRET = "sk-held-by-the-agents-never-on-the-server"
WITHIN_S = 120.0  # liveness bound for each step on a busy machine, not a speed claim


@pytest.fixture
def sim_config() -> SimConfig:
    # Generation (10 tokens at 50/s: 200 ms) leads at every vantage by far, whatever a busy
    # machine adds to the measured round trips (4, 16 and 30 ms); the routes differ.
    paths = {name: one_way for name, (_token, one_way) in AGENTS.items()}
    return SimConfig(
        one_way_ms=1, queue_median_ms=2, queue_sigma=0, prefill_ms=1, tokens=10,
        tokens_per_s=50, paths=paths,
    )  # fmt: skip


def config_file(tmp_path: Path, sim: SimServer) -> Path:
    path = tmp_path / "phasewatch.yaml"
    tokens = "".join(f"  {name}: {{token: {token}}}\n" for name, (token, _) in AGENTS.items())
    path.write_text(
        f"vantages:\n{tokens}"
        # Silent after 5 intervals (10 s), not 3: a busy machine delays pushes by seconds.
        "vantage_silent_after: 5\n"
        "targets:\n"
        "  - name: chat\n"
        "    kind: openai\n"
        f"    url: {sim.url}/v1/chat/completions\n"
        '    body: {model: m, stream: true, messages: [{role: user, content: "{{nonce}} hi"}]}\n'
        '    headers: {X-Sim-Client: "${SIM_CLIENT}", Authorization: "Bearer ${PROBE_KEY}"}\n'
        "    interval: 2s\n"
        "    samples: 3\n"
        "    timeout: 10s\n"
        f"    vantages: [{', '.join(AGENTS)}]\n"
        "    alerts:\n"
        "      enabled: [dominant_shift]\n"
        "      min_reference_runs: 6\n"
        "      min_reference_days: 0\n"
        "      resamples: 100\n"
    )
    return path


def agent(tmp_path: Path, port: int, name: str) -> Process:
    token, _ = AGENTS[name]
    return start_agent(tmp_path, port, name, token, SIM_CLIENT=name, PROBE_KEY=SECRET)


def alerts(port: int, target: str) -> list[dict[str, Any]]:
    found = api(port, "/alerts", target=target, limit=100)
    return list(found["items"]) if found else []


def alert_where(port: int, target: str, **wanted: Any) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        for alert in alerts(port, target):
            if all(alert.get(key) == value for key, value in wanted.items()):
                return alert
        return None

    return check


def runs_at(port: int, vantage: str) -> int:
    found = api(port, "/runs", target="chat", vantage=vantage, limit=500)
    return len(found["items"]) if found else 0


def push(port: int, name: str, record: RunRecord, as_vantage: str | None = None) -> httpx.Response:
    token, _ = AGENTS[name]
    headers = {
        "Authorization": f"Bearer {token}",
        VANTAGE_HEADER: as_vantage or name,
        "Content-Encoding": "gzip",
    }
    body = gzip.compress(json.dumps(record.to_json()).encode())
    return httpx.post(f"http://127.0.0.1:{port}{RUNS_PATH}", content=body, headers=headers)


def a_run(target: str, vantage: str) -> RunRecord:
    at = datetime.now(UTC) - timedelta(minutes=5)
    return record_of(make_run(np.random.default_rng(3), at, target=target, vantage=vantage, n=3))


def copies(db_url: str, run_id: uuid.UUID) -> int:
    engine = make_engine(db_url)
    try:
        with engine.connect() as connection:
            query = select(func.count()).select_from(RunRow).where(RunRow.id == run_id)
            return int(connection.scalar(query) or 0)
    finally:
        engine.dispose()


def test_three_agents_localise_alerts_survive_a_server_outage_and_refuse_forged_pushes(
    tmp_path: Path, sim: SimServer, processes: list[Process], postgres_url: str
) -> None:
    config, port = config_file(tmp_path, sim), free_port()
    processes.append(start_serve(tmp_path, config, port, postgres_url))
    started = {name: agent(tmp_path, port, name) for name in AGENTS}
    processes.extend(started.values())
    eventually(lambda: listed_vantages(port, "chat") == set(AGENTS), WITHIN_S, "runs from all")
    # References: enough runs at every vantage before anything changes.
    eventually(lambda: all(runs_at(port, v) >= 10 for v in AGENTS), WITHIN_S, "references")
    assert alerts(port, "chat") == []

    # A longer route at agent-a: the network leads there, a path change at that vantage.
    sim.reconfigure(paths=sim.config.paths | {"agent-a": 250.0})
    path = eventually(
        alert_where(port, "chat", scope="path", vantage="agent-a", state="firing"),
        WITHIN_S,
        "a path alert at agent-a",
    )
    assert (path["kind"], path["to_phase"]) == ("dominant_shift", "network")
    sim.reconfigure(paths=sim.config.paths | {"agent-a": 2.0})
    eventually(alert_where(port, "chat", id=path["id"], state="resolved"), WITHIN_S, "resolved")

    # A slower server: the queue leads everywhere, one service alert. Pooled evidence fires at
    # the first run where it suffices, so the third vantage may not have run yet: the alert
    # names two or three of them (one alone would be a path alert at that vantage).
    sim.reconfigure(queue_median_ms=600.0)
    service = eventually(
        alert_where(port, "chat", scope="service", state="firing"), WITHIN_S, "a service alert"
    )
    assert (service["vantage"], service["to_phase"]) == (None, "queue")
    assert re.search(r"at [23]/3 vantages$", service["summary"]), service["summary"]
    assert [a["scope"] for a in alerts(port, "chat") if a["state"] == "firing"] == ["service"]

    # The server away for two intervals: the agents spool, and every run arrives once.
    processes[0].stop()
    eventually(lambda: all(spooled(tmp_path, v) >= 2 for v in AGENTS), WITHIN_S, "spooled")
    server = start_serve(tmp_path, config, port, postgres_url)
    processes.append(server)
    eventually(lambda: not any(spooled(tmp_path, v) for v in AGENTS), WITHIN_S, "flushed")

    # agent-c crashes: vantage_silent fires for it, and resolves when it is back. (A busy
    # machine may stall every agent for a while before: those alerts are known by id.)
    before = {a["id"] for a in alerts(port, "*")}
    started["agent-c"].kill()
    silent = eventually(
        alert_where(port, "*", kind="vantage_silent", vantage="agent-c", state="firing"),
        WITHIN_S,
        "agent-c silent",
    )
    assert "vantage silent: no run for" in silent["summary"]
    listed = {v["name"]: v for v in api(port, "/vantages")}
    assert listed["agent-c"]["alert"] == silent["id"]
    processes.append(agent(tmp_path, port, "agent-c"))
    eventually(alert_where(port, "*", id=silent["id"], state="resolved"), WITHIN_S, "heard again")
    since_kill = [a for a in alerts(port, "*") if a["id"] not in before]
    assert [(a["kind"], a["vantage"]) for a in since_kill if a["vantage"] == "agent-c"] == [
        ("vantage_silent", "agent-c")  # one alert for the vantage, whatever its targets
    ]

    # A forged vantage or target is refused; a replayed push stores nothing.
    assert push(port, "agent-a", a_run("chat", "agent-b")).status_code == 403
    assert push(port, "agent-a", a_run("nobody-has-it", "agent-a")).status_code == 403
    assert push(port, "agent-a", a_run("chat", "agent-b"), as_vantage="agent-b").status_code == 401
    record = a_run("chat", "agent-a")
    first, again = push(port, "agent-a", record), push(port, "agent-a", record)
    assert (first.json()["stored"], again.json()["stored"]) == (True, False)
    assert copies(postgres_url, record.id) == 1

    # The agents first: a run cut by a stop is pushed as aborted, which needs the server up.
    for process in processes[1:]:
        if process is not server:
            process.stop()
    server.stop()
    runs, request_ids = stored(postgres_url)
    probed_ids = [r for r in request_ids if r != "None"]  # the runs pushed above carry none
    assert max(Counter(probed_ids).values()) == 1  # no sample stored twice
    answered = {truth.request_id for truth in sim.app.truths()}
    probed = set(probed_ids)
    assert probed <= answered
    # Every answered request is stored but those of runs cut at a stop or a kill (at most
    # one sample in flight per run cut: the agents' at theirs).
    aborted = [run for run in runs if run[2] == "aborted"]
    assert len(answered - probed) <= len(aborted) + 3  # + agent-c's run in flight at its kill
    assert SECRET not in database_dump(postgres_url)
    assert SECRET not in processes[0].output()  # both of the server's runs log there
