"""The server's side of agents, over ASGI: who may fetch and push what (401, 403), what a
push may be (413, 415, 422), and that a replayed push stores nothing."""

from __future__ import annotations

import gzip
import json
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.agents.server.body import MAX_RUN_BYTES, MAX_WIRE_BYTES
from app.agents.server.book import PushLimit, VantageBook
from app.agents.server.evaluations import Evaluations
from app.agents.wire import (
    BATCH_PATH,
    CONFIG_PATH,
    RUNS_PATH,
    SENT_AT_HEADER,
    STATUS_PATH,
)
from app.clock import parse_timestamp
from app.config import load_targets
from app.store.records import RunRecord, RunStatus
from app.web.deps import agents_of, service_of
from tests.agents.support import FRA, GZIP, SECRET, SEOUL, TARGETS, agent, packed, run
from tests.runfactory import failed_run, record_of

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (agent("fra-1", None), 401),
        (agent("fra-1", "wrong-token-0123456789"), 401),
        (agent("fra-1", SEOUL), 401),  # another vantage's token
        (agent("nowhere", FRA), 401),
        (agent("", FRA), 401),
        (agent("server-1", FRA), 401),  # the server's own vantage has no token
        (agent("fra-1", FRA), 200),
    ],
    ids=["none", "wrong", "other-vantage", "unknown", "blank", "server", "right"],
)
async def test_who_may_fetch_an_assignment(
    client: httpx.AsyncClient, headers: dict[str, str], expected: int
) -> None:
    answer = await client.get(f"/api/v1{CONFIG_PATH.removeprefix('/api/v1')}", headers=headers)
    assert answer.status_code == expected, answer.text
    if expected == 401:
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        assert "targets" not in answer.json()


async def test_an_assignment_is_the_targets_listing_the_vantage_with_templates(
    client: httpx.AsyncClient,
) -> None:
    fra = (await client.get(CONFIG_PATH, headers=agent("fra-1", FRA))).json()
    seoul = (await client.get(CONFIG_PATH, headers=agent("seoul-1", SEOUL))).json()
    assert [t["name"] for t in fra["targets"]] == ["translate"]
    assert [t["name"] for t in seoul["targets"]] == ["translate", "seoul-only"]
    assert fra["targets"][0]["headers"] == {"Authorization": "Bearer ${OPENAI_API_KEY}"}
    assert "alerts" not in fra["targets"][0] and "notifiers" not in fra["targets"][0]
    assert fra["version"] != seoul["version"]
    for answer in (fra, seoul):
        assert SECRET not in json.dumps(answer) and FRA not in json.dumps(answer)


@pytest.mark.parametrize(
    ("headers", "body", "expected"),
    [
        (agent("fra-1", None), packed(run()), 401),
        (agent("fra-1", SEOUL), packed(run()), 401),
        (agent("fra-1", FRA), packed(run(vantage="seoul-1")), 403),  # a forged vantage
        (agent("fra-1", FRA), packed(run(target="seoul-only")), 403),  # not assigned here
        (agent("fra-1", FRA), packed(run(target="local")), 403),  # the server's alone
        (agent("fra-1", FRA), packed(run(target="nobody-has-it")), 403),
        (agent("fra-1", FRA), gzip.compress(b"{not json"), 422),
        (agent("fra-1", FRA), gzip.compress(b"[1, 2]"), 422),
        (agent("fra-1", FRA), gzip.compress(b'{"id": "x"}'), 422),
        (agent("fra-1", FRA), b"not gzip at all", 422),
        (agent("fra-1", FRA), packed(run())[:-9], 422),  # cut short
        (agent("fra-1", FRA), gzip.compress(b"[" * 100_000 + b"]" * 100_000), 422),
        (agent("fra-1", FRA), gzip.compress(b" " * (MAX_RUN_BYTES + 1)), 413),  # a bomb
        (agent("fra-1", FRA), b"\0" * (MAX_WIRE_BYTES + 1), 413),
        (agent("fra-1", FRA) | {"Content-Encoding": "br"}, packed(run()), 415),
        (agent("fra-1", FRA), packed(run()), 200),
    ],
    ids=[
        "no-token",
        "other-token",
        "forged-vantage",
        "other-vantages-target",
        "server-target",
        "unknown-target",
        "not-json",
        "not-an-object",
        "not-a-run",
        "not-gzip",
        "truncated",
        "nested-too-deep",
        "bomb",
        "too-large",
        "unknown-encoding",
        "right",
    ],
)
async def test_what_a_push_may_be(
    client: httpx.AsyncClient, headers: dict[str, str], body: bytes, expected: int
) -> None:
    answer = await client.post(RUNS_PATH, content=body, headers=GZIP | headers)
    assert answer.status_code == expected, answer.text
    listed = (await client.get("/api/v1/runs")).json()["items"]
    assert len(listed) == (1 if expected == 200 else 0)


async def test_a_replayed_push_stores_nothing_and_the_run_is_listed_with_its_vantage(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    record = run(n=4)
    first = await client.post(RUNS_PATH, content=packed(record), headers=GZIP | agent("fra-1", FRA))
    again = await client.post(RUNS_PATH, content=packed(record), headers=GZIP | agent("fra-1", FRA))
    assert (first.status_code, again.status_code) == (200, 200)
    assert first.json()["stored"] is True and again.json()["stored"] is False
    assert first.json()["config"] == again.headers["X-Phasewatch-Config"]
    listed = (await client.get("/api/v1/runs", params={"target": "translate"})).json()["items"]
    assert [(r["id"], r["vantage"], r["n_samples"]) for r in listed] == [
        (str(record.id), "fra-1", 4)
    ]
    assert agents_of(app).book.get("fra-1").runs == 2


async def test_an_uncompressed_push_is_taken_too(client: httpx.AsyncClient) -> None:
    body = json.dumps(run(vantage="seoul-1").to_json()).encode()
    answer = await client.post(RUNS_PATH, content=body, headers=agent("seoul-1", SEOUL))
    assert answer.status_code == 200 and answer.json()["stored"] is True


async def test_each_push_measures_the_agents_clock_skew(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    ahead = datetime.now(UTC) + timedelta(hours=1)  # an agent whose clock runs an hour fast
    headers = GZIP | agent("fra-1", FRA) | {SENT_AT_HEADER: ahead.isoformat()}
    assert (await client.post(RUNS_PATH, content=packed(run()), headers=headers)).is_success
    skew = agents_of(app).book.get("fra-1").skew_s
    assert skew is not None and -3600 <= skew < -3000


async def test_an_agent_reports_the_targets_it_refused(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    report: dict[str, Any] = {
        "refused": {"translate": "environment variable OPENAI_API_KEY is not set"},
        "pending": 3,
    }
    answer = await client.post(STATUS_PATH, json=report, headers=agent("fra-1", FRA))
    assert answer.status_code == 204
    state = agents_of(app).book.get("fra-1")
    assert state.refused == report["refused"] and state.pending == 3
    refused = await client.post(STATUS_PATH, json=report, headers=agent("fra-1", SEOUL))
    assert refused.status_code == 401


@pytest.mark.parametrize(
    "report",
    [{"pending": False}, {"pending": "3"}, {"pending": -1}, {"refused": {"a": 1}}],
    ids=["a-bool", "a-string", "negative", "reason-not-text"],
)
async def test_a_status_report_is_read_strictly(
    client: httpx.AsyncClient, app: FastAPI, report: dict[str, Any]
) -> None:
    answer = await client.post(STATUS_PATH, json=report, headers=agent("fra-1", FRA))
    assert answer.status_code == 422, answer.text
    assert agents_of(app).book.get("fra-1").pending is None


async def test_the_push_routes_declare_the_body_they_read(app: FastAPI) -> None:
    paths = app.openapi()["paths"]
    for path, required in ((RUNS_PATH, "id"), (BATCH_PATH, "runs")):
        body = paths[path]["post"]["requestBody"]
        assert body["required"] is True
        assert required in body["content"]["application/json"]["schema"]["required"]


async def test_the_server_probes_what_has_no_list_and_what_lists_its_own_vantage(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = service_of(app)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    here = service._scheduled(service.targets)
    assert [t.name for t in here] == ["translate", "local"]
    assert here[0].headers == {"Authorization": f"Bearer {SECRET}"}  # expanded at the prober
    monkeypatch.delenv("OPENAI_API_KEY")
    assert [t.name for t in service._scheduled(service.targets)] == ["local"]  # refused


def test_a_target_at_vantages_keeps_its_templates_and_needs_no_variable(tmp_path: Path) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(TARGETS)
    loaded = load_targets(path, {"PW_AGENT_FRA": FRA})  # the server lacks OPENAI_API_KEY
    assert loaded.targets[0].headers == {"Authorization": "Bearer ${OPENAI_API_KEY}"}
    assert loaded.vantages["fra-1"].token.get_secret_value() == FRA
    assert FRA not in repr(loaded)


async def test_the_vantages_list_and_metrics_show_what_each_agent_reported(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    report = {"refused": {"translate": "environment variable X is not set"}, "pending": 2}
    assert (await client.post(STATUS_PATH, json=report, headers=agent("seoul-1", SEOUL))).is_success
    pushed = await client.post(RUNS_PATH, content=packed(run()), headers=GZIP | agent("fra-1", FRA))
    assert pushed.is_success
    own = run("local", "server-1")
    assert service_of(app).sink.store(own)  # a run of the server's own
    listed = {v["name"]: v for v in (await client.get("/api/v1/vantages")).json()}
    # Each vantage's latest run, the server's own too (stored, not pushed).
    assert parse_timestamp(listed["server-1"]["last_run"]) == own.started_at
    assert listed["fra-1"]["last_run"] is not None and listed["seoul-1"]["last_run"] is None
    assert list(listed) == ["server-1", "fra-1", "seoul-1"]
    assert listed["server-1"]["server"] and listed["server-1"]["targets"] == ["translate", "local"]
    assert listed["fra-1"]["runs_pushed"] == 1 and listed["fra-1"]["last_pushed"] is not None
    assert listed["seoul-1"]["targets"] == ["translate", "seoul-only"]
    assert (listed["seoul-1"]["refused"], listed["seoul-1"]["pending"]) == (report["refused"], 2)
    assert not listed["fra-1"]["silent"] and not listed["seoul-1"]["silent"]  # just started
    assert agents_of(app).evaluations.wait_idle(30)  # pushed runs are counted after their turn
    metrics = (await client.get("/metrics")).text
    assert 'phasewatch_agent_runs_pushed_total{vantage="fra-1"} 1.0' in metrics
    assert 'phasewatch_agent_refused_targets{vantage="seoul-1"} 1.0' in metrics
    assert 'phasewatch_agent_silent{vantage="fra-1"} 0.0' in metrics
    # The pushed run is counted per (target, vantage) like a local one.
    assert 'phasewatch_runs_stored_total{target="translate",vantage="fra-1"} 1.0' in metrics


async def test_pushed_runs_are_evaluated_like_local_ones(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    start = datetime.now(UTC) - timedelta(minutes=10)
    for k in range(4):  # every sample failing: probe_failing at fra-1
        made = failed_run(start + timedelta(minutes=k), target="translate", vantage="fra-1")
        body = packed(record_of(made))
        assert (
            await client.post(RUNS_PATH, content=body, headers=GZIP | agent("fra-1", FRA))
        ).is_success
    assert agents_of(app).evaluations.wait_idle(30)
    alerts = (await client.get("/api/v1/alerts", params={"target": "translate"})).json()["items"]
    assert [(a["kind"], a["vantage"]) for a in alerts] == [("probe_failing", "fra-1")]


def test_evaluation_keeps_up_run_by_run_and_coalesces_a_backlog() -> None:
    release, evaluated, counted = threading.Event(), [], []

    def after_store(record: RunRecord) -> None:
        release.wait(10)
        evaluated.append(record.id)

    evaluations = Evaluations(after_store, lambda record: counted.append(record.id))
    first, second, third = (run() for _ in range(3))
    other = run(vantage="seoul-1")
    evaluations.submit(first)  # taken at once; evaluation holds until released
    while evaluations.pending():
        time.sleep(0.01)
    for record in (second, other, third):  # second and third: one (target, vantage)
        evaluations.submit(record)
    release.set()
    assert evaluations.wait_idle(10)
    assert evaluated == [first.id, third.id, other.id] and evaluations.coalesced == 1
    assert counted == [second.id]  # counted on /metrics all the same, once


def test_a_pushed_run_not_complete_is_counted_and_never_evaluated() -> None:
    evaluated, counted = [], []
    evaluations = Evaluations(
        lambda record: evaluated.append(record.id), lambda record: counted.append(record.id)
    )
    complete, aborted = run(), replace(run(), status=RunStatus.ABORTED)
    for record in (complete, aborted):
        evaluations.submit(record)
    assert evaluations.wait_idle(10)
    assert evaluated == [complete.id] and counted == [aborted.id]


async def test_a_vantage_pushing_over_its_limit_is_told_to_come_back(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    agents_of(app).book.limit = PushLimit(per_s=0.001, burst=2)
    headers = GZIP | agent("fra-1", FRA)
    codes = [(await client.post(RUNS_PATH, content=packed(run()), headers=headers)).status_code]
    codes += [(await client.post(RUNS_PATH, content=packed(run()), headers=headers)).status_code]
    over = await client.post(RUNS_PATH, content=packed(run()), headers=headers)
    assert codes == [200, 200] and over.status_code == 429 and over.headers["Retry-After"] == "1"
    other = await client.post(
        RUNS_PATH, content=packed(run(vantage="seoul-1")), headers=GZIP | agent("seoul-1", SEOUL)
    )
    assert other.status_code == 200  # each vantage has a bucket of its own
    assert len((await client.get("/api/v1/runs")).json()["items"]) == 3


@pytest.mark.parametrize(
    ("pushes_at", "admitted"),
    [
        ([0.0, 0.0, 0.0], [True, True, False]),
        ([0.0, 0.0, 0.0, 1.0], [True, True, False, True]),  # one more a second
        ([0.0, 0.0, 10.0, 10.0, 10.0], [True, True, True, True, False]),  # never over burst
    ],
)
def test_the_push_limit_is_a_bucket_per_vantage(
    pushes_at: list[float], admitted: list[bool]
) -> None:
    book = VantageBook(limit=PushLimit(per_s=1.0, burst=2))
    assert [book.admit("fra-1", at) for at in pushes_at] == admitted


async def test_the_vantages_page_shows_each_agent_and_what_it_refused(
    client: httpx.AsyncClient,
) -> None:
    report = {"refused": {"seoul-only": "environment variable X is not set"}, "pending": 5}
    assert (await client.post(STATUS_PATH, json=report, headers=agent("seoul-1", SEOUL))).is_success
    ahead = {SENT_AT_HEADER: (datetime.now(UTC) + timedelta(hours=1)).isoformat()}
    headers = GZIP | agent("fra-1", FRA) | ahead
    assert (await client.post(RUNS_PATH, content=packed(run()), headers=headers)).is_success
    page = await client.get("/vantages")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    rows = {
        name: page.text.split(f'data-vantage="{name}"', 1)[1].split("</tr>", 1)[0]
        for name in ("server-1", "fra-1", "seoul-1")
    }
    assert "this server" in rows["server-1"]
    assert "reporting" in rows["fra-1"] and "-3" in rows["fra-1"]  # an hour ahead: −3600 s
    assert "no run pushed yet" in rows["seoul-1"] and ">5<" in rows["seoul-1"]
    assert "seoul-only: environment variable X is not set" in rows["seoul-1"]
    assert FRA not in page.text and SEOUL not in page.text and SECRET not in page.text


async def test_the_overview_shows_an_agents_runs_in_its_own_row(
    client: httpx.AsyncClient,
) -> None:
    pushed = await client.post(RUNS_PATH, content=packed(run()), headers=GZIP | agent("fra-1", FRA))
    assert pushed.is_success
    overview = (await client.get("/")).text
    assert '<tr data-target="translate" data-vantage="fra-1">' in overview
