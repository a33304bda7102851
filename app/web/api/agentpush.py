"""/api/v1/agent/runs and /batches — the runs an agent pushes.

A push is one ``RunRecord`` JSON; a batch is ``{"runs": [...]}``, at most
``MAX_BATCH_RUNS``, answered run by run (stored / duplicate / refused with its reason), so
one bad run does not refuse its batch mates. The agent may push only runs of its own
vantage and of targets assigned to it (403 for a single push, ``refused`` in a batch).
Ingestion is idempotent by run id. While the database is away the answer is 503 for the
whole push: the agent keeps every run and pushes it again.

Decompressing, parsing and storing happen on one worker thread per push, at most
``STORE_THREADS`` at once: the event loop only moves bytes, and twenty agents pushing
together queue here instead of each taking a connection (beyond the pool's, a new one)
and the interpreter's lock from the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import anyio
from fastapi import APIRouter, HTTPException, Request, Response, status

from app.agents.server.batches import Stored, store_batch
from app.agents.server.book import VantageBook
from app.agents.wire import (
    CONFIG_HEADER,
    MAX_BATCH_RUNS,
    SENT_AT_HEADER,
    BatchAnswer,
    Outcome,
    PushAnswer,
    RunOutcome,
)
from app.clock import utcnow
from app.runs.pipeline import Pipeline
from app.runtime.foreground import Foreground
from app.runtime.service import Service
from app.store.records import RunRecord
from app.web.api.agent import (
    PUSH_ERRORS,
    Assignments,
    AssignmentsDep,
    BookDep,
    VantageDep,
    agent_version,
    described,
)
from app.web.api.agentbody import invalid, json_of, too_large, wire_body
from app.web.deps import ServiceDep

router = APIRouter(prefix="/agent", tags=["agents"])
STORE_THREADS = 4
T = TypeVar("T")
BATCH_ERRORS = PUSH_ERRORS | described(
    (413, f"More than {MAX_BATCH_RUNS} runs, or a body larger than the server takes."),
    (422, 'The body is not `{"runs": [...]}`.'),
)


@router.post("/runs", response_model=PushAnswer, responses=PUSH_ERRORS)
async def push_run(
    service: ServiceDep,
    vantage: VantageDep,
    vantages: BookDep,
    built: AssignmentsDep,
    request: Request,
) -> Response:
    """Store one run the agent measured (``RunRecord`` JSON); a replay stores nothing."""
    now, version, work = await _received(service, vantage, vantages, built, request)
    stored = await _on_worker(request, _one, service.pipeline, *work)
    vantages.pushed(vantage, now, _sent_at(request), agent_version(request))
    return _answer(PushAnswer(stored=stored, config=version), version)


@router.post("/batches", response_model=BatchAnswer, responses=BATCH_ERRORS)
async def push_batch(
    service: ServiceDep,
    vantage: VantageDep,
    vantages: BookDep,
    built: AssignmentsDep,
    request: Request,
) -> Response:
    """Store several runs (``{"runs": [RunRecord JSON, ...]}``); each run's outcome in order."""
    now, version, work = await _received(service, vantage, vantages, built, request)
    taken = await _on_worker(request, _batch, service.pipeline, *work)
    results = [_outcome(record, outcome) for record, outcome in taken]
    accepted = sum(r.outcome != Outcome.REFUSED for r in results)
    vantages.pushed(vantage, now, _sent_at(request), agent_version(request), accepted)
    return _answer(BatchAnswer(results=results, config=version), version)


async def _received(
    service: Service, vantage: str, vantages: VantageBook, built: Assignments, request: Request
) -> tuple[datetime, str, tuple[_Check, bytes, bool]]:
    """What either push route does first: admit the vantage, read the body, and check runs
    against its assignment. The receive time, the assignment's version, the worker's work."""
    _admit(vantages, vantage)
    data, gzipped = await wire_body(request)
    now = utcnow()
    current, names = built.get(service, vantage)
    return now, current.version, (_Check(vantage, names, _after_store(request)), data, gzipped)


class _Check:
    """Whether a run is this agent's to push (its vantage, a target assigned to it), and
    what follows a run stored now."""

    def __init__(
        self, vantage: str, names: frozenset[str], after: Callable[[RunRecord], None]
    ) -> None:
        self.vantage, self.names, self.after = vantage, names, after

    def refusal(self, record: RunRecord) -> str | None:
        if record.vantage != self.vantage:
            return "this token writes only its own vantage"
        if record.target not in self.names:
            return "that target is not assigned here"
        return None


def _one(pipeline: Pipeline, check: _Check, data: bytes, gzipped: bool) -> bool:
    record = _run_of(json_of(data, gzipped))
    refusal = check.refusal(record)
    if refusal is not None:
        raise HTTPException(status.HTTP_403_FORBIDDEN, refusal)
    (stored,) = _store(pipeline, [record])
    if isinstance(stored, str):
        raise invalid(stored)
    if stored:
        check.after(record)
    return stored


def _batch(
    pipeline: Pipeline, check: _Check, data: bytes, gzipped: bool
) -> list[tuple[RunRecord | Any, Stored]]:
    """Each item with its outcome; those refused before the database are not stored."""
    checked: list[tuple[RunRecord | Any, str | None]] = []
    for item in _runs_of(json_of(data, gzipped)):
        try:
            record = _run_of(item)
        except HTTPException as exc:
            checked.append((item, str(exc.detail)))
        else:
            checked.append((record, check.refusal(record)))
    stored = iter(_store(pipeline, [item for item, refusal in checked if refusal is None]))
    taken = [(item, next(stored) if refusal is None else refusal) for item, refusal in checked]
    for item, outcome in taken:
        if outcome is True:
            check.after(item)
    return taken


def _runs_of(body: Any) -> list[Any]:
    runs = body.get("runs") if isinstance(body, dict) else None
    if not isinstance(runs, list):
        raise invalid('the body is not a batch: {"runs": [...]}')
    if len(runs) > MAX_BATCH_RUNS:
        raise too_large()
    return runs


def _run_of(data: Any) -> RunRecord:
    try:
        if not isinstance(data, dict):
            raise TypeError("not an object")
        return RunRecord.from_json(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise invalid(f"the body is not a run: {type(exc).__name__}") from exc


def _store(pipeline: Pipeline, records: list[RunRecord]) -> list[Stored]:
    if not records:
        return []
    if not pipeline.ready.is_set():
        raise _away("the database has no schema yet")
    try:
        return store_batch(pipeline, records)
    except Exception as exc:
        if not pipeline.transient(exc):
            raise
        raise _away("the database is unreachable") from exc


def _outcome(item: RunRecord | Any, stored: Stored) -> RunOutcome:
    if isinstance(item, RunRecord):
        run_id: str | None = str(item.id)
    else:
        found = item.get("id") if isinstance(item, dict) else None
        run_id = found if isinstance(found, str) else None
    if isinstance(stored, str):
        return RunOutcome(id=run_id, outcome=Outcome.REFUSED, reason=stored)
    return RunOutcome(id=run_id, outcome=Outcome.STORED if stored else Outcome.DUPLICATE)


def _after_store(request: Request) -> Callable[[RunRecord], None]:
    metrics, evaluations = request.app.state.metrics, request.app.state.evaluations

    def after(record: RunRecord) -> None:
        metrics.observe_run(record)
        evaluations.submit(record)  # the push does not wait for it

    return after


async def _on_worker(request: Request, work: Callable[..., T], *args: Any) -> T:
    """``work(*args)`` on a push thread, while background work holds back
    (``app.runtime.foreground``)."""
    state = request.app.state
    if getattr(state, "push_threads", None) is None:  # made in the loop that uses it
        state.push_threads = anyio.CapacityLimiter(STORE_THREADS)
    limiter: anyio.CapacityLimiter = state.push_threads
    foreground: Foreground = state.foreground
    with foreground.serving():
        return await anyio.to_thread.run_sync(work, *args, limiter=limiter)


def _admit(vantages: VantageBook, vantage: str) -> None:
    if not vantages.admit(vantage, time.monotonic()):
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            "over this vantage's push limit",
            headers={"Retry-After": "1"},
        )


def _answer(answer: PushAnswer | BatchAnswer, version: str) -> Response:
    return Response(
        answer.model_dump_json(), media_type="application/json", headers={CONFIG_HEADER: version}
    )


def _away(why: str) -> HTTPException:
    return HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, why, headers={"Retry-After": "5"})


def _sent_at(request: Request) -> datetime | None:
    try:
        sent = datetime.fromisoformat(request.headers.get(SENT_AT_HEADER, ""))
    except ValueError:
        return None
    return sent if sent.tzinfo is not None else None
