"""The store's functions as they were before the storage changes (commit 2138264), and the
candidates not (yet) made, so the benchmarks measure them beside the app's own.

Nothing in ``app/`` imports this module. ``bench.store_ingest --candidates`` and
``bench.store_prune --before`` use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, Table, delete, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from app.analysis.summary import (
    FAILED,
    QUANTILES,
    TIMED,
    PhaseStats,
    Summary,
    percentiles,
    shares,
)
from app.analysis.summary import dominant_phase as dominant_of
from app.probe.sample import Status
from app.store.ingest import _sample_values, store_run
from app.store.models import RunRow, SampleRow
from app.store.records import RunRecord, SampleRecord
from app.store.targets import target_id

StoreRun = Callable[[Session, RunRecord, datetime], bool]
RUNS: Table = RunRow.__table__  # type: ignore[assignment]
SAMPLES: Table = SampleRow.__table__  # type: ignore[assignment]
SAMPLE_COLUMNS = [c.name for c in SAMPLES.c]
JSON_COLUMNS = {"phases", "provenance", "marks", "details"}


# --- ingest -----------------------------------------------------------------------------------


def async_commit(store: StoreRun) -> StoreRun:
    """(For scale, not proposed:) what the WAL flush at each commit costs on PostgreSQL."""

    def call(session: Session, record: RunRecord, now: datetime) -> bool:
        if session.get_bind().dialect.name == "postgresql":
            session.execute(text("SET LOCAL synchronous_commit = off"))
        return store(session, record, now)

    return call


def store_run_before(session: Session, record: RunRecord, now: datetime) -> bool:
    """``store_run`` as it was before these changes (commit 2138264), for comparison."""
    values = _run_values_before(record, target_id(session, record.target, now))
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    statement = insert(RunRow).values(values).on_conflict_do_nothing(index_elements=["id"])
    if session.scalar(statement.returning(RunRow.id)) is None:
        return False
    if record.samples:
        session.execute(SAMPLES.insert(), [_sample_values(record.id, s) for s in record.samples])
    return True


def _run_values_before(record: RunRecord, target: int) -> dict[str, Any]:
    summary = summarize_per_phase(record.samples)
    total = summary["total"]
    return {
        "id": record.id,
        "target_id": target,
        "vantage": record.vantage,
        "scheduled_at": record.scheduled_at,
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        "status": record.status,
        "n_samples": len(record.samples),
        "n_ok": sum(s.status == "ok" for s in record.samples),
        "n_errors": summary["errors"],
        "n_deadline_exceeded": summary["deadline_exceeded"],
        "dominant_phase": summary["dominant"],
        **{f"total_{q}": total.get(q) for q in QUANTILES},
        "summary": summary,
    }


def summarize_per_phase(samples: Sequence[SampleRecord]) -> dict[str, Any]:
    """The summary as it was taken before: ``np.percentile`` once per phase."""
    timed = [s for s in samples if s.status in TIMED]
    names = list(dict.fromkeys(name for s in timed for name in s.phases))
    per_phase = {name: percentiles([s.phases.get(name, 0.0) for s in timed]) for name in names}
    phase_shares = shares({name: q["p50"] for name, q in per_phase.items()})
    return Summary(
        n=len(timed),
        errors=sum(s.status in FAILED for s in samples),
        deadline_exceeded=sum(s.status == Status.DEADLINE_EXCEEDED for s in samples),
        total=percentiles([s.total_ms for s in timed]),
        phases={name: PhaseStats(per_phase[name], phase_shares[name]) for name in names},
        dominant=dominant_of(phase_shares),
    ).to_json()


def ingest_ladder() -> list[tuple[str, StoreRun]]:
    """Before, the app's ``store_run`` now, and what is still only a candidate."""
    return [
        ("before: store_run of 2138264", store_run_before),
        ("now: store_run", store_run),
        ("(now + synchronous_commit off, for scale)", async_commit(store_run)),
    ]


def check_summaries(runs: Sequence[RunRecord]) -> None:
    """The app's summary (one ``np.percentile``) must say exactly what the old one said;
    the LLM metrics (issue 39) came after the old one and are left out of the comparison."""
    for record in runs:
        summary = {k: v for k, v in record.summary().items() if k != "llm"}
        assert summary == summarize_per_phase(record.samples), record.id


# --- pruning ----------------------------------------------------------------------------------


def prune_samples_before(engine: Engine, before: datetime, runs_per_batch: int = 20) -> int:
    """``prune_samples`` as it was before (commit 2138264), for comparison: it finds old runs
    by ``SELECT DISTINCT run_id ... LIMIT``, which walks the primary key in run-id order."""
    deleted = 0
    while True:
        with Session(engine) as session, session.begin():
            runs = session.scalars(
                select(SampleRow.run_id)
                .where(SampleRow.started_at < before)
                .distinct()
                .limit(runs_per_batch)
            ).all()
            if not runs:
                return deleted
            result = session.execute(
                delete(SampleRow).where(SampleRow.run_id.in_(runs), SampleRow.started_at < before)
            )
            deleted += result.rowcount  # type: ignore[attr-defined]
