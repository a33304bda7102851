"""One bad row never stops the others: the quarantine, and the rollups' catch-up passing over
a run planted in the database that it cannot digest, on SQLite and PostgreSQL."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, select, text, update
from sqlalchemy.exc import DataError
from sqlalchemy.orm import Session, sessionmaker

from app.store.ingest import store_run
from app.store.models import RunDigestRow, SampleRow
from app.store.quarantine import Quarantine, isolated
from app.store.records import RunRecord
from app.store.rollups import catchup
from app.store.rollups.catchup import catch_up
from tests.runfactory import T0, make_run, record_of

NOW = T0 + timedelta(days=1)
SINCE = T0 - timedelta(days=1)


def _records(targets: tuple[str, ...] = ("a", "b", "c"), each: int = 4) -> list[RunRecord]:
    rng = np.random.default_rng(3)
    return [
        record_of(make_run(rng, T0 + timedelta(minutes=10 * i + j), target=name, n=5))
        for i in range(each)
        for j, name in enumerate(targets)
    ]


def _stored(sessions: sessionmaker[Session]) -> list[RunRecord]:
    records = _records()
    with sessions.begin() as session:
        for record in records:
            store_run(session, record, NOW)
    return records


def _digested(sessions: sessionmaker[Session]) -> set[uuid.UUID]:
    with sessions() as session:
        return set(session.scalars(select(RunDigestRow.run_id)))


def _plant(sessions: sessionmaker[Session], run_id: uuid.UUID, **values: Any) -> None:
    """Write ``values`` into the run's first sample, past the door, as SQL would."""
    where = (SampleRow.run_id == run_id) & (SampleRow.idx == 0)
    with sessions.begin() as session:
        session.execute(update(SampleRow).where(where).values(**values))


POISONS = {
    "negative phase": {"phases": {"queue": -5.0, "generation": 10.0}},
    "infinite total": {"total_ms": float("inf")},
    "phases not an object": {"phases": "oops"},
    "phase not a number": {"phases": {"queue": None}},
}


@pytest.mark.parametrize("poison", POISONS.values(), ids=list(POISONS))
def test_a_run_that_cannot_be_digested_is_set_aside_and_every_other_run_is_added(
    sessions: sessionmaker[Session], poison: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    records = _stored(sessions)
    bad = records[0]  # the oldest: in the first batch, before every other run
    _plant(sessions, bad.id, **poison)
    quarantine = Quarantine()
    aside = quarantine.loop("rollups")

    assert catch_up(sessions, SINCE, NOW, batch=3, aside=aside) == len(records) - 1
    assert _digested(sessions) == {r.id for r in records} - {bad.id}
    assert aside.holds(f"run {bad.id}")
    (problem,) = quarantine.problems()
    assert problem.startswith(f"rollups: 1 run quarantined: run {bad.id} of target a: ")
    assert quarantine.counts() == {"rollups": 1, "evaluation": 0, "outbox": 0, "prune": 0}

    # Passed over from now on: not tried again, not logged again.
    caplog.clear()
    assert catch_up(sessions, SINCE, NOW, batch=3, aside=aside) == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# PostgreSQL refuses text that is not JSON in a json column; SQLite (and an old file) keeps it.
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_samples_the_database_cannot_return_set_only_their_run_aside(
    sessions: sessionmaker[Session],
) -> None:
    records = _stored(sessions)
    bad = records[4]
    with sessions.begin() as session:
        session.execute(
            text("UPDATE samples SET phases = 'not json {' WHERE run_id = :id"),
            {"id": bad.id.hex},
        )
    quarantine = Quarantine()
    assert catch_up(sessions, SINCE, NOW, aside=quarantine.loop("rollups")) == len(records) - 1
    (held,) = quarantine.held()
    assert (held.item, held.about) == (f"run {bad.id}", "of target b")
    assert held.reason.startswith("samples not readable: ")


def test_a_batch_the_database_refuses_is_written_a_run_at_a_time(
    sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    records = _stored(sessions)
    bad = records[5]
    ordinary, planned = catchup._added, catchup.written

    def refusing(write: Any) -> Any:
        def call(sessions: Any, first: Any, *rest: Any) -> int:
            digests = first.digests if hasattr(first, "digests") else first
            if any(d.run_id == bad.id for d in digests):
                raise DataError("INSERT", {}, ValueError("refused by the database"))
            return int(write(sessions, first, *rest))

        return call

    monkeypatch.setattr(catchup, "_added", refusing(ordinary))
    monkeypatch.setattr(catchup, "written", refusing(planned))
    quarantine = Quarantine()
    assert catch_up(sessions, SINCE, NOW, aside=quarantine.loop("rollups")) == len(records) - 1
    assert _digested(sessions) == {r.id for r in records} - {bad.id}
    assert [h.item for h in quarantine.held()] == [f"run {bad.id}"]
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(RunDigestRow)) == len(records) - 1


@pytest.mark.parametrize(
    ("held", "expected"),
    [
        ([], []),
        (
            [("rollups", "run 1", "bad", "of target t")],
            ["rollups: 1 run quarantined: run 1 of target t: bad"],
        ),
        (
            [("rollups", f"run {n}", "bad", "") for n in range(5)],
            ["rollups: 5 runs quarantined: run 0: bad; run 1: bad; run 2: bad; and 2 more"],
        ),
        (
            [("rollups", "run 1", "bad", ""), ("rollups", "pass", "no table", "")],
            ["rollups: 2 items quarantined: run 1: bad; pass: no table"],
        ),
        (
            [("outbox", "delivery 3", "not an object", ""), ("prune", "step x", "no", "")],
            [
                "outbox: 1 delivery quarantined: delivery 3: not an object",
                "prune: 1 step quarantined: step x: no",
            ],
        ),
    ],
)
def test_healthz_names_what_each_loop_holds(
    held: list[tuple[str, str, str, str]], expected: list[str]
) -> None:
    quarantine = Quarantine()
    for loop, item, reason, about in held:
        quarantine.hold(loop, item, reason, about)
    assert quarantine.problems() == expected


def test_an_item_is_held_once_and_released_when_it_passes(caplog: pytest.LogCaptureFixture) -> None:
    quarantine = Quarantine()
    assert quarantine.hold("evaluation", "target t at eu", "boom\ntraceback")
    assert not quarantine.hold("evaluation", "target t at eu", "boom again")
    assert [h.reason for h in quarantine.held()] == ["boom"]
    assert len([r for r in caplog.records if "set aside" in r.getMessage()]) == 1
    assert quarantine.release("evaluation", "target t at eu")
    assert not quarantine.release("evaluation", "target t at eu")
    assert quarantine.problems() == [] and quarantine.counts()["evaluation"] == 0


def test_an_evaluation_that_fails_holds_its_target_and_the_others_go_on() -> None:
    records = _records(("good", "bad"), each=2)
    evaluated: list[str] = []

    def evaluate(record: RunRecord) -> list[str]:
        if record.target == "bad" and len(evaluated) < 2:
            raise ZeroDivisionError("a history the detector cannot read")
        evaluated.append(record.target)
        return [record.target]

    quarantine = Quarantine()
    step = isolated(evaluate, quarantine.loop("evaluation"))
    assert [step(r) for r in records[:3]] == [["good"], None, ["good"]]
    assert [h.item for h in quarantine.held()] == ["target bad at eu"]
    assert step(records[3]) == ["bad"]  # tried again with its next run: it passes now
    assert quarantine.held() == []
