"""One run a (target, vantage, slot), on SQLite and on PostgreSQL: a second run of a slot
(another id) is not stored, and told apart from a replayed run id; runs without a slot
never collide on it."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.runs.dbsink import DatabaseSink
from app.runs.slots import slot_time
from app.store.db import transaction, write_connection
from app.store.ingest import Ingested, ingest_many_on, ingest_run, ingest_run_on
from app.store.models import RunRow, SampleRow
from app.store.records import RunRecord, SampleRecord

NOW = datetime(2026, 3, 1, 12, 0, 3, tzinfo=UTC)
SLOT = 1_772_366_400_000  # 2026-03-01T12:00:00Z, ms since the epoch


def run(
    slot: int | None = SLOT, target: str = "api", vantage: str = "local", total: float = 10.0
) -> RunRecord:
    """A run scheduled 3 s into its slot."""
    at = NOW if slot is None else slot_time(slot) + (NOW - slot_time(SLOT))
    sample = SampleRecord(0, at, "ok", total, {"server": total})
    return RunRecord(uuid.uuid4(), target, vantage, at, "complete", (sample,), at, at, slot=slot)


def rows(sessions: sessionmaker[Session]) -> list[tuple[uuid.UUID, int | None, int]]:
    """Each stored run: its id, slot and how many samples it has."""
    with sessions() as session:
        counted = select(SampleRow.run_id, func.count()).group_by(SampleRow.run_id)
        per_run: dict[uuid.UUID, int] = {row[0]: row[1] for row in session.execute(counted)}
        found = session.execute(select(RunRow.id, RunRow.slot)).all()
        return sorted((run_id, slot, per_run.get(run_id, 0)) for run_id, slot in found)


@pytest.mark.parametrize(
    ("second", "outcome"),
    [
        (lambda first: first, Ingested.REPLAYED),  # the same run again
        (lambda first: run(total=99.0), Ingested.SLOT_TAKEN),  # another run of its slot
        (lambda first: run(slot=SLOT + 10_000), Ingested.STORED),  # the next slot
        (lambda first: run(target="web"), Ingested.STORED),  # another target's slot
        (lambda first: run(vantage="fra-1"), Ingested.STORED),  # another vantage's slot
        (lambda first: run(slot=None), Ingested.STORED),  # a run with no slot
    ],
    ids=["replay", "slot-taken", "next-slot", "other-target", "other-vantage", "no-slot"],
)
def test_a_second_run_of_one_slot_is_not_stored_and_is_told_from_a_replay(
    sessions: sessionmaker[Session], second: object, outcome: Ingested
) -> None:
    first = run()
    with write_connection(sessions) as connection:
        assert ingest_run_on(connection, first, NOW) is Ingested.STORED
    with write_connection(sessions) as connection:
        assert ingest_run_on(connection, second(first), NOW) is outcome  # type: ignore[operator]
    stored = rows(sessions)
    assert (first.id, SLOT, 1) in stored
    assert len(stored) == (2 if outcome is Ingested.STORED else 1)


def test_runs_without_a_slot_never_collide_on_it(sessions: sessionmaker[Session]) -> None:
    runs = [run(slot=None) for _ in range(3)]
    with transaction(sessions) as session:
        assert [ingest_run(session, r, NOW) for r in runs] == [Ingested.STORED] * 3
    assert len(rows(sessions)) == 3


def test_a_batch_is_ingested_as_its_runs_would_be_one_by_one(
    sessions: sessionmaker[Session],
) -> None:
    first, later, new = run(), run(slot=SLOT + 10_000), run(target="new-target")
    with write_connection(sessions) as connection:
        assert ingest_run_on(connection, first, NOW) is Ingested.STORED
    no_slot = run(slot=None)
    batch = [first, run(total=99.0), later, replace(later, id=uuid.uuid4()), new]
    batch += [run(target="new-target", total=5.0), no_slot, later]
    with write_connection(sessions) as connection:
        found = ingest_many_on(connection, batch, NOW)
    stored, replayed, taken = Ingested.STORED, Ingested.REPLAYED, Ingested.SLOT_TAKEN
    assert found == [replayed, taken, stored, taken, stored, taken, stored, replayed]
    kept = {(r.id, r.slot, 1) for r in (first, later, new, no_slot)}
    assert set(rows(sessions)) == kept


def test_the_database_sink_answers_a_taken_slot_as_had_already_and_counts_it(
    sessions: sessionmaker[Session],
) -> None:
    sink = DatabaseSink(sessions, clock=lambda: NOW + timedelta(minutes=1))
    first, twin, later = run(), run(total=20.0), run(slot=SLOT + 10_000)
    assert sink.store(first) is True
    assert sink.store(first) is False  # a replay: not counted
    assert sink.store(twin) is False
    assert sink.store_batch([run(total=30.0), later, replace(later, id=uuid.uuid4())]) == [
        False,
        True,
        False,
    ]
    assert sink.taken.snapshot() == {("api", "local"): 3}
    assert sorted(slot for _, slot, _ in rows(sessions)) == [SLOT, SLOT + 10_000]


def test_a_run_the_database_refuses_in_a_batch_is_refused_alone(
    sessions: sessionmaker[Session],
) -> None:
    """PostgreSQL holds no NUL in text (SQLite does): the batch's statements fail together,
    then each run is stored alone and only that one is refused."""
    sink = DatabaseSink(sessions, clock=lambda: NOW + timedelta(minutes=1))
    good = [run(slot=SLOT + k * 10_000) for k in range(3)]
    poison = run(slot=SLOT + 30_000)
    sample = replace(poison.samples[0], error_class="x", error="a NUL \x00 inside")
    poison = replace(poison, samples=(sample,))
    answers = sink.store_batch([good[0], poison, good[1], good[2]])
    on_postgres = sessions.kw["bind"].dialect.name == "postgresql"
    assert answers[0] is True and answers[2:] == [True, True]
    if on_postgres:
        assert isinstance(answers[1], str) and answers[1].startswith("the database refused it")
    else:
        assert answers[1] is True
    assert len(rows(sessions)) == (3 if on_postgres else 4)
