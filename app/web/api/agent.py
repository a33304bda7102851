"""/api/v1/agent — what agents fetch (their assignment) and push (runs, their status).

An agent names its vantage (``X-Phasewatch-Vantage``) and shows that vantage's token (bearer,
compared in constant time); it may write only runs of its own vantage and of targets
assigned to it (403 otherwise). A push is one ``RunRecord`` JSON, gzip accepted, bounded in
size before and after decompression (413). Ingestion is idempotent by run id: a replayed
push answers ``stored: false`` and stores nothing. While the database is away the answer is
503: the agent keeps the run in its own spool and pushes it again.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request, Response, status
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.agent.wire import (
    CONFIG_HEADER,
    SENT_AT_HEADER,
    TARGET_FIELDS_KEPT_BACK,
    VANTAGE_HEADER,
    VERSION_HEADER,
    AgentStatus,
    Assignment,
    PushAnswer,
    assignment_version,
)
from app.clock import utcnow
from app.config import TargetsFile
from app.evaluations import Evaluations
from app.metrics import RunMetrics
from app.pipeline import is_transient
from app.service import Service
from app.store.records import RunRecord
from app.vantagebook import VantageBook
from app.vantages import assigned, shortest_interval, token_of
from app.web.deps import ServiceDep
from app.web.errors import ErrorOut
from app.web.vantagemetrics import VantageCollector

router = APIRouter(prefix="/agent", tags=["agents"])
MAX_WIRE_BYTES = 4 << 20  # a push as sent (compressed)
MAX_RUN_BYTES = 32 << 20  # and as read: 10,000 samples of a chatty run fit
REFRESH_S = 30.0
_bearer = HTTPBearer(
    auto_error=False, scheme_name="AgentToken", description="The agent's token, one per vantage."
)


def install(app: FastAPI, service: Service, observed: RunMetrics) -> None:
    """What these routes keep between requests, on ``app.state``; the vantages' gauges."""
    app.state.vantages = book = VantageBook()
    app.state.assignments = Assignments()
    app.state.evaluations = Evaluations(service.alerts.evaluate_after)
    shortest = partial(_shortest, service)
    observed.registry.register(VantageCollector(book, shortest))


def _shortest(service: Service, vantage: str) -> float | None:
    return shortest_interval(service.targets.targets, vantage)


def _described(*pairs: tuple[int, str]) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorOut, "description": text} for code, text in pairs}


AUTH_ERRORS = _described(
    (401, "No token, an unknown vantage, or a token that is not this vantage's."),
)
PUSH_ERRORS = AUTH_ERRORS | _described(
    (403, "The run is of another vantage, or of a target not assigned to this one."),
    (413, "The push is larger than the server takes."),
    (415, "The body's encoding is neither gzip nor identity."),
    (422, "The body is not a run (`RunRecord` JSON)."),
    (429, "This vantage pushes faster than its limit: push again later (Retry-After)."),
    (503, "The database is away: push the run again later (Retry-After)."),
)


async def book(request: Request) -> VantageBook:
    found: VantageBook = request.app.state.vantages
    return found


BookDep = Annotated[VantageBook, Depends(book)]


async def agent_vantage(
    service: ServiceDep,
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    vantage = request.headers.get(VANTAGE_HEADER, "")
    given = credentials.credentials if credentials is not None else ""
    if not token_of(service.targets.vantages, vantage, given):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            f"an agent needs {VANTAGE_HEADER} and that vantage's bearer token",
            headers={"WWW-Authenticate": 'Bearer realm="phasewatch-agent"'},
        )
    return vantage


VantageDep = Annotated[str, Depends(agent_vantage)]


def assignment(service: Service, vantage: str) -> Assignment:
    targets = []
    for target in assigned(service.targets.targets, vantage):
        kept_back = set(TARGET_FIELDS_KEPT_BACK)
        if "follow_redirects" not in target.model_fields_set:
            # Its default is refused when set on an openai or anthropic target: leave it out.
            kept_back.add("follow_redirects")
        sent = target.model_dump(mode="json", exclude=kept_back)
        targets.append(sent)  # headers are templates: see app.vantages
    return Assignment(
        vantage=vantage,
        version=assignment_version(targets),
        refresh_s=REFRESH_S,
        targets=targets,
    )


@dataclass
class Assignments:
    """Each vantage's assignment, built once per targets file (a reload makes a new one):
    a push checks its target against it without dumping every target again."""

    _for: TargetsFile | None = None
    _built: dict[str, tuple[Assignment, frozenset[str]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, service: Service, vantage: str) -> tuple[Assignment, frozenset[str]]:
        with self._lock:
            if self._for is not service.targets:
                self._for, self._built = service.targets, {}
            found = self._built.get(vantage)
            if found is None:
                made = assignment(service, vantage)
                found = made, frozenset(str(t["name"]) for t in made.targets)
                self._built[vantage] = found
            return found


async def assignments(request: Request) -> Assignments:
    found: Assignments = request.app.state.assignments
    return found


AssignmentsDep = Annotated[Assignments, Depends(assignments)]


@router.get("/config", response_model=Assignment, responses=AUTH_ERRORS)
def get_config(
    service: ServiceDep,
    vantage: VantageDep,
    vantages: BookDep,
    built: AssignmentsDep,
    request: Request,
) -> Assignment:
    """The targets this agent probes, with header templates (never their values)."""
    state = vantages.get(vantage)
    vantages.reported(vantage, utcnow(), state.refused, state.pending, _version(request))
    return built.get(service, vantage)[0]


@router.post("/status", status_code=204, responses=AUTH_ERRORS | _described((422, "Not valid.")))
def post_status(
    report: AgentStatus, vantage: VantageDep, vantages: BookDep, request: Request
) -> Response:
    """What the agent refused to probe (a variable it lacks) and what its spool holds."""
    vantages.reported(vantage, utcnow(), report.refused, report.pending, _version(request))
    return Response(status_code=204)


@router.post("/runs", response_model=PushAnswer, responses=PUSH_ERRORS)
async def push_run(
    service: ServiceDep,
    vantage: VantageDep,
    vantages: BookDep,
    built: AssignmentsDep,
    request: Request,
) -> Response:
    """Store one run the agent measured (``RunRecord`` JSON); a replay stores nothing."""
    if not vantages.admit(vantage, time.monotonic()):
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            "over this vantage's push limit",
            headers={"Retry-After": "1"},
        )
    record = _run_of(await _body(request))
    now = utcnow()
    current, names = built.get(service, vantage)
    if record.vantage != vantage:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this token writes only its own vantage")
    if record.target not in names:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "that target is not assigned here")
    stored = await run_in_threadpool(_store, service, record)
    if stored:
        request.app.state.metrics.observe_run(record)
        request.app.state.evaluations.submit(record)  # the push does not wait for it
    vantages.pushed(vantage, now, _sent_at(request), _version(request))
    answer = PushAnswer(stored=stored, config=current.version)
    return Response(
        answer.model_dump_json(),
        media_type="application/json",
        headers={CONFIG_HEADER: current.version},
    )


def _store(service: Service, record: RunRecord) -> bool:
    pipeline = service.pipeline
    if not pipeline.ready.is_set():
        raise _away("the database has no schema yet")
    try:
        stored = pipeline.store(record)
    except Exception as exc:
        if not is_transient(exc):
            raise
        raise _away("the database is unreachable") from exc
    return stored


def _away(why: str) -> HTTPException:
    return HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, why, headers={"Retry-After": "5"})


async def _body(request: Request) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_WIRE_BYTES:
        raise _too_large()
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_WIRE_BYTES:
            raise _too_large()
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding == "gzip":
        return _gunzip(bytes(data))
    if encoding != "identity":
        raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, "send gzip or identity")
    if len(data) > MAX_RUN_BYTES:
        raise _too_large()
    return bytes(data)


def _gunzip(data: bytes) -> bytes:
    # Bounded: a small bomb must not become gigabytes here.
    inflate = zlib.decompressobj(wbits=31)
    try:
        out = inflate.decompress(data, MAX_RUN_BYTES + 1)
    except zlib.error as exc:
        raise _invalid("the body is not gzip") from exc
    if len(out) > MAX_RUN_BYTES or inflate.unconsumed_tail:
        raise _too_large()
    if not inflate.eof:
        raise _invalid("the gzip body is cut short")
    return out


def _run_of(body: bytes) -> RunRecord:
    try:
        data = json.loads(body)
        if not isinstance(data, dict):
            raise TypeError("not an object")
        return RunRecord.from_json(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise _invalid(f"the body is not a run: {type(exc).__name__}") from exc


def _invalid(why: str) -> HTTPException:
    return HTTPException(422, why)


def _too_large() -> HTTPException:
    limits = f"{MAX_WIRE_BYTES} bytes sent, {MAX_RUN_BYTES} read"
    return HTTPException(413, f"at most {limits}")


def _sent_at(request: Request) -> datetime | None:
    try:
        sent = datetime.fromisoformat(request.headers.get(SENT_AT_HEADER, ""))
    except ValueError:
        return None
    return sent if sent.tzinfo is not None else None


def _version(request: Request) -> str | None:
    return request.headers.get(VERSION_HEADER) or None
