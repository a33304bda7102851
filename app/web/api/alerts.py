"""/api/v1 — alerts: list and filter, one alert with its transitions, acknowledge."""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, status
from pydantic import BaseModel, ConfigDict, Field

from app.alerts import views
from app.alerts.engine import AlertNotFound, AlertNotOpen
from app.alerts.rows import note_acknowledgement
from app.alerts.views import AlertDetail, AlertView, Page
from app.clock import utcnow
from app.runtime.service import Service
from app.store.db import Session
from app.store.reads.paging import BadCursor
from app.web.api.params import NO_NUL, CursorParam, TargetParam, VantageParam
from app.web.auth import WRITE_ERRORS, WriteAccess
from app.web.deps import ServiceDep, SessionDep
from app.web.errors import errors

router = APIRouter(tags=["alerts"])

StateFilter = Literal["open", "pending", "firing", "recovering", "resolved", "inactive"]
OPEN_MEANS = "open: pending, firing or recovering"
NOT_FOUND = errors(404, 422, not_found="No alert has this id.")
NOT_OPEN = errors(409, conflict="The alert is no longer open.")


class Acknowledgement(BaseModel):
    model_config = ConfigDict(extra="forbid")

    by: str = Field(
        min_length=1, max_length=200, pattern=NO_NUL, description="who accepts the new normal"
    )
    comment: str = Field(
        "", max_length=2000, pattern=NO_NUL, description="why; kept on the transition"
    )


@router.get("/alerts", response_model=Page[AlertView], responses=errors(422))
def list_alerts(
    session: SessionDep,
    state: Annotated[StateFilter | None, Query(description=OPEN_MEANS)] = None,
    target: TargetParam = None,
    vantage: VantageParam = None,
    kind: Annotated[str | None, Query(min_length=1, max_length=100, pattern=NO_NUL)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: CursorParam = None,
) -> Page[AlertView]:
    """Alerts, newest first, filtered; page on with ``next_cursor``."""
    try:
        return views.list_alerts(
            session,
            state=state,
            target=target,
            vantage=vantage,
            kind=kind,
            limit=limit,
            cursor=cursor,
        )
    except BadCursor as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None


@router.get("/alerts/{alert_id}", response_model=AlertDetail, responses=NOT_FOUND)
def get_alert(alert_id: str, session: SessionDep) -> AlertDetail:
    """One alert: its numbers, the sentence that explains it, its transitions oldest first."""
    return _detail_or_404(session, alert_id)


@router.post(
    "/alerts/{alert_id}/acknowledge",
    response_model=AlertDetail,
    dependencies=[WriteAccess],
    responses=WRITE_ERRORS | NOT_FOUND | NOT_OPEN,
)
async def acknowledge(alert_id: str, body: Acknowledgement, service: ServiceDep) -> AlertDetail:
    """Accept the new normal: the alert resolves and its detector re-bases on what is now."""
    await asyncio.to_thread(_acknowledge, service, alert_id, body)
    with service.sessions() as session:
        return _detail_or_404(session, alert_id)


def _acknowledge(service: Service, alert_id: str, body: Acknowledgement) -> None:
    try:
        service.evaluation.acknowledge(alert_id, body.by, utcnow())
    except AlertNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no alert {alert_id!r}") from None
    except AlertNotOpen as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    _keep_comment(service, uuid.UUID(alert_id), body)


def _keep_comment(service: Service, alert_id: uuid.UUID, body: Acknowledgement) -> None:
    """Who acknowledged and why, on the acknowledgement's own transition."""
    with service.sessions.begin() as session:
        note_acknowledgement(session, alert_id, {"by": body.by, "comment": body.comment})


def _detail_or_404(session: Session, alert_id: str) -> AlertDetail:
    detail = views.alert_detail(session, alert_id)
    if detail is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no alert {alert_id!r}")
    return detail
