"""`phasewatch agent`'s runner in-process against a real server (uvicorn on loopback): it
probes its assignment with header templates filled from its own environment, refuses and
reports a target it lacks a variable for, follows an assignment change the server names,
sets aside a run the server refuses for good, and pushes a run its crash cut as aborted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import pytest

from app.agents.remote.client import ServerClient
from app.agents.remote.runner import Agent
from app.agents.wire import MAX_BATCH_RUNS
from app.config import Settings, load_targets
from app.main import create_app
from app.runs.sink import Stored
from app.runs.spool import Spool
from app.store.records import RunRecord, RunStatus
from app.web.deps import agents_of, service_of
from tests.apiapp import Api, serving
from tests.clirun import run_cli
from tests.cliserver import Recorder
from tests.cliserver import serving as endpoint_serving
from tests.helpers import parsed, value
from tests.runfactory import make_run, record_of

TOKEN = "fra-token-0123456789abcdef"


def targets_text(url: str, *extra: str) -> str:
    entries = [
        f"  - name: {name}\n    url: {url}\n    interval: 1s\n    samples: 1\n"
        f'    headers: {{X-Key: "${{{var}}}"}}\n    vantages: [fra-1]\n'
        for name, var in (
            ("keyed", "AGENT_KEY"),
            ("lacking", "NOT_HERE"),
            *(e.split("=") for e in extra),
        )
    ]
    return f"vantages:\n  fra-1: {{token: {TOKEN}}}\ntargets:\n" + "".join(entries)


@pytest.fixture
def endpoint() -> Iterator[tuple[Recorder, str]]:
    with endpoint_serving() as (recorder, url):
        yield recorder, url


@pytest.fixture
def server(db_url: str, tmp_path: Path, endpoint: tuple[Recorder, str]) -> Iterator[Api]:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(targets_text(endpoint[1]))
    settings = Settings(config=path, database_url=db_url, spool_dir=tmp_path / "spool")
    app = create_app(settings, load_targets(path, {}))
    try:
        with serving(app) as base, httpx.Client(base_url=base, timeout=30) as client:
            yield Api(app, client)
            assert agents_of(app).evaluations.wait_idle(30)
    finally:
        service_of(app).engine.dispose()


def vantages_of(server: Api) -> list[tuple[str, str]]:
    items = server.client.get("/api/v1/runs", params={"limit": 500}).json()["items"]
    return sorted({(run["target"], run["vantage"]) for run in items})


async def run_agent(agent: Agent, *steps: tuple[Callable[[], bool], Callable[[], None]]) -> None:
    """Run ``agent`` until each step's condition holds in turn (then that step's action)."""
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    loop = asyncio.get_running_loop()
    try:
        for until, then in steps:
            deadline = loop.time() + 20
            while not until() and loop.time() < deadline:
                await asyncio.sleep(0.1)
            assert until(), "not within 20 s"
            then()
    finally:
        stop.set()
        await task


def nothing() -> None:
    pass


def make_agent(server: Api, tmp_path: Path) -> Agent:
    client = ServerClient(str(server.client.base_url), TOKEN, "fra-1")
    return Agent(client, "fra-1", tmp_path / "agent-spool", {"AGENT_KEY": "agent-value"}, 0.5)


@pytest.mark.anyio
async def test_the_agent_fills_templates_from_its_environment_and_reports_refusals(
    server: Api, tmp_path: Path, endpoint: tuple[Recorder, str]
) -> None:
    recorder, _ = endpoint
    agent = make_agent(server, tmp_path)
    await run_agent(agent, (lambda: vantages_of(server) == [("keyed", "fra-1")], nothing))
    assert {r.headers["x-key"] for r in recorder.received} == {"agent-value"}
    refused = agents_of(server.app).book.get("fra-1").refused
    why = "environment variable NOT_HERE is not set here: set it for this process and restart it"
    assert refused == {"lacking": why}


@pytest.mark.anyio
async def test_the_agent_follows_an_assignment_change_the_server_names(
    server: Api, tmp_path: Path, endpoint: tuple[Recorder, str]
) -> None:
    agent = make_agent(server, tmp_path)
    agent.refresh_s = 3600.0  # only a push's answer can tell it
    path = tmp_path / "phasewatch.yaml"

    def change() -> None:
        path.write_text(targets_text(endpoint[1], "added=AGENT_KEY"))
        server.service.targets = load_targets(path, {})  # as a reload does

    first = agent.assignment
    await run_agent(
        agent,
        (lambda: vantages_of(server) == [("keyed", "fra-1")], change),
        (lambda: ("added", "fra-1") in vantages_of(server), nothing),
    )
    assert first is None and agent.assignment is not None
    assert [t["name"] for t in agent.assignment.targets] == ["keyed", "lacking", "added"]


def test_a_run_the_server_refuses_for_good_is_set_aside(server: Api, tmp_path: Path) -> None:
    agent = make_agent(server, tmp_path)
    forged = record_of(
        make_run(
            np.random.default_rng(1), datetime.now(UTC), target="not-assigned", vantage="fra-1"
        )
    )
    agent.spool.append(forged)
    assert agent.writer.flush() == 1  # it left the spool ...
    rejected = (tmp_path / "agent-spool" / "rejected.jsonl").read_text()
    assert str(forged.id) in rejected  # ... and waits in rejected.jsonl, kept
    assert vantages_of(server) == []
    agent.client.close()


@pytest.mark.anyio
async def test_a_run_cut_by_a_crash_is_pushed_as_aborted_when_the_agent_starts(
    server: Api, tmp_path: Path
) -> None:
    made = record_of(
        make_run(np.random.default_rng(2), datetime.now(UTC), target="keyed", vantage="fra-1", n=2)
    )
    cut = RunRecord(
        made.id, made.target, made.vantage, made.started_at, RunStatus.ABORTED, made.samples[:1]
    )
    crashed = Spool(tmp_path / "agent-spool")  # the journal of an agent that died mid-run
    assert crashed.begin(cut)
    crashed.close()

    def arrived() -> bool:
        runs = server.client.get("/api/v1/runs", params={"limit": 500}).json()["items"]
        return any(r["id"] == str(cut.id) and r["status"] == "aborted" for r in runs)

    await run_agent(make_agent(server, tmp_path), (arrived, nothing))


def keyed_runs(count: int, seed: int = 3) -> list[RunRecord]:
    rng = np.random.default_rng(seed)
    return [
        record_of(make_run(rng, datetime.now(UTC), target="keyed", vantage="fra-1", n=2))
        for _ in range(count)
    ]


class Batches:
    """The batches an agent's client pushes, counted on the way (the pushes are real)."""

    def __init__(self, client: ServerClient) -> None:
        self.sizes: list[int] = []
        self._push = client.push_batch
        client.push_batch = self  # type: ignore[method-assign]

    def __call__(self, records: Sequence[RunRecord]) -> list[Stored]:
        self.sizes.append(len(records))
        return self._push(records)


def listed_ids(server: Api) -> set[str]:
    items = server.client.get("/api/v1/runs", params={"limit": 500}).json()["items"]
    return {run["id"] for run in items}


def test_a_spool_is_flushed_in_batches_and_a_refused_run_is_set_aside(
    server: Api, tmp_path: Path
) -> None:
    agent = make_agent(server, tmp_path)
    batches = Batches(agent.client)
    runs = keyed_runs(60)
    forged = record_of(
        make_run(
            np.random.default_rng(1), datetime.now(UTC), target="not-assigned", vantage="fra-1"
        )
    )
    for record in [*runs[:30], forged, *runs[30:]]:
        agent.spool.append(record)
    assert agent.writer.flush() == 61
    assert batches.sizes == [MAX_BATCH_RUNS, 11]
    assert listed_ids(server) == {str(r.id) for r in runs}
    rejected = (tmp_path / "agent-spool" / "rejected.jsonl").read_text()
    assert str(forged.id) in rejected and not agent.spool.has_pending()
    agent.spool.append(runs[0])  # pushed again: acknowledged as a duplicate, gone
    assert agent.writer.flush() == 1 and not agent.spool.has_pending()
    agent.client.close()


def test_an_agent_pushes_one_by_one_to_a_server_without_batches(
    server: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This server answers 404 there, as one from before batches answers at BATCH_PATH.
    monkeypatch.setattr("app.agents.remote.client.BATCH_PATH", "/api/v1/agent/not-here")
    agent = make_agent(server, tmp_path)
    runs = keyed_runs(3)
    for record in runs:
        agent.spool.append(record)
    assert agent.writer.flush() == 3
    assert agent.sink.batching is False  # and stays so: no batch is tried again
    assert listed_ids(server) == {str(r.id) for r in runs}
    agent.client.close()


@pytest.mark.anyio
async def test_runs_that_finish_together_are_pushed_in_one_batch_even_at_a_stop(
    server: Api, tmp_path: Path
) -> None:
    agent = make_agent(server, tmp_path)
    batches = Batches(agent.client)
    runs = keyed_runs(4)
    for record in runs:  # queued before the writer takes the first, a stop behind them
        await agent.writer.submit(record)
    agent.writer.start()
    assert agent.writer.close(30) == 0  # none left in the spool for the next start
    assert listed_ids(server) == {str(r.id) for r in runs}
    assert batches.sizes == [4] and not agent.spool.has_pending()
    agent.spool.close()
    agent.client.close()


@pytest.mark.parametrize(
    ("vantage", "token"), [("fra-1", "wrong-token-0123456789abcdef"), ("nope", TOKEN)]
)
def test_an_agent_the_server_refuses_at_start_says_why_in_one_line_and_exits_1(
    server: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str], vantage: str, token: str
) -> None:
    spool = tmp_path / "agent-spool"
    argv = ["agent", "--server", str(server.client.base_url), "--vantage", vantage]
    code, out, err = run_cli([*argv, "--token", token, "--spool-dir", str(spool)], capsys)
    assert (code, out) == (1, "")
    last = err.splitlines()[-1]
    assert last.startswith(f"phasewatch: error: {server.client.base_url} refuses this token")
    assert f"for vantage {vantage!r} (401: " in last
    assert vantages_of(server) == []  # nothing probed, nothing pushed


@pytest.mark.anyio
async def test_the_due_runs_an_agent_skipped_show_on_the_servers_metrics(
    server: Api, tmp_path: Path
) -> None:
    """The agent's loop held for 2.5 intervals (a machine with no CPU for it): its scheduler
    drops the slots it woke too late for, counts them, and its next status report carries
    them to the server's ``phasewatch_runs_skipped_total`` at the agent's vantage."""
    agent = make_agent(server, tmp_path)
    book = agents_of(server.app).book

    def skipped() -> int:
        return book.get("fra-1").skipped.get("keyed", {}).get("woke_late", 0)

    await run_agent(
        agent,
        (lambda: vantages_of(server) == [("keyed", "fra-1")], lambda: time.sleep(2.5)),
        (lambda: skipped() >= 1, nothing),
    )
    assert agent.watch.skips.total["keyed", "woke_late"] >= skipped()
    found = parsed(server.client.get("/metrics").text)
    said = value(found, "phasewatch_runs_skipped_total", target="keyed", vantage="fra-1",
                 reason="woke_late")  # fmt: skip
    assert said == skipped()
