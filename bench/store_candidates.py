"""Changes proposed for ``app/store/queries.py``, written here so the benchmarks can measure them.

Nothing in ``app/`` imports this module; each function says which app function it would
replace and why. ``bench.store_ingest --candidates`` and ``bench.store_prune --candidate``
run them beside the app's own.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import numpy as np
from psycopg.types.json import Jsonb
from sqlalchemy import Engine, Insert, Table, delete, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from app.analysis.summary import FAILED, QUANTILES, TIMED, PhaseStats, Summary, shares
from app.analysis.summary import dominant_phase as dominant_of
from app.probe.sample import Status
from app.store.models import RunRow, SampleRow
from app.store.queries import _run_values, _sample_values, store_run, target_id
from app.store.records import RunRecord, SampleRecord

StoreRun = Callable[[Session, RunRecord, datetime], bool]
RUNS: Table = RunRow.__table__  # type: ignore[assignment]
SAMPLES: Table = SampleRow.__table__  # type: ignore[assignment]
SAMPLE_COLUMNS = [c.name for c in SAMPLES.c]
JSON_COLUMNS = {"phases", "provenance", "marks", "details"}


# --- ingest -----------------------------------------------------------------------------------


def _built_once(insert: Callable[[Any], Any]) -> Insert:
    statement: Insert = insert(RUNS).on_conflict_do_nothing(index_elements=["id"])
    return statement.returning(RUNS.c.id)


# One statement per dialect, built at import: each run then only binds its values, instead
# of building ``insert(RunRow).values({...})`` anew (and computing its cache key) per run.
RUN_INSERT = {"postgresql": _built_once(pg_insert), "sqlite": _built_once(sqlite_insert)}


def _insert_samples(session: Session, record: RunRecord) -> None:
    session.execute(SAMPLES.insert(), [_sample_values(record.id, s) for s in record.samples])


def store_run_prepared(session: Session, record: RunRecord, now: datetime) -> bool:
    """1. ``store_run`` with its run INSERT built once, values as bound parameters."""
    return _store(session, record, target_id(session, record.target, now), _insert_samples)


class CachedTargets:
    """2. ... and the target's id from a per-process cache, not a SELECT per run.

    Target rows are never deleted (a target gone from the file becomes inactive), so an
    id once seen stays right; a miss falls back to ``target_id``.
    """

    def __init__(
        self,
        samples: Callable[[Session, RunRecord], None] = _insert_samples,
        values: Callable[[RunRecord, int], dict[str, Any]] = _run_values,
    ) -> None:
        self.ids: dict[str, int] = {}
        self.samples, self.values = samples, values

    def __call__(self, session: Session, record: RunRecord, now: datetime) -> bool:
        found = self.ids.get(record.target)
        if found is None:
            found = self.ids[record.target] = target_id(session, record.target, now)
        return _store(session, record, found, self.samples, self.values)


def _store(
    session: Session,
    record: RunRecord,
    target: int,
    samples: Callable[[Session, RunRecord], None],
    values: Callable[[RunRecord, int], dict[str, Any]] = _run_values,
) -> bool:
    insert = RUN_INSERT[session.get_bind().dialect.name]
    if session.execute(insert, values(record, target)).scalar() is None:
        return False
    if record.samples:
        samples(session, record)
    return True


def copy_samples(session: Session, record: RunRecord) -> None:
    """3. (PostgreSQL) ... and the samples by COPY: one message, no per-row statement."""
    if session.get_bind().dialect.name != "postgresql":
        _insert_samples(session, record)
        return
    driver: Any = session.connection().connection.driver_connection
    with driver.cursor() as cursor:
        with cursor.copy(f"COPY samples ({', '.join(SAMPLE_COLUMNS)}) FROM STDIN") as copy:
            for sample in record.samples:
                copy.write_row(_copy_row(record.id, sample))


def _copy_row(run_id: uuid.UUID, sample: SampleRecord) -> list[Any]:
    values = _sample_values(run_id, sample)
    return [Jsonb(values[c]) if c in JSON_COLUMNS else values[c] for c in SAMPLE_COLUMNS]


def async_commit(store: StoreRun) -> StoreRun:
    """(For scale, not proposed:) what the WAL flush at each commit costs on PostgreSQL."""

    def call(session: Session, record: RunRecord, now: datetime) -> bool:
        if session.get_bind().dialect.name == "postgresql":
            session.execute(text("SET LOCAL synchronous_commit = off"))
        return store(session, record, now)

    return call


def ingest_ladder() -> list[tuple[str, StoreRun]]:
    """The app's ``store_run``, then each proposed change added to the ones before."""
    fast = run_values_at_once
    return [
        ("0. store_run as is", store_run),
        ("1. + run INSERT built once", store_run_prepared),
        ("2. + target ids cached", CachedTargets()),
        ("3. + samples by COPY (PostgreSQL)", CachedTargets(copy_samples)),
        ("4. + summary in one np.percentile", CachedTargets(copy_samples, fast)),
        (
            "(4. + synchronous_commit off)",
            async_commit(CachedTargets(copy_samples, run_values_at_once)),
        ),
    ]


def run_values_at_once(record: RunRecord, target: int) -> dict[str, Any]:
    """``_run_values`` with ``summarize_at_once`` (4.)."""
    summary = summarize_at_once(record.samples).to_json()
    total = summary["total"]
    return {
        "id": record.id,
        "target_id": target,
        "vantage": record.vantage,
        "started_at": record.started_at,
        "status": record.status,
        "scheduled_at": record.scheduled_at,
        "finished_at": record.finished_at,
        "n_samples": len(record.samples),
        "n_ok": sum(s.status == "ok" for s in record.samples),
        "n_errors": summary["errors"],
        "n_deadline_exceeded": summary["deadline_exceeded"],
        "dominant_phase": summary["dominant"],
        **{f"total_{q}": total.get(q) for q in QUANTILES},
        "summary": summary,
    }


def check_summaries(runs: Sequence[RunRecord]) -> None:
    """``summarize_at_once`` must say exactly what the app's ``summarize`` says."""
    for record in runs:
        assert summarize_at_once(record.samples).to_json() == record.summary(), record.id
        assert run_values_at_once(record, 1) == _run_values(record, 1), record.id


def summarize_at_once(samples: Sequence[SampleRecord]) -> Summary:
    """``app.analysis.summary.summarize`` with one ``np.percentile`` for every phase at once.

    The same numbers (checked by ``check_summaries``); a run's phases and total form one
    matrix instead of a percentile call per phase.
    """
    timed = [s for s in samples if s.status in TIMED]
    names = list(dict.fromkeys(name for s in timed for name in s.phases))
    rows = [[s.phases.get(name, 0.0) for name in names] + [s.total_ms] for s in timed]
    found = np.percentile(np.asarray(rows, dtype=float), list(QUANTILES.values()), axis=0)
    columns = [dict(zip(QUANTILES, map(float, column), strict=True)) for column in found.T]
    columns = columns if timed else []
    per_phase = dict(zip(names, columns, strict=False))
    phase_shares = shares({name: q["p50"] for name, q in per_phase.items()})
    return Summary(
        n=len(timed),
        errors=sum(s.status in FAILED for s in samples),
        deadline_exceeded=sum(s.status == Status.DEADLINE_EXCEEDED for s in samples),
        total=columns[-1] if columns else {},
        phases={name: PhaseStats(per_phase[name], phase_shares[name]) for name in names},
        dominant=dominant_of(phase_shares),
    )


# --- pruning ----------------------------------------------------------------------------------


def candidate_prune_samples(
    engine: Engine, before: datetime, rows_per_batch: int = 500, pause_s: float = 0.05
) -> int:
    """Proposed for ``app.store.queries.prune_samples``.

    Deletes the oldest samples by time range, through ``ix_samples_started_at``, instead
    of ``SELECT DISTINCT run_id ... LIMIT``, which both databases answer by walking the
    primary key in run-id order and reading every row's time until enough old runs turn
    up: a scan that grows as the old rows go and, once none is left, reads the whole
    table. ``floor`` keeps each batch from re-walking what the previous ones deleted
    (dead index entries, on PostgreSQL); the pause between batches lets a writer waiting
    on SQLite's write lock in (its busy handler sleeps in steps of up to 100 ms, and the
    lock is not handed over fairly).
    """
    deleted = 0
    floor: datetime | None = None
    while True:
        with Session(engine) as session, session.begin():
            older = SampleRow.started_at < before
            if floor is not None:
                older = older & (SampleRow.started_at >= floor)
            oldest = select(SampleRow.started_at).where(older).order_by(SampleRow.started_at)
            edge = session.scalar(oldest.offset(rows_per_batch).limit(1))
            upto = SampleRow.started_at < edge if edge is not None else older
            result = session.execute(delete(SampleRow).where(older, upto))
            count = result.rowcount  # type: ignore[attr-defined]
            if count == 0 and edge is not None:  # more than a batch share one time
                result = session.execute(delete(SampleRow).where(SampleRow.started_at == edge))
                count = result.rowcount  # type: ignore[attr-defined]
        deleted += int(count)
        if edge is None:
            return deleted
        floor = edge
        time.sleep(pause_s)
