"""/api/v1 — what-if: one target's measured samples resampled with changes applied, and the
levers now (what each phase halved or removed would give).

A what-if changes nothing: it is a read, and like every read it needs no token (it is a
POST only because its changes are a body). Its work is bounded (app/web/whatifrequest.py).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, status
from pydantic import BaseModel, ConfigDict, Field

from app.analysis.whatif.levers import headline
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
from app.web.deps import SessionDep
from app.web.errors import errors
from app.web.whatifrequest import (
    DEFAULT_RESAMPLES,
    DEFAULT_SPAN,
    MAX_CHANGES,
    MAX_RESAMPLES,
    ChangeError,
    NoSamples,
    Scope,
    levers_now,
    what_if,
)
from app.web.whatifschemas import LeversOut, WhatIfOut

router = APIRouter(tags=["what-if"])

NO_SAMPLES = "The window holds no timed sample of the target."
BOUND_KEYS = ("p50_ms", "p90_ms", "p99_ms", "miss_rate")
WHATIF_ERRORS = errors(
    404,
    409,
    422,
    not_found="No target has this name (or the vantage never ran it).",
    conflict=NO_SAMPLES,
)
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
def post_whatif(name: str, body: WhatIfBody, session: SessionDep) -> dict[str, Any]:
    """End-to-end p50/p90/p99 (with 95 % intervals), the deadline-miss rate, each phase's
    share and the dominant phase, before and after ``changes``, over [from, to) (default: the
    last 7 days), one vantage or all pooled; and the levers now."""
    scope = _scope(session, name, body.vantage, make_window(body.from_, body.to, DEFAULT_SPAN))
    try:
        return what_if(session, scope, body.changes, body.resamples)
    except ChangeError as exc:
        raise bad_request(f"change {exc.token!r}: {exc.reason}") from None
    except NoSamples as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None


@router.get("/targets/{name:path}/levers", response_model=LeversOut, responses=WHATIF_ERRORS)
def get_levers(
    name: str, session: SessionDep, window: LeverWindowDep, vantage: VantageParam = None
) -> dict[str, Any]:
    """For each phase, end-to-end p50/p90/p99 and the miss rate if it halved or vanished,
    the biggest lever first (by the p99 if halved), over [from, to) (default: the last 7
    days). Point estimates: a what-if of one lever gives its intervals."""
    scope = _scope(session, name, vantage, window)
    try:
        found = levers_now(session, scope)
    except NoSamples as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    return {
        "window": {"from": scope.start, "to": scope.end, "vantage": scope.vantage},
        "samples": found.samples,
        "now": {key: found.now.to_json()[key]["value"] for key in BOUND_KEYS},
        "headline": headline(found.levers, found.now.p99_ms.value, found.now.p50_ms.value),
        "levers": [lever.to_json() for lever in found.levers],
    }


def _scope(session: Session, name: str, vantage: str | None, window: Window) -> Scope:
    check_vantage(session, target_id_or_404(session, name), name, vantage)
    return Scope(name, vantage, window.start, window.end)
