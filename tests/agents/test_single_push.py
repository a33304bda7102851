"""A single push (``/agent/runs``) goes in as ``serve`` stores a run it probed (the sink's
``store``): on PostgreSQL one statement and no transaction, and every answer the same as a
batch's road gave — stored, a replay or a taken slot answered as a duplicate, the door's
refusal 422, no schema yet 503."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, func, select

from app.agents.wire import RUNS_PATH
from app.store.models import RunRow
from app.store.records import RunRecord
from app.web.deps import agents_of, service_of
from tests.agents.support import FRA, GZIP, agent, packed, run

pytestmark = pytest.mark.anyio
SLOT = 1_765_000_000_000


@contextmanager
def sent(app: FastAPI) -> Iterator[list[str]]:
    """The statements the service's engine sends meanwhile from the push threads, BEGIN and
    COMMIT included (the evaluation of a run pushed runs beside them, on its own thread)."""
    engine = service_of(app).engine
    seen: list[str] = []

    def note(what: str) -> None:
        if threading.current_thread().name.startswith("push"):
            seen.append(what)

    def statement(_conn: object, _cursor: object, sql: str, *_rest: object) -> None:
        note(sql.split()[0].upper())

    def begin(_conn: object) -> None:
        note("BEGIN")

    def commit(_conn: object) -> None:
        note("COMMIT")

    hooks: list[tuple[str, Callable[..., None]]] = [
        ("before_cursor_execute", statement),
        ("begin", begin),
        ("commit", commit),
    ]
    for name, hook in hooks:
        event.listen(engine, name, hook)
    try:
        yield seen
    finally:
        for name, hook in hooks:
            event.remove(engine, name, hook)


async def push(client: httpx.AsyncClient, record: RunRecord) -> httpx.Response:
    return await client.post(RUNS_PATH, content=packed(record), headers=GZIP | agent("fra-1", FRA))


def stored_runs(app: FastAPI) -> int:
    with service_of(app).sessions() as session:
        return int(session.scalar(select(func.count()).select_from(RunRow)) or 0)


# SQLite stores a run in a transaction (its one writer's lock): PostgreSQL's road alone.
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
async def test_a_pushed_run_goes_in_by_one_statement_without_a_transaction_on_postgresql(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    await push(client, run())  # the target's row made by the first run
    with sent(app) as statements:
        answer = await push(client, run(n=5))
    assert answer.status_code == 200 and answer.json()["stored"] is True
    # SQLAlchemy's "begin" event fires on an autocommit connection too, sending nothing.
    assert [s for s in statements if s != "BEGIN"] == ["WITH"], statements


@pytest.mark.parametrize(
    ("second", "stored"),
    [
        (lambda first: replace(first, id=uuid.uuid4(), slot=SLOT + 60_000), True),
        (lambda first: first, False),  # a replay
        (lambda first: replace(first, id=uuid.uuid4()), False),  # its slot taken
    ],
    ids=["next-slot", "replay", "slot-taken"],
)
async def test_a_second_push_is_stored_or_a_duplicate_by_run_id_and_slot(
    client: httpx.AsyncClient,
    app: FastAPI,
    second: Callable[[RunRecord], RunRecord],
    stored: bool,
) -> None:
    first = replace(run(), slot=SLOT)
    assert (await push(client, first)).json()["stored"] is True
    answer = await push(client, second(first))
    assert answer.status_code == 200 and answer.json()["stored"] is stored
    assert stored_runs(app) == 1 + stored


async def test_a_run_the_door_refuses_is_answered_422_with_its_reason_and_not_stored(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    bad = run()
    bad = replace(bad, samples=(replace(bad.samples[0], total_ms=float("inf")), *bad.samples[1:]))
    answer = await push(client, bad)
    assert answer.status_code == 422 and "total_ms" in answer.json()["detail"], answer.text
    assert stored_runs(app) == 0


async def test_a_push_before_the_schema_is_ready_is_told_to_come_back(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    agents_of(app).database.ready.clear()
    answer = await push(client, run())
    assert answer.status_code == 503 and "Retry-After" in answer.headers
    agents_of(app).database.ready.set()
    assert (await push(client, run())).json()["stored"] is True
