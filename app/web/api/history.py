"""/api/v1 — history: a bucketed time series of one target, columnar as charts draw it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.analysis.series import pick_bucket
from app.clock import utcnow
from app.durations import parse_duration
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
    "a duration, a whole number of minutes up to 366 days: `15m`, `1h`, `1d`, or seconds"
    " (`900`); default: the finest step that gives at most 500 buckets and is no finer than"
    " the target's interval"
)
MAX_BUCKET_S = 366 * 86400


def bucket_seconds(text: str) -> int:
    """A bucket as a user writes it (``15m``, ``900``), in whole minutes, else a 400."""
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise bad_request(f"bucket: {exc}") from None
    if seconds < 60 or seconds > MAX_BUCKET_S or seconds % 60:
        raise bad_request(
            f"bucket must be a whole number of minutes from 1m to 366d, not {text.strip()!r}"
        )
    return int(seconds)


@router.get("/targets/{name:path}/history", response_model=HistoryOut, responses=TARGET_ERRORS)
def get_history(
    name: str,
    session: SessionDep,
    window: WindowDep,
    vantage: VantageParam = None,
    bucket: Annotated[
        str | None,
        Query(
            max_length=32, pattern=r"^\s*\d+(\.\d+)?\s*(ms|s|m|h|d)?\s*$", description=BUCKET_HELP
        ),
    ] = None,
) -> HistoryOut:
    """Per bucket: runs, samples, errors, deadline misses, end-to-end and per-phase
    p50/p90/p95/p99, shares and the dominant phase; null where a bucket has no run.

    Buckets are aligned to the UTC epoch (the first may start before ``from``). Each
    bucket's quantiles are those of all its samples, within 1 %: merged from the rollups
    (5 min … 1 day) or, for 1-minute buckets and for 5- and 15-minute steps in windows older
    than 35 days, from the runs' digests.
    """
    chosen = None if bucket is None else bucket_seconds(bucket)
    target = target_id_or_404(session, name)
    interval = interval_of(session, target)
    step = chosen or pick_bucket(window.start, window.end, interval or 0.0)
    count = bucket_count(window.start, window.end, step)
    if count > MAX_BUCKETS:
        raise bad_request(
            f"{count} buckets of {step} s: at most {MAX_BUCKETS}; widen the bucket or narrow"
            " the window"
        )
    check_vantage(session, target, name, vantage)
    found = time_series(session, name, window.start, window.end, vantage, step, now=utcnow())
    return HistoryOut.model_validate(found.to_json())
