"""/api/v1 — history: a bucketed time series of one target, columnar as charts draw it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.analysis.series import pick_bucket
from app.clock import utcnow
from app.store.reads.timeseries import bucket_count, time_series
from app.store.targets import interval_of
from app.web.api.params import (
    TARGET_ERRORS,
    VantageParam,
    WindowDep,
    bad_request,
    check_vantage,
    target_id_or_404,
)
from app.web.deps import SessionDep
from app.web.schemas import HistoryOut

router = APIRouter(tags=["history"])

MAX_BUCKETS = 2000
BUCKET_HELP = (
    "seconds, a multiple of 60; default: the finest step that gives at most 500 buckets and"
    " is no finer than the target's interval"
)


@router.get("/targets/{name:path}/history", response_model=HistoryOut, responses=TARGET_ERRORS)
def get_history(
    name: str,
    session: SessionDep,
    window: WindowDep,
    vantage: VantageParam = None,
    bucket: Annotated[int | None, Query(ge=60, le=366 * 86400, description=BUCKET_HELP)] = None,
) -> HistoryOut:
    """Per bucket: runs, samples, errors, deadline misses, end-to-end and per-phase
    p50/p90/p95/p99, shares and the dominant phase; null where a bucket has no run.

    Buckets are aligned to the UTC epoch (the first may start before ``from``). Each
    bucket's quantiles are those of all its samples, within 1 %: merged from the rollups
    (5 min … 1 day) or, for 1-minute buckets and for 5- and 15-minute steps in windows older
    than 35 days, from the runs' digests.
    """
    if bucket is not None and bucket % 60:
        raise bad_request(f"bucket must be a multiple of 60 seconds, not {bucket}")
    target = target_id_or_404(session, name)
    interval = interval_of(session, target)
    step = bucket or pick_bucket(window.start, window.end, interval or 0.0)
    count = bucket_count(window.start, window.end, step)
    if count > MAX_BUCKETS:
        raise bad_request(
            f"{count} buckets of {step} s: at most {MAX_BUCKETS}; widen the bucket or narrow"
            " the window"
        )
    check_vantage(session, target, name, vantage)
    found = time_series(session, name, window.start, window.end, vantage, step, now=utcnow())
    return HistoryOut.model_validate(found.to_json())
