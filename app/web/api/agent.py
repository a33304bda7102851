"""/api/v1/agent — what agents fetch (their assignment) and report (their status); the
runs they push are ``app.web.api.agentpush``'s.

An agent names its vantage (``X-Phasewatch-Vantage``) and shows that vantage's token (bearer,
compared in constant time). What each agent may push is checked against its assignment,
built here once per targets file (``Assignments``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request, Response, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.agents.server.book import VantageBook
from app.agents.server.collector import VantageCollector
from app.agents.server.evaluations import Evaluations
from app.agents.wire import (
    TARGET_FIELDS_KEPT_BACK,
    VANTAGE_HEADER,
    VERSION_HEADER,
    AgentStatus,
    Assignment,
    assignment_version,
)
from app.clock import utcnow
from app.config import TargetsFile
from app.config.placement import assigned, shortest_interval, token_of
from app.runtime.metrics import RunMetrics
from app.runtime.service import Service
from app.web.deps import ServiceDep
from app.web.errors import ErrorOut

router = APIRouter(prefix="/agent", tags=["agents"])
REFRESH_S = 30.0
_bearer = HTTPBearer(
    auto_error=False, scheme_name="AgentToken", description="The agent's token, one per vantage."
)


def install(app: FastAPI, service: Service, observed: RunMetrics) -> None:
    """What these routes keep between requests, on ``app.state``; the vantages' gauges."""
    app.state.vantages = book = VantageBook()
    app.state.assignments = Assignments()
    app.state.foreground = service.upkeep.foreground
    app.state.evaluations = Evaluations(service.alerts.evaluate_after, service.upkeep.foreground)
    shortest = partial(_shortest, service)
    observed.registry.register(VantageCollector(book, shortest))


def _shortest(service: Service, vantage: str) -> float | None:
    return shortest_interval(service.targets.targets, vantage)


def described(*pairs: tuple[int, str]) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorOut, "description": text} for code, text in pairs}


AUTH_ERRORS = described(
    (401, "No token, an unknown vantage, or a token that is not this vantage's."),
)
PUSH_ERRORS = AUTH_ERRORS | described(
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
        targets.append(sent)  # headers are templates: see app.config.placement
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
    vantages.reported(vantage, utcnow(), state.refused, state.pending, agent_version(request))
    return built.get(service, vantage)[0]


@router.post("/status", status_code=204, responses=AUTH_ERRORS | described((422, "Not valid.")))
def post_status(
    report: AgentStatus, vantage: VantageDep, vantages: BookDep, request: Request
) -> Response:
    """What the agent refused to probe (a variable it lacks) and what its spool holds."""
    vantages.reported(vantage, utcnow(), report.refused, report.pending, agent_version(request))
    return Response(status_code=204)


def agent_version(request: Request) -> str | None:
    return request.headers.get(VERSION_HEADER) or None
