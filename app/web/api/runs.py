"""/api/v1 — runs: newest first, paged by a keyset cursor; one run with its samples."""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from sqlalchemy import Select, and_, or_, select
from sqlalchemy.orm import Session

from app.store.models import RunRow, SampleRow, TargetRow
from app.web.api.params import (
    TARGET_ERRORS,
    CursorParam,
    LimitParam,
    TargetParam,
    VantageParam,
    WindowDep,
    cursor_uuid,
    decode_cursor,
    encode_cursor,
    not_found,
    target_id_or_404,
)
from app.web.deps import SessionDep
from app.web.errors import errors
from app.web.schemas import RunDetail, RunOut, RunPage, SampleOut, redacted_text

router = APIRouter(tags=["runs"])
RUN_ERRORS = errors(404, 422, not_found="No run has this id.")


@router.get("/runs", response_model=RunPage, responses=TARGET_ERRORS)
def list_runs(
    session: SessionDep,
    window: WindowDep,
    target: TargetParam = None,
    vantage: VantageParam = None,
    limit: LimitParam = 100,
    cursor: CursorParam = None,
) -> RunPage:
    """Runs that started in [from, to) (default: the last 24 hours), newest first."""
    query = _runs().where(RunRow.started_at >= window.start, RunRow.started_at < window.end)
    if target is not None:
        query = query.where(RunRow.target_id == target_id_or_404(session, target))
    if vantage is not None:
        query = query.where(RunRow.vantage == vantage)
    if cursor is not None:
        at, (last,) = decode_cursor(cursor, 1)
        before = and_(RunRow.started_at == at, RunRow.id < cursor_uuid(last, cursor))
        query = query.where(or_(RunRow.started_at < at, before))
    rows = session.execute(query.limit(limit + 1)).all()
    items = [run_out(run, name) for run, name in rows[:limit]]
    more = len(rows) > limit
    return RunPage(items=items, next_cursor=_cursor(items[-1]) if more else None)


@router.get("/runs/{run_id}", response_model=RunDetail, responses=RUN_ERRORS)
def get_run(run_id: uuid.UUID, session: SessionDep) -> RunDetail:
    """One run, its summary and its samples in the order they were taken."""
    found = session.execute(_runs().where(RunRow.id == run_id)).first()
    if found is None:
        raise not_found(f"no run {str(run_id)!r}")
    run, name = found
    return RunDetail(**run_out(run, name).model_dump(), samples=_samples(session, run, name))


def _runs() -> Select[RunRow, str]:
    return (
        select(RunRow, TargetRow.name)
        .join(TargetRow, TargetRow.id == RunRow.target_id)
        .order_by(RunRow.started_at.desc(), RunRow.id.desc())
    )


def _cursor(run: RunOut) -> str:
    return encode_cursor(run.started_at, run.id)


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


def _samples(session: Session, run: RunRow, target: str) -> list[SampleOut]:
    rows = session.scalars(
        select(SampleRow).where(SampleRow.run_id == run.id).order_by(SampleRow.idx)
    )
    return [sample_out(row, target, run.vantage) for row in rows]


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
    )
