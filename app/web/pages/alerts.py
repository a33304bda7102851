"""GET /alerts and /alerts/{id} — the alert list, and one alert: explanation, transitions,
acknowledge and silence (forms that call the JSON API from the page)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from app.alerts.views import FIRED, STATES, alert_detail, list_alerts
from app.store.reads.paging import BadCursor
from app.web.deps import SessionDep
from app.web.pages.render import error_page, not_found, page

router = APIRouter()

PAGE_SIZE = 50
# The list opens on what fired: an episode that ended without firing is no news ("all").
STATE_CHOICES = (FIRED, "open", "all", *STATES)


@router.get("/alerts", response_class=HTMLResponse, include_in_schema=False)
def alerts_page(
    request: Request,
    session: SessionDep,
    state: str = "",
    target: str = "",
    cursor: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    state = state or FIRED
    if state not in STATE_CHOICES:
        choices = ", ".join(STATE_CHOICES)
        return error_page(request, 400, "Unknown state", f"state must be one of {choices}.")
    try:
        found = list_alerts(
            session,
            state=None if state == "all" else state,
            target=target or None,
            limit=PAGE_SIZE,
            cursor=cursor,
        )
    except BadCursor as exc:
        return error_page(request, 400, "Bad cursor", str(exc))
    return page(
        request,
        "alerts.html.j2",
        section="alerts",
        alerts=found.items,
        next_cursor=found.next_cursor,
        state=state,
        target=target,
        states=STATE_CHOICES,
    )


@router.get("/alerts/{alert_id}", response_class=HTMLResponse, include_in_schema=False)
def alert_page(request: Request, session: SessionDep, alert_id: str) -> HTMLResponse:
    detail = alert_detail(session, alert_id)
    if detail is None:
        return not_found(request, f"alert with id {alert_id!r}")
    return page(request, "alert.html.j2", section="alerts", alert=detail)
