"""/api/v1 — runs: newest first, paged by a keyset cursor; one run with its samples."""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from app.analysis.llmmetrics import sample_llm_values
from app.analysis.objectives import Seen
from app.store.models import RunRow, SampleRow
from app.store.reads.browse import run_with_target, runs_count, runs_page, samples_of
from app.store.reads.objectives import run_objectives
from app.web.api.params import (
    TARGET_ERRORS,
    BrowseDep,
    not_found,
)
from app.web.deps import SessionDep
from app.web.errors import errors
from app.web.schemas import (
    RunDetail,
    RunObjectiveOut,
    RunOut,
    RunPage,
    SampleOut,
    redacted_text,
)

router = APIRouter(tags=["runs"])
RUN_ERRORS = errors(404, 422, not_found="No run has this id.")


@router.get("/runs", response_model=RunPage, responses=TARGET_ERRORS)
def list_runs(session: SessionDep, browse: BrowseDep) -> RunPage:
    """Runs that started in [from, to) (default: the last 24 hours), newest first."""
    rows, after, count = browse.page(session, runs_page, runs_count)
    return RunPage(items=[run_out(run, name) for run, name in rows], next_cursor=after, total=count)


@router.get("/runs/{run_id}", response_model=RunDetail, responses=RUN_ERRORS)
def get_run(run_id: uuid.UUID, session: SessionDep) -> RunDetail:
    """One run, its summary and its samples in the order they were taken; with the
    target's objectives, the run against each and its goodput."""
    found = run_with_target(session, run_id)
    if found is None:
        raise not_found(f"no run {str(run_id)!r}")
    run, name = found
    rows = samples_of(session, run.id)
    samples = [sample_out(row, name, run.vantage) for row in rows]
    detail = RunDetail(**run_out(run, name).model_dump(), samples=samples)
    judged = run_objectives(session, run, _records(rows) if len(rows) == run.n_samples else None)
    if judged is None:
        return detail
    tallies, goodput = judged
    objectives = [
        RunObjectiveOut(metric=m, counted=t.counted, bad=t.bad) for m, t in tallies.items()
    ]
    return detail.model_copy(update={"objectives": objectives, "goodput": goodput})


def _records(rows: list[SampleRow]) -> list[Seen]:
    return [(row.status, row.total_ms, row.marks, row.details) for row in rows]


def run_out(run: RunRow, target: str) -> RunOut:
    return RunOut(
        id=run.id,
        target=target,
        vantage=run.vantage,
        status=run.status,
        scheduled_at=run.scheduled_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        n_samples=run.n_samples,
        n_ok=run.n_ok,
        n_errors=run.n_errors,
        n_deadline_exceeded=run.n_deadline_exceeded,
        dominant_phase=run.dominant_phase,
        total={
            "p50": run.total_p50,
            "p90": run.total_p90,
            "p95": run.total_p95,
            "p99": run.total_p99,
        },
        summary=run.summary,
    )


def sample_out(row: SampleRow, target: str, vantage: str) -> SampleOut:
    return SampleOut(
        run_id=row.run_id,
        target=target,
        vantage=vantage,
        idx=row.idx,
        started_at=row.started_at,
        status=row.status,
        http_status=row.http_status,
        error_class=row.error_class,
        error=redacted_text(row.error),
        total_ms=row.total_ms,
        phases=row.phases,
        provenance=row.provenance,
        marks=row.marks,
        details=row.details,
        llm=sample_llm_values(row),
    )
