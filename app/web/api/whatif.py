"""/api/v1 — what-if: one target's measured samples resampled with changes applied, and the
levers now (what each phase halved or removed would give).

A what-if changes nothing: it is a read, and like every read it needs no token (it is a
POST only because its changes are a body). Its work is bounded (app/web/whatifrequest.py)
and done in a worker process (app.runtime.workers), as the levers' is: the handlers only
check the target on the event loop's threads and wait. When every worker is busy and
``whatif_queue`` more wait, the next is a 429 with ``Retry-After``; a worker that died
mid-call (killed, out of memory) is a 503 with ``Retry-After``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Query, status
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from app.analysis.whatif.levers import headline
from app.runtime.workers import Busy, WorkerLost, Workers
from app.store.db import Session
from app.web.api.params import (
    NO_NUL,
    TIME_HELP,
    VantageParam,
    Window,
    bad_request,
    check_vantage,
    make_window,
    target_id_or_404,
)
from app.web.deps import ServiceDep, SessionDep, WorkersDep
from app.web.errors import ErrorOut, errors
from app.web.whatifrequest import (
    DEFAULT_RESAMPLES,
    DEFAULT_SPAN,
    MAX_CHANGES,
    MAX_RESAMPLES,
    ChangeError,
    NoSamples,
    Scope,
    levers_job,
    what_if_job,
)
from app.web.whatifschemas import LeversOut, WhatIfOut

T = TypeVar("T")
router = APIRouter(tags=["what-if"])

NO_SAMPLES = "The window holds no timed sample of the target."
BOUND_KEYS = ("p50_ms", "p90_ms", "p99_ms", "miss_rate")
WHATIF_ERRORS = errors(
    404,
    409,
    422,
    not_found="No target has this name (or the vantage never ran it).",
    conflict=NO_SAMPLES,
) | {
    429: {
        "model": ErrorOut,
        "description": "Every what-if worker is busy and the queue full: ask again after"
        " Retry-After seconds.",
    },
    503: {
        "model": ErrorOut,
        "description": "The worker computing it died (killed, out of memory): ask again"
        " after Retry-After seconds.",
    },
}
LOST_RETRY_S = 5
CHANGE_HELP = (
    'a change as the CLI writes it ("network=15ms", "generation*1.5", "queue=0",'
    ' "generation=@other-target", "cold=12%:800-2500ms", "deadline=1500ms") or as JSON'
    ' ({"phase": "network", "set_ms": 15}, {"phase": "generation", "scale": 1.5},'
    ' {"cold": {"fraction": 0.12, "min_ms": 800, "max_ms": 2500}}, {"deadline_ms": 1500})'
)


def lever_window(
    from_: Annotated[str | None, Query(alias="from", description=TIME_HELP)] = None,
    to: Annotated[str | None, Query(description=f"{TIME_HELP}; default now")] = None,
) -> Window:
    """[from, to): by default the last 7 days, as a what-if's."""
    return make_window(from_, to, DEFAULT_SPAN)


LeverWindowDep = Annotated[Window, Depends(lever_window)]
Change = Annotated[str, Field(max_length=500, pattern=NO_NUL)] | dict[str, Any]


class WhatIfBody(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    changes: list[Change] = Field(max_length=MAX_CHANGES, description=CHANGE_HELP)
    vantage: str | None = Field(None, min_length=1, max_length=200, pattern=NO_NUL)
    from_: str | None = Field(None, alias="from", max_length=100, description=TIME_HELP)
    to: str | None = Field(None, max_length=100, description=f"{TIME_HELP}; default now")
    resamples: int = Field(DEFAULT_RESAMPLES, ge=10, le=MAX_RESAMPLES)


@router.post("/targets/{name:path}/whatif", response_model=WhatIfOut, responses=WHATIF_ERRORS)
async def post_whatif(
    name: str, body: WhatIfBody, session: SessionDep, service: ServiceDep, workers: WorkersDep
) -> dict[str, Any]:
    """End-to-end p50/p90/p99 (with 95 % intervals), the deadline-miss rate, each phase's
    share and the dominant phase, before and after ``changes``, over [from, to) (default: the
    last 7 days), one vantage or all pooled; and the levers now."""
    window = make_window(body.from_, body.to, DEFAULT_SPAN)
    scope = await run_in_threadpool(_scope, session, name, body.vantage, window)
    job = (service.resolved.database_url, scope, body.changes, body.resamples)
    try:
        answer: dict[str, Any] = await _in_worker(
            workers, what_if_job, *job, service.settings.whatif_max_samples
        )
    except ChangeError as exc:
        raise bad_request(f"change {exc.token!r}: {exc.reason}") from None
    return answer


@router.get("/targets/{name:path}/levers", response_model=LeversOut, responses=WHATIF_ERRORS)
async def get_levers(
    name: str,
    session: SessionDep,
    service: ServiceDep,
    workers: WorkersDep,
    window: LeverWindowDep,
    vantage: VantageParam = None,
) -> dict[str, Any]:
    """For each phase, end-to-end p50/p90/p99 and the miss rate if it halved or vanished,
    the biggest lever first (by the p99 if halved), and each objective's share met and
    goodput's, with the phases ranked for each (``objective_levers``), over [from, to)
    (default: the last 7 days). Point estimates: a what-if of one lever gives its
    intervals."""
    scope = await run_in_threadpool(_scope, session, name, vantage, window)
    url, most = service.resolved.database_url, service.settings.whatif_max_samples
    found = await _in_worker(workers, levers_job, url, scope, most)
    return {
        "window": {"from": scope.start, "to": scope.end, "vantage": scope.vantage},
        "samples": found.samples,
        "now": {key: found.now.to_json()[key]["value"] for key in BOUND_KEYS},
        "headline": headline(found.levers, found.now.p99_ms.value, found.now.p50_ms.value),
        "levers": [lever.to_json() for lever in found.levers],
        "objective_levers": [ranked.to_json() for ranked in found.by_objective],
    }


def _scope(session: Session, name: str, vantage: str | None, window: Window) -> Scope:
    """404 for an unknown target or vantage; the session's connection is given back before
    the wait for a worker."""
    try:
        check_vantage(session, target_id_or_404(session, name), name, vantage)
    finally:
        session.close()
    return Scope(name, vantage, window.start, window.end)


async def _in_worker(workers: Workers, job: Callable[..., T], *args: Any) -> T:
    """``job(*args)`` in a worker: 409 without samples, 429 busy, 503 worker lost."""
    try:
        return await workers.run(job, *args)
    except NoSamples as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    except Busy as exc:
        headers = {"Retry-After": str(exc.retry_after_s)}
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, str(exc), headers) from None
    except WorkerLost as exc:
        headers = {"Retry-After": str(LOST_RETRY_S)}
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc), headers) from None
