"""GET /vantages — where targets are probed from: the server and each agent, with what the
server last heard from it (the page of ``GET /api/v1/vantages``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.web.api.vantages import all_vantages
from app.web.deps import AgentsDep, ServiceDep, SessionDep
from app.web.pages.render import page

router = APIRouter()


@router.get("/vantages", response_class=HTMLResponse, include_in_schema=False)
def vantages_page(
    request: Request, service: ServiceDep, agents: AgentsDep, session: SessionDep
) -> HTMLResponse:
    found = all_vantages(service, agents, session)
    return page(request, "vantages.html.j2", section="vantages", vantages=found)
