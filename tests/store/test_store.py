"""The store, on SQLite and on PostgreSQL: runs, samples, targets, summaries, pruning."""

from __future__ import annotations

import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, event, func, select, text
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.orm import Session, sessionmaker

from app.config import Target
from app.runtime.targetsync import target_values
from app.store.db import transaction, write_lock_of
from app.store.ingest import store_run
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.prune import next_batch_rows, prune_samples
from app.store.reads.chart import run_summaries
from app.store.records import RunRecord, SampleRecord
from app.store.targets import UNKNOWN_KIND, sync_targets
from tests.runfactory import store_records

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KOLKATA = timezone(timedelta(hours=5, minutes=30))


def sample(
    idx: int,
    *,
    status: str = "ok",
    total: float = 100.0,
    phases: dict[str, float] | None = None,
    started: datetime = NOW,
    **fields: Any,
) -> SampleRecord:
    if phases is None:
        phases = {"connect": 10.0, "server": total - 30.0, "transfer": 20.0}
    return SampleRecord(
        idx=idx, started_at=started, status=status, total_ms=total, phases=phases, **fields
    )


def run(
    *samples: SampleRecord,
    target: str = "api",
    vantage: str = "eu-west",
    started: datetime = NOW,
) -> RunRecord:
    return RunRecord(
        id=uuid.uuid4(),
        target=target,
        vantage=vantage,
        started_at=started,
        status="complete",
        samples=samples,
        scheduled_at=started - timedelta(seconds=1),
        finished_at=started + timedelta(seconds=5),
    )


def simple_run(n: int = 3, *, started: datetime = NOW, **options: Any) -> RunRecord:
    samples = [sample(i, started=started + timedelta(seconds=i)) for i in range(n)]
    return run(*samples, started=started, **options)


def store(sessions: sessionmaker[Session], record: RunRecord) -> bool:
    (stored,) = store_records(sessions, [record], NOW)
    return stored


def count(sessions: sessionmaker[Session], row: type[Any]) -> int:
    with sessions() as session:
        return session.scalar(select(func.count()).select_from(row)) or 0


def target(name: str = "api", **fields: Any) -> Target:
    return Target.model_validate({"name": name, "url": f"https://{name}.example/v1", **fields})


def mixed_run() -> RunRecord:
    """Four answers, one cut at its deadline, one refused connection, one HTTP 503."""
    return run(
        sample(0, total=100.0),
        sample(1, total=110.0),
        sample(2, total=120.0),
        sample(3, total=200.0, marks={"request_start": 1_000, "first_byte": 90_000_000}),
        sample(4, status="deadline_exceeded", total=500.0, phases={"connect": 10, "server": 490}),
        sample(5, status="error", total=0.0, phases={}, error_class="ConnectError", error="no"),
        sample(6, status="http_error", total=40.0, phases={}, http_status=503),
    )


def test_storing_a_run_writes_its_summary_columns(sessions: sessionmaker[Session]) -> None:
    record = mixed_run()

    assert store(sessions, record)

    with sessions() as session:
        row = session.scalars(select(RunRow)).one()
    totals = np.percentile([100.0, 110.0, 120.0, 200.0, 500.0], [50, 90, 95, 99])
    assert (row.n_samples, row.n_ok, row.n_errors, row.n_deadline_exceeded) == (7, 4, 2, 1)
    assert row.dominant_phase == "server"
    stored_totals = [row.total_p50, row.total_p90, row.total_p95, row.total_p99]
    assert stored_totals == pytest.approx(list(totals), abs=1e-3)
    assert (row.vantage, row.status, row.started_at) == ("eu-west", "complete", NOW)


def test_storing_a_run_keeps_every_phase_percentile_and_share(
    sessions: sessionmaker[Session],
) -> None:
    record = mixed_run()

    store(sessions, record)

    with sessions() as session:
        summary = session.scalars(select(RunRow.summary)).one()
    assert summary == record.summary()
    assert set(summary["phases"]) == {"connect", "server", "transfer"}
    for stats in summary["phases"].values():
        assert set(stats) == {"p50", "p90", "p95", "p99", "share"}
    # Medians: connect 10, server 90, transfer 20.
    assert summary["phases"]["server"]["share"] == pytest.approx(0.75)
    assert summary["dominant"] == "server"


def test_storing_a_run_writes_every_sample_as_given(sessions: sessionmaker[Session]) -> None:
    record = mixed_run()

    store(sessions, record)

    with sessions() as session:
        rows = session.scalars(select(SampleRow).order_by(SampleRow.idx)).all()
    stored = [
        SampleRecord(
            idx=r.idx,
            started_at=r.started_at,
            status=r.status,
            total_ms=r.total_ms,
            phases=r.phases,
            provenance=r.provenance,
            marks=r.marks,
            error_class=r.error_class,
            error=r.error,
            http_status=r.http_status,
            details=r.details,
        )
        for r in rows
    ]
    assert stored == list(record.samples)
    assert {r.run_id for r in rows} == {record.id}


def test_a_stored_run_is_invisible_to_others_until_its_transaction_commits(
    sessions: sessionmaker[Session],
) -> None:
    record = mixed_run()

    with transaction(sessions) as session:
        store_run(session, record, NOW)
        seen_meanwhile = (count(sessions, RunRow), count(sessions, SampleRow))

    assert seen_meanwhile == (0, 0)
    assert (count(sessions, RunRow), count(sessions, SampleRow)) == (1, 7)


def test_a_run_without_samples_is_stored_with_an_empty_summary(
    sessions: sessionmaker[Session],
) -> None:
    assert store(sessions, run())

    with sessions() as session:
        row = session.scalars(select(RunRow)).one()
    assert (row.n_samples, row.total_p50, row.dominant_phase) == (0, None, None)
    assert row.summary["total"] == {}


def test_storing_the_same_run_twice_is_a_no_op(sessions: sessionmaker[Session]) -> None:
    record = simple_run(3)
    assert store(sessions, record)

    again = store(sessions, replace(record, samples=record.samples[:1], vantage="elsewhere"))

    assert again is False
    assert (count(sessions, RunRow), count(sessions, SampleRow)) == (1, 3)
    with sessions() as session:
        assert session.scalars(select(RunRow.vantage)).one() == "eu-west"


@pytest.mark.parametrize("target_known", [True, False], ids=["known-target", "new-target"])
def test_two_writers_racing_on_one_run_id_leave_one_copy(
    sessions: sessionmaker[Session], target_known: bool
) -> None:
    if target_known:
        with transaction(sessions) as session:
            sync_targets(session, target_values([target("api")]), NOW)
    record = simple_run(5)
    first_has_written = threading.Event()

    def first() -> bool:
        with transaction(sessions) as session:
            stored = store_run(session, record, NOW)
            first_has_written.set()
            # Hold the transaction open so that the second writer runs into it.
            threading.Event().wait(0.3)
            return stored

    def second() -> bool:
        first_has_written.wait(10)
        with transaction(sessions) as session:
            return store_run(session, record, NOW)

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(first), pool.submit(second)]
        outcomes = [future.result(timeout=60) for future in futures]

    assert outcomes == [True, False]
    assert (count(sessions, RunRow), count(sessions, SampleRow), count(sessions, TargetRow)) == (
        1,
        5,
        1,
    )


def test_a_failure_midway_stores_nothing_of_the_run(sessions: sessionmaker[Session]) -> None:
    # Two samples with one index: the run row and its target go in before the samples fail.
    broken = run(sample(0), sample(1), sample(1), target="new-target")

    with pytest.raises(IntegrityError):
        store(sessions, broken)

    assert (count(sessions, RunRow), count(sessions, SampleRow), count(sessions, TargetRow)) == (
        0,
        0,
        0,
    )
    assert store(sessions, replace(broken, samples=broken.samples[:2]))


def test_a_run_of_an_unknown_target_creates_it_inactive_until_the_file_names_it(
    sessions: sessionmaker[Session],
) -> None:
    store(sessions, simple_run(target="agent-only"))
    with sessions() as session:
        bare = session.scalars(select(TargetRow)).one()
    assert (bare.kind, bare.active) == (UNKNOWN_KIND, False)

    with transaction(sessions) as session:
        ids = sync_targets(session, target_values([target("agent-only")]), NOW)

    with sessions() as session:
        row = session.scalars(select(TargetRow)).one()
    assert ids == {"agent-only": bare.id}
    assert (row.id, row.kind, row.active) == (bare.id, "http", True)


def targets_by_name(sessions: sessionmaker[Session]) -> dict[str, TargetRow]:
    with sessions() as session:
        return {row.name: row for row in session.scalars(select(TargetRow))}


def test_sync_targets_adds_the_targets_of_the_file(sessions: sessionmaker[Session]) -> None:
    wanted = [target("api", interval="30s"), target("chat", kind="openai")]

    with transaction(sessions) as session:
        ids = sync_targets(session, target_values(wanted), NOW)

    rows = targets_by_name(sessions)
    assert ids == {name: row.id for name, row in rows.items()}
    assert set(rows) == {"api", "chat"}
    api = rows["api"]
    assert (api.kind, api.url, api.interval_s, api.active) == (
        "http",
        "https://api.example/v1",
        30.0,
        True,
    )
    assert api.config == wanted[0].public()
    assert api.updated_at == NOW
    assert rows["chat"].kind == "openai"


def test_sync_targets_updates_a_changed_target_in_place(sessions: sessionmaker[Session]) -> None:
    with transaction(sessions) as session:
        before = sync_targets(session, target_values([target("api")]), NOW)
    later = NOW + timedelta(hours=1)
    changed = target("api", url="https://moved.example/v2", interval=60, samples=5)

    with transaction(sessions) as session:
        after = sync_targets(session, target_values([changed]), later)

    row = targets_by_name(sessions)["api"]
    assert after == before
    assert (row.url, row.interval_s, row.config["samples"], row.updated_at) == (
        "https://moved.example/v2",
        60.0,
        5,
        later,
    )


def test_sync_targets_deactivates_targets_gone_from_the_file_and_revives_them(
    sessions: sessionmaker[Session],
) -> None:
    with transaction(sessions) as session:
        sync_targets(session, target_values([target("api"), target("chat")]), NOW)
    later = NOW + timedelta(hours=1)

    with transaction(sessions) as session:
        ids = sync_targets(session, target_values([target("api")]), later)

    rows = targets_by_name(sessions)
    assert set(ids) == {"api", "chat"}
    assert (rows["chat"].active, rows["chat"].updated_at) == (False, later)
    assert rows["api"].active

    with transaction(sessions) as session:
        sync_targets(session, target_values([target("chat")]), later)
    rows = targets_by_name(sessions)
    assert (rows["api"].active, rows["chat"].active) == (False, True)
    assert rows["chat"].id == ids["chat"]


def test_sync_targets_never_stores_a_header_value(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    secret = "s3cr3t-" + uuid.uuid4().hex
    headers = {"Authorization": f"Bearer {secret}", "X-Api-Key": secret}

    with transaction(sessions) as session:
        sync_targets(session, target_values([target("api", headers=headers)]), NOW)

    with engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT * FROM targets").all()
    # Not repr(rows): SQLAlchemy shortens long values in a row's repr.
    everything = json.dumps([list(row) for row in rows], default=str)
    assert "X-Api-Key" in everything
    assert secret not in everything


def test_datetimes_come_back_as_the_same_instant_in_utc(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    started = NOW.astimezone(KOLKATA)
    store(sessions, run(sample(0, started=started), started=started))

    with sessions() as session:
        if engine.dialect.name == "postgresql":
            # The server answers in the session's time zone; that must not leak out.
            session.execute(text("SET TIME ZONE 'Asia/Kolkata'"))
        row = session.scalars(select(RunRow)).one()
        sample_start = session.scalars(select(SampleRow.started_at)).one()

    values = [row.started_at, row.scheduled_at, row.finished_at, sample_start]
    assert values == [NOW, NOW - timedelta(seconds=1), NOW + timedelta(seconds=5), NOW]
    assert all(value is not None and value.tzinfo is UTC for value in values)


def test_a_naive_datetime_is_refused(sessions: sessionmaker[Session]) -> None:
    naive = NOW.replace(tzinfo=None)

    with pytest.raises(StatementError, match="naive datetime"):
        store(sessions, run(sample(0), started=naive))
    with pytest.raises(StatementError, match="naive datetime"), sessions() as session:
        run_summaries(session, "api", naive, naive + timedelta(hours=1))

    assert count(sessions, RunRow) == 0


def hours(n: float) -> datetime:
    return NOW + timedelta(hours=n)


def store_history(sessions: sessionmaker[Session]) -> None:
    """Target "api" from eu-west hourly (stored out of order), one from us-east, one other."""
    for n in (3, 0, 4, 1, 2):
        store(sessions, simple_run(1, started=hours(n)))
    store(sessions, simple_run(1, started=hours(1.5), vantage="us-east"))
    store(sessions, simple_run(1, started=hours(1), target="other"))


def summaries(sessions: sessionmaker[Session], *args: Any, **kwargs: Any) -> list[Any]:
    with sessions() as session:
        return [(r.started_at, r.vantage) for r in run_summaries(session, *args, **kwargs)]


def test_run_summaries_gives_one_targets_runs_in_the_range_oldest_first(
    sessions: sessionmaker[Session],
) -> None:
    store_history(sessions)

    found = summaries(sessions, "api", hours(1), hours(3))

    assert found == [(hours(1), "eu-west"), (hours(1.5), "us-east"), (hours(2), "eu-west")]


def test_run_summaries_filters_by_vantage(sessions: sessionmaker[Session]) -> None:
    store_history(sessions)

    found = summaries(sessions, "api", hours(0), hours(5), vantage="us-east")

    assert found == [(hours(1.5), "us-east")]


def test_run_summaries_takes_its_range_in_any_time_zone(sessions: sessionmaker[Session]) -> None:
    store_history(sessions)

    found = summaries(sessions, "api", hours(1).astimezone(KOLKATA), hours(2).astimezone(KOLKATA))

    assert found == [(hours(1), "eu-west"), (hours(1.5), "us-east")]


def test_run_summaries_of_an_unknown_target_is_empty(sessions: sessionmaker[Session]) -> None:
    store_history(sessions)

    assert summaries(sessions, "nobody", hours(0), hours(5)) == []


def test_prune_samples_deletes_only_samples_older_than_the_cutoff_in_batches(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    cutoff = NOW - timedelta(days=30)
    old = [simple_run(3, started=cutoff - timedelta(days=d)) for d in range(1, 6)]
    # One run straddles the cutoff: samples at -60 s, -30 s, 0 s and +30 s from it.
    straddling = simple_run(4, started=cutoff - timedelta(seconds=60))
    straddling = replace(
        straddling,
        samples=tuple(
            replace(s, started_at=cutoff + timedelta(seconds=30 * s.idx - 60))
            for s in straddling.samples
        ),
    )
    recent = [simple_run(3, started=NOW), simple_run(3, started=NOW - timedelta(days=1))]
    for record in [*old, straddling, *recent]:
        store(sessions, record)
    commits: list[object] = []
    event.listen(engine, "commit", commits.append)

    deleted = prune_samples(engine, cutoff, rows_per_batch=4, pause_s=0)

    assert deleted == 5 * 3 + 2
    assert len(commits) >= 5  # 17 old samples, four per batch
    with sessions() as session:
        kept = session.scalars(select(SampleRow.started_at)).all()
        runs = {row.id: row for row in session.scalars(select(RunRow))}
    assert len(kept) == 2 + 3 + 3
    assert min(kept) == cutoff
    assert set(runs) == {r.id for r in [*old, straddling, *recent]}
    assert all(runs[r.id].summary == r.summary() for r in [*old, straddling])


def test_prune_samples_with_nothing_old_deletes_nothing(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    store(sessions, simple_run(3))

    assert prune_samples(engine, NOW - timedelta(days=30)) == 0
    assert count(sessions, SampleRow) == 3


def test_prune_samples_gets_past_more_samples_at_one_instant_than_a_batch_holds(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    cutoff = NOW - timedelta(days=30)
    instant = cutoff - timedelta(days=2)
    crowded = run(*[sample(i, started=instant) for i in range(10)], started=instant)
    later_old = simple_run(3, started=cutoff - timedelta(days=1))
    for record in (crowded, later_old, simple_run(2)):
        store(sessions, record)

    deleted = prune_samples(engine, cutoff, rows_per_batch=3, pause_s=0)

    assert deleted == 13
    assert count(sessions, SampleRow) == 2
    assert count(sessions, RunRow) == 3


def test_prune_samples_deletes_oldest_first_batch_by_batch(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    cutoff = NOW - timedelta(days=30)
    for d in range(1, 5):
        store(sessions, simple_run(2, started=cutoff - timedelta(days=d)))
    oldest_left: list[datetime] = []

    def between_batches(_pause_s: float) -> None:
        with sessions() as session:
            oldest = session.scalar(select(func.min(SampleRow.started_at)))
        assert oldest is not None
        oldest_left.append(oldest)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("app.store.prune.time.sleep", between_batches)
        assert prune_samples(engine, cutoff, rows_per_batch=2, pause_s=0) == 8

    assert oldest_left == [cutoff - timedelta(days=d) for d in (3, 2, 1)]


@pytest.mark.parametrize(
    ("rows", "took_s", "expected"),
    [
        (500, 0.060, 250),  # over the 50 ms budget: halved
        (500, 0.040, 500),  # within it, not well within: kept
        (250, 0.010, 500),  # well within: doubled
        (500, 0.001, 500),  # never above the most asked for
        (150, 0.200, 100),  # never below the fewest
        (100, 0.200, 100),
        (100, 0.001, 200),
    ],
)
def test_a_prune_batch_shrinks_while_over_its_budget_and_grows_back(
    rows: int, took_s: float, expected: int
) -> None:
    assert next_batch_rows(rows, took_s, budget_s=0.05, most=500) == expected


@pytest.mark.parametrize(
    ("budget_s", "batches"),
    [(0.0, [200, 100, 100]), (60.0, [200, 200])],
    ids=["over", "within"],
)
def test_a_prune_over_its_budget_goes_on_in_smaller_batches(
    sessions: sessionmaker[Session], engine: Engine, budget_s: float, batches: list[int]
) -> None:
    cutoff = NOW - timedelta(days=30)
    for d in range(1, 11):
        store(sessions, simple_run(40, started=cutoff - timedelta(days=d)))
    deleted: list[int] = []

    def note(_conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE"):
            deleted.append(cursor.rowcount)

    event.listen(engine, "after_cursor_execute", note)

    assert prune_samples(engine, cutoff, rows_per_batch=200, pause_s=0, budget_s=budget_s) == 400

    assert deleted == batches
    assert count(sessions, SampleRow) == 0


def test_sqlite_checkpoints_the_wal_between_prune_batches_outside_the_write_lock(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    cutoff = NOW - timedelta(days=30)
    for d in range(1, 4):
        store(sessions, simple_run(100, started=cutoff - timedelta(days=d)))
    checkpoints: list[bool] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        lock = write_lock_of(engine)
        if "wal_checkpoint" in statement and lock is not None:
            checkpoints.append(lock.locked())

    event.listen(engine, "before_cursor_execute", note)

    prune_samples(engine, cutoff, rows_per_batch=100, pause_s=0)

    # SQLite: one after each of the three batches, never while the lock is held.
    expected = [False] * 3 if engine.dialect.name == "sqlite" else []
    assert checkpoints == expected
