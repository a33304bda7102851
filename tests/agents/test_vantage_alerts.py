"""Runs agents push feed the cross-vantage evaluation like local ones: a leader change at
one agent's path is a `path` alert there; one at the service, seen by the server and two
agents, is one `service` alert "at 3/3 vantages". Pushed over ASGI, evaluated with the
alert engine's clock at each run's time."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi import FastAPI

from app.agents.wire import RUNS_PATH, VANTAGE_HEADER
from app.config import Settings, load_targets
from app.main import create_app
from app.store.records import RunRecord
from app.web.deps import agents_of, service_of
from tests.runfactory import LLM, make_run, record_of

pytestmark = pytest.mark.anyio
TOKENS = {"fra-1": "fra-token-0123456789abcdef", "seoul-1": "seoul-token-0123456789abcdef"}
EVERY = timedelta(minutes=15)
START = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=12)
CHANGE = START + timedelta(hours=8)
SLOW_DECODE = LLM | {"generation": 240.0}  # the service: generation now leads everywhere
ROUTE = LLM | {"network": 300.0}  # one vantage's route: the network leads there
FAR = LLM | {"network": 60.0}
TARGETS = f"""
vantage: server-1
vantages:
  fra-1: {{token: {TOKENS["fra-1"]}}}
  seoul-1: {{token: {TOKENS["seoul-1"]}}}
targets:
  - name: chat
    url: http://chat.invalid/
    interval: 15m
    vantages: [fra-1, seoul-1, server-1]
    alerts:
      enabled: [dominant_shift]
      min_reference_days: 0.25
      min_reference_runs: 12
      resamples: 200
"""
Mix = Mapping[str, float]


@pytest.fixture
async def app(db_url: str, tmp_path: Path) -> AsyncIterator[FastAPI]:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(TARGETS)
    settings = Settings(config=path, database_url=db_url, spool_dir=tmp_path / "spool")
    built = create_app(settings, load_targets(path, {}))
    yield built
    assert agents_of(built).evaluations.wait_idle(30)
    service_of(built).engine.dispose()


def timeline(seed: int, mixes: Mapping[str, Callable[[datetime], Mix]]) -> list[RunRecord]:
    rng = np.random.default_rng(seed)
    runs = []
    for offset, (vantage, mix) in enumerate(mixes.items()):
        at = START + timedelta(minutes=4 * offset)
        while at < CHANGE + timedelta(hours=3):
            runs.append(record_of(make_run(rng, at, mix(at), target="chat", vantage=vantage)))
            at += EVERY
    return sorted(runs, key=lambda run: run.started_at)


def switch(before: Mix, after: Mix) -> Callable[[datetime], Mix]:
    return lambda when: after if when >= CHANGE else before


def fixed(mix: Mix) -> Callable[[datetime], Mix]:
    return lambda _when: mix


async def replay(app: FastAPI, runs: list[RunRecord]) -> list[dict[str, object]]:
    """Each run in time order: pushed by its agent (the server's own stored locally), then
    evaluated with the engine's clock at the run's time."""
    service, evaluations = service_of(app), agents_of(app).evaluations
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        for run in runs:
            service.alerts.clock = lambda at=run.started_at: at + timedelta(seconds=5)
            if run.vantage in TOKENS:
                headers = {
                    "Authorization": f"Bearer {TOKENS[run.vantage]}",
                    VANTAGE_HEADER: run.vantage,
                    "Content-Encoding": "gzip",
                }
                body = gzip.compress(json.dumps(run.to_json()).encode())
                answer = await client.post(RUNS_PATH, content=body, headers=headers)
                assert answer.status_code == 200, answer.text
            else:
                assert service.sink.store(run)
                evaluations.submit(run)
            assert evaluations.wait_idle(30)
        alerts = (await client.get("/api/v1/alerts", params={"target": "chat"})).json()
    return list(alerts["items"])


async def test_a_change_at_the_service_is_one_service_alert_at_3_of_3_vantages(
    app: FastAPI,
) -> None:
    mixes = {
        "server-1": switch(LLM, SLOW_DECODE),
        "fra-1": switch(FAR, SLOW_DECODE),
        "seoul-1": switch(FAR, SLOW_DECODE),
    }
    alerts = await replay(app, timeline(1, mixes))
    assert [(a["kind"], a["scope"], a["vantage"], a["state"]) for a in alerts] == [
        ("dominant_shift", "service", None, "firing")
    ]
    assert "at 3/3 vantages" in str(alerts[0]["summary"])


async def test_a_change_on_one_agents_path_is_a_path_alert_there(app: FastAPI) -> None:
    mixes = {"server-1": fixed(LLM), "fra-1": switch(FAR, ROUTE), "seoul-1": fixed(FAR)}
    alerts = await replay(app, timeline(2, mixes))
    assert [(a["kind"], a["scope"], a["vantage"]) for a in alerts] == [
        ("dominant_shift", "path", "fra-1")
    ]
