"""A run is evaluated by its target's owner, whoever stored it, and a replica that takes a
target over goes on from the alert memory the last owner left (real PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, func, select, text

from app.alerts.state import State
from app.replicas.assign import owner
from app.replicas.evaluation import OwnerEvaluation
from app.replicas.membership import Replicas
from app.store.db import make_engine, make_sessions
from app.store.models import AlertRow
from app.store.replicarows import EvaluationDueRow
from tests.alerts.test_engine import EVERY, TARGET, Watch
from tests.runfactory import T0, failed_run

pytestmark = pytest.mark.postgres


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
