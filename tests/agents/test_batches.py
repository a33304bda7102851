"""Batched pushes, the server's side over ASGI: each run of a batch answered on its own
(stored, duplicate, refused with its reason), a bad run never refusing its batch mates, a
replayed batch storing nothing, and what a batch may be (401, 413, 415, 422)."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.agents.wire import BATCH_PATH, MAX_BATCH_RUNS
from app.store.records import RunStatus
from app.web.deps import agents_of
from tests.agents.support import FRA, GZIP, SEOUL, agent, run

pytestmark = pytest.mark.anyio


DEEP = 100_000  # '[' nested this deep: a few hundred bytes gzipped


def batch(*items: Any) -> bytes:
    return gzip.compress(json.dumps({"runs": list(items)}).encode())


async def listed(client: httpx.AsyncClient) -> list[str]:
    items = (await client.get("/api/v1/runs", params={"limit": 500})).json()["items"]
    return sorted(r["id"] for r in items)


def naive(record: dict[str, Any]) -> dict[str, Any]:
    """A run whose first sample has a time without its zone: the database refuses it."""
    samples = [dict(s) for s in record["samples"]]
    samples[0]["started_at"] = samples[0]["started_at"].removesuffix("+00:00")
    return record | {"samples": samples}


async def test_each_run_of_a_batch_gets_its_own_outcome_and_a_bad_one_refuses_only_itself(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    first, second, third = run(n=2), run(n=3), run(n=1)
    sent = [
        first.to_json(),
        run(vantage="seoul-1").to_json(),  # a forged vantage
        run(target="seoul-only").to_json(),  # not assigned here
        {"id": "not-a-run"},
        first.to_json(),  # twice in one batch: the second is a duplicate
        naive(third.to_json()),  # stored by nobody: the database refuses it
        second.to_json(),
    ]
    answer = await client.post(BATCH_PATH, content=batch(*sent), headers=GZIP | agent("fra-1", FRA))
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [(r["id"], r["outcome"]) for r in results] == [
        (str(first.id), "stored"),
        (sent[1]["id"], "refused"),
        (sent[2]["id"], "refused"),
        ("not-a-run", "refused"),
        (str(first.id), "duplicate"),
        (str(third.id), "refused"),
        (str(second.id), "stored"),
    ]
    reasons = [r["reason"] for r in results]
    assert reasons[1] == "this token writes only its own vantage"
    assert reasons[2] == "that target is not assigned here"
    assert reasons[3].startswith("the body is not a run")
    assert reasons[5].startswith("the database refused it")
    assert reasons[0] is None and reasons[4] is None and reasons[6] is None
    assert await listed(client) == sorted([str(first.id), str(second.id)])
    assert answer.json()["config"] == answer.headers["X-Phasewatch-Config"]
    assert agents_of(app).book.get("fra-1").runs == 3  # stored and duplicate, not refused


async def test_every_pushed_run_is_counted_once_on_metrics_whether_or_not_it_coalesced(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    # One (target, vantage): runs pushed together wait for one evaluation turn, and the
    # turn evaluates only the newest complete one; an aborted run is never evaluated.
    runs = [run(n=2) for _ in range(5)] + [replace(run(n=1), status=RunStatus.ABORTED)]
    body = batch(*(r.to_json() for r in runs))
    for _ in range(2):  # the second push is a replay: nothing stored, nothing counted
        answer = await client.post(BATCH_PATH, content=body, headers=GZIP | agent("fra-1", FRA))
        assert answer.status_code == 200, answer.text
    assert agents_of(app).evaluations.wait_idle(30)
    metrics = (await client.get("/metrics")).text
    assert 'phasewatch_runs_stored_total{target="translate",vantage="fra-1"} 6.0' in metrics


async def test_a_replayed_batch_stores_nothing(client: httpx.AsyncClient) -> None:
    body = batch(*(run(n=2).to_json() for _ in range(3)))
    first = await client.post(BATCH_PATH, content=body, headers=GZIP | agent("fra-1", FRA))
    again = await client.post(BATCH_PATH, content=body, headers=GZIP | agent("fra-1", FRA))
    assert [r["outcome"] for r in first.json()["results"]] == ["stored"] * 3
    assert [r["outcome"] for r in again.json()["results"]] == ["duplicate"] * 3
    assert len(await listed(client)) == 3


async def test_an_uncompressed_batch_is_taken_too(client: httpx.AsyncClient) -> None:
    body = json.dumps({"runs": [run(vantage="seoul-1").to_json()]}).encode()
    answer = await client.post(BATCH_PATH, content=body, headers=agent("seoul-1", SEOUL))
    assert [r["outcome"] for r in answer.json()["results"]] == ["stored"]


@pytest.mark.parametrize(
    ("headers", "body", "expected"),
    [
        (agent("fra-1", None), batch(run().to_json()), 401),
        (agent("fra-1", SEOUL), batch(run().to_json()), 401),
        (agent("fra-1", FRA), gzip.compress(json.dumps(run().to_json()).encode()), 422),
        (agent("fra-1", FRA), gzip.compress(b'{"runs": {}}'), 422),
        (agent("fra-1", FRA), gzip.compress(b"[]"), 422),
        (agent("fra-1", FRA), gzip.compress(b"{not json"), 422),
        (agent("fra-1", FRA), b"not gzip", 422),
        (agent("fra-1", FRA), batch(*([{"id": "x"}] * (MAX_BATCH_RUNS + 1))), 413),
        (agent("fra-1", FRA) | {"Content-Encoding": "br"}, batch(run().to_json()), 415),
        (agent("fra-1", FRA), batch(), 200),
        (agent("fra-1", FRA), gzip.compress(b'{"runs": ' + b"[" * DEEP + b"]" * DEEP + b"}"), 422),
    ],
    ids=[
        "no-token",
        "other-token",
        "a-single-run",
        "runs-not-a-list",
        "not-an-object",
        "not-json",
        "not-gzip",
        "too-many-runs",
        "unknown-encoding",
        "empty",
        "nested-too-deep",
    ],
)
async def test_what_a_batch_may_be(
    client: httpx.AsyncClient, headers: dict[str, str], body: bytes, expected: int
) -> None:
    answer = await client.post(BATCH_PATH, content=body, headers=GZIP | headers)
    assert answer.status_code == expected, answer.text
    assert await listed(client) == []


async def test_a_batch_over_the_limit_is_refused_in_runs_not_bytes(
    client: httpx.AsyncClient,
) -> None:
    body = batch(*([run().to_json()] * (MAX_BATCH_RUNS + 1)))
    answer = await client.post(BATCH_PATH, content=body, headers=GZIP | agent("fra-1", FRA))
    assert answer.status_code == 413
    expected = f"at most {MAX_BATCH_RUNS} runs in a batch, not {MAX_BATCH_RUNS + 1}"
    assert expected in answer.json()["detail"]


async def test_a_single_push_the_database_refuses_is_a_422_not_a_500(
    client: httpx.AsyncClient,
) -> None:
    body = gzip.compress(json.dumps(naive(run().to_json())).encode())
    answer = await client.post(
        "/api/v1/agent/runs", content=body, headers=GZIP | agent("fra-1", FRA)
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"].startswith("the database refused it")
