"""A run is evaluated by its target's owner, whoever stored it, and a replica that takes a
target over goes on from the alert memory the last owner left (real PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine, func, select, text

from app.alerts.state import State
from app.replicas import evaluation as evaluation_module
from app.replicas.assign import owner
from app.replicas.evaluation import OwnerEvaluation
from app.replicas.membership import Replicas
from app.store import wakeups
from app.store.db import make_engine, make_sessions
from app.store.models import AlertRow
from app.store.replicarows import EvaluationDueRow
from app.store.wakeups import Listener
from tests.alerts.test_engine import EVERY, TARGET, Watch
from tests.runfactory import T0, failed_run

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(90)]


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    made = make_engine(postgres_url)
    yield made
    made.dispose()


def replicas_of(engine: Engine) -> dict[str, tuple[Watch, OwnerEvaluation]]:
    """Two replicas, "a" and "b", both counting now, each with its own engine."""
    sessions = make_sessions(engine)
    made = {}
    for name in "ab":
        watch = Watch(sessions)
        replicas = Replicas(sessions, True, 600.0, name)
        watch.engine.restore()  # as serve does at its start
        made[name] = (watch, OwnerEvaluation(watch.engine, replicas, lambda: [TARGET.name]))
    for _, evaluation in made.values():
        evaluation.replicas.renew()
    with engine.begin() as connection:  # the joiner counts at once, not two renewals later
        connection.execute(text("UPDATE replicas SET effective_at = now() - interval '1 hour'"))
    for _, evaluation in made.values():
        evaluation.replicas.renew()
    return made


def alerts(engine: Engine) -> list[tuple[str, str]]:
    with make_sessions(engine)() as session:
        return [(row.kind, row.state) for row in session.scalars(select(AlertRow))]


def waiting(engine: Engine) -> int:
    with make_sessions(engine)() as session:
        return int(session.scalar(select(func.count()).select_from(EvaluationDueRow)) or 0)


def test_a_run_stored_by_another_replica_is_evaluated_by_the_owner_alone(engine: Engine) -> None:
    made = replicas_of(engine)
    owning = owner(TARGET.name, ["a", "b"])
    other = "b" if owning == "a" else "a"
    (watch, taker), (_, keeper) = made[other], made[owning]
    for k in range(1, 5):
        record = watch.store(failed_run(T0 + k * EVERY, vantage="eu"))
        assert taker.evaluate_after(record) == []  # not its target: asked of the owner
        assert waiting(engine) == 1
        keeper.claim_once()
        assert waiting(engine) == 0
    assert (taker.asked, keeper.claimed) == (4, 4)
    assert alerts(engine) == [("probe_failing", State.FIRING.value)]


def test_a_replica_taking_a_target_over_goes_on_from_the_alert_the_last_owner_opened(
    engine: Engine,
) -> None:
    made = replicas_of(engine)
    owning = owner(TARGET.name, ["a", "b"])
    heir = "b" if owning == "a" else "a"
    watch, first = made[owning]
    for k in range(1, 5):
        first.evaluate_after(watch.store(failed_run(T0 + k * EVERY, vantage="eu")))
    assert alerts(engine) == [("probe_failing", State.FIRING.value)]

    with engine.begin() as connection:  # the owner dies: its lease is gone
        connection.execute(text("DELETE FROM replicas WHERE id = :id"), {"id": owning})
    heir_watch, second = made[heir]
    second.replicas.renew()
    heir_watch.now = watch.now
    record = heir_watch.store(failed_run(T0 + 5 * EVERY, vantage="eu"))
    second.evaluate_after(record)
    # Still the one alert, firing: not a second one opened by a replica that forgot it.
    assert alerts(engine) == [("probe_failing", State.FIRING.value)]


# --- Woken when asked, not polling -----------------------------------------------------------

NEVER_S = 3600.0  # a poll that never comes within the test's time


def owner_and_other(engine: Engine) -> tuple[tuple[Watch, OwnerEvaluation], OwnerEvaluation]:
    made = replicas_of(engine)
    owning = owner(TARGET.name, ["a", "b"])
    return made["b" if owning == "a" else "a"], made[owning][1]


async def until(check: Callable[[], bool], what: str) -> None:
    """A liveness bound (30 s), not a speed claim."""
    for _ in range(3000):
        if await asyncio.to_thread(check):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not within 30 s: {what}")


async def stopped(*tasks: asyncio.Task[None]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


@pytest.mark.anyio
async def test_a_request_wakes_the_owners_claim_without_waiting_for_its_poll(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evaluation_module, "SAFETY_POLL_S", NEVER_S)
    (watch, taker), keeper = owner_and_other(engine)
    listener = Listener(engine.url, {wakeups.EVALUATIONS: keeper.requested})
    tasks = [asyncio.create_task(listener.loop()), asyncio.create_task(keeper.claim_loop())]
    try:
        await until(lambda: listener.listening, "the owner listens")
        record = watch.store(failed_run(T0 + EVERY, vantage="eu"))
        assert await asyncio.to_thread(taker.evaluate_after, record) == []
        await until(lambda: keeper.claimed == 1, "the owner claimed the request")
        assert waiting(engine) == 0
    finally:
        await stopped(*tasks)


@pytest.mark.anyio
async def test_the_safety_poll_finds_a_request_nobody_announced(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evaluation_module, "SAFETY_POLL_S", 0.05)
    (watch, _), keeper = owner_and_other(engine)
    watch.store(failed_run(T0 + EVERY, vantage="eu"))
    with engine.begin() as connection:  # as a process that announces nothing would
        connection.execute(
            text("INSERT INTO evaluations_due VALUES (:target, 'eu', now())"),
            {"target": TARGET.name},
        )
    task = asyncio.create_task(keeper.claim_loop())  # and nobody listening
    try:
        await until(lambda: keeper.claimed == 1, "the poll claimed the request")
    finally:
        await stopped(task)


def test_requests_left_for_another_replica_keep_the_claim_looking_every_second(
    engine: Engine,
) -> None:
    (_, taker), keeper = owner_and_other(engine)
    with engine.begin() as connection:  # the owner's request, the other cannot take it
        connection.execute(
            text("INSERT INTO evaluations_due VALUES (:target, 'eu', now())"),
            {"target": TARGET.name},
        )
    assert taker.claim_once() == 0
    assert taker.others_waiting  # claimed again every CLAIM_EVERY_S, not SAFETY_POLL_S
    keeper.claim_once()
    assert taker.claim_once() == 0
    assert not taker.others_waiting


@pytest.mark.anyio
async def test_a_renewal_that_gives_targets_rings_the_claim_and_one_that_does_not_stays_quiet(
    engine: Engine,
) -> None:
    (_, taker), keeper = owner_and_other(engine)
    taker.forget_lost()
    await taker.requested.wait(0.0)  # the first renewal's: everything it owns is new
    taker.replicas.renew()
    taker.forget_lost()
    assert await taker.requested.wait(0.0) is False  # nothing changed hands
    with engine.begin() as connection:  # the owner dies: its lease is gone
        connection.execute(text("DELETE FROM replicas WHERE id = :id"), {"id": keeper.replicas.me})
    taker.replicas.renew()
    taker.forget_lost()
    assert await taker.requested.wait(0.0) is True  # its requests are claimed now
