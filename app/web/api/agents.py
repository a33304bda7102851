"""/api/v1/agent — what agents fetch (their assignment), report (their status) and push
(their runs). Thin: the server's side of agents is ``app.agents.server``; here, only HTTP.

An agent names its vantage (``X-Phasewatch-Vantage``) and shows that vantage's token
(bearer). A refused push (``app.agents.server.refusals``) is answered with its status.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.agents.server.body import Body
from app.agents.server.refusals import PushRefused
from app.agents.wire import (
    CONFIG_HEADER,
    MAX_BATCH_RUNS,
    SENT_AT_HEADER,
    VANTAGE_HEADER,
    VERSION_HEADER,
    AgentStatus,
    Assignment,
    BatchAnswer,
    PushAnswer,
)
from app.web.deps import AgentsDep
from app.web.errors import ErrorOut

router = APIRouter(prefix="/agent", tags=["agents"])
_bearer = HTTPBearer(
    auto_error=False, scheme_name="AgentToken", description="The agent's token, one per vantage."
)


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
BATCH_ERRORS = PUSH_ERRORS | described(
    (413, f"More than {MAX_BATCH_RUNS} runs, or a body larger than the server takes."),
    (422, 'The body is not `{"runs": [...]}`.'),
)


def _body(schema: dict[str, Any], what: str) -> dict[str, Any]:
    """The request body a push route reads itself (gzip, bounded): declared, since no
    parameter of the route says it."""
    return {
        "requestBody": {
            "required": True,
            "description": f"{what}; `Content-Encoding: gzip` or none.",
            "content": {"application/json": {"schema": schema}},
        }
    }


RUN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "target", "vantage", "started_at", "status"],
    "description": "A `RunRecord` as the spool keeps it (docs/agents.md).",
}
RUN_BODY = _body(RUN_SCHEMA, "One run")
BATCH_BODY = _body(
    {
        "type": "object",
        "required": ["runs"],
        "properties": {"runs": {"type": "array", "maxItems": MAX_BATCH_RUNS, "items": RUN_SCHEMA}},
    },
    f"At most {MAX_BATCH_RUNS} runs",
)


async def agent_vantage(
    agents: AgentsDep,
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    vantage = request.headers.get(VANTAGE_HEADER, "")
    given = credentials.credentials if credentials is not None else ""
    if not agents.may_speak_as(vantage, given):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            f"an agent needs {VANTAGE_HEADER} and that vantage's bearer token",
            headers={"WWW-Authenticate": 'Bearer realm="phasewatch-agent"'},
        )
    return vantage


VantageDep = Annotated[str, Depends(agent_vantage)]


@router.get("/config", response_model=Assignment, responses=AUTH_ERRORS)
def get_config(agents: AgentsDep, vantage: VantageDep, request: Request) -> Assignment:
    """The targets this agent probes, with header templates (never their values)."""
    return agents.assignment(vantage, agent_version(request))


@router.post("/status", status_code=204, responses=AUTH_ERRORS | described((422, "Not valid.")))
def post_status(
    report: AgentStatus, agents: AgentsDep, vantage: VantageDep, request: Request
) -> Response:
    """What the agent refused to probe (a variable it lacks), what its spool holds, and the
    due runs its scheduler did not start."""
    agents.reported(vantage, report, agent_version(request))
    return Response(status_code=204)


@router.post("/runs", response_model=PushAnswer, responses=PUSH_ERRORS, openapi_extra=RUN_BODY)
async def push_run(agents: AgentsDep, vantage: VantageDep, request: Request) -> Response:
    """Store one run the agent measured (``RunRecord`` JSON); a replay stores nothing."""
    with _answered():
        answer = await agents.push_run(vantage, *_push(request))
    return _answer(answer)


@router.post(
    "/batches", response_model=BatchAnswer, responses=BATCH_ERRORS, openapi_extra=BATCH_BODY
)
async def push_batch(agents: AgentsDep, vantage: VantageDep, request: Request) -> Response:
    """Store several runs (``{"runs": [RunRecord JSON, ...]}``); each run's outcome in order."""
    with _answered():
        answer = await agents.push_batch(vantage, *_push(request))
    return _answer(answer)


def agent_version(request: Request) -> str | None:
    return request.headers.get(VERSION_HEADER) or None


def _push(request: Request) -> tuple[Body, datetime | None, str | None]:
    """A push's body, the agent's send time, and its version."""
    headers = request.headers
    body = Body(
        request.stream(),
        headers.get("content-length", ""),
        headers.get("content-encoding", "identity"),
    )
    return body, _sent_at(request), agent_version(request)


@contextmanager
def _answered() -> Iterator[None]:
    try:
        yield
    except PushRefused as exc:
        raise HTTPException(exc.status, str(exc), headers=exc.headers()) from exc


def _answer(answer: PushAnswer | BatchAnswer) -> Response:
    return Response(
        answer.model_dump_json(),
        media_type="application/json",
        headers={CONFIG_HEADER: answer.config},
    )


def _sent_at(request: Request) -> datetime | None:
    try:
        sent = datetime.fromisoformat(request.headers.get(SENT_AT_HEADER, ""))
    except ValueError:
        return None
    return sent if sent.tzinfo is not None else None
