"""/api/v1/vantages — where targets are probed from: the server's own vantage and each agent
named in the targets file, with what the server has heard from it."""

from __future__ import annotations

from datetime import datetime, timedelta

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from app.agents.server.agents import Agents
from app.agents.server.watch import latest_of
from app.alerts import silent
from app.clock import utcnow
from app.config.placement import assigned, runs_at
from app.runtime.service import Service
from app.store.db import Session
from app.store.reads.vantagereads import last_runs
from app.web.api.listpaging import LIST_HEADERS, ListLimitParam, page_or_422, paging_headers
from app.web.api.params import CursorParam
from app.web.deps import AgentsDep, ServiceDep, SessionDep
from app.web.errors import errors

router = APIRouter(tags=["vantages"])

LAST_RUN_DAYS = 30  # how far back a vantage's last run is looked for


class VantageOut(BaseModel):
    name: str
    server: bool = Field(description="The server's own vantage (no agent).")
    targets: list[str] = Field(description="Targets probed there.")
    last_seen: datetime | None = Field(description="The agent's last request.")
    last_pushed: datetime | None = Field(description="The agent's last run pushed.")
    last_run: datetime | None = Field(
        None,
        description="Its latest run stored (any replica's, before a restart too) or pushed"
        f" here, within the last {LAST_RUN_DAYS} days; the server's own vantage's too.",
    )
    skew_s: float | None = Field(description="Server receive time − agent send time, last push.")
    version: str | None = Field(description="The agent's phasewatch version.")
    runs_pushed: int = Field(description="Pushes since the server started.")
    pending: int | None = Field(description="Runs the agent said wait in its spool.")
    refused: dict[str, str] = Field(description="Targets it will not probe: why.")
    silent: bool = Field(
        description="Silent now by `vantage_silent`'s own rule: no run for"
        " `vantage_silent_after` (3) of its shortest intervals, counted from a minute after"
        " the server's start for one not heard from since; the server's own vantage, never"
        " while its scheduler keeps to its schedule (docs/agents.md)."
    )
    alert: str | None = Field(
        None, description="Its open `vantage_silent` alert's id (`GET /api/v1/alerts/{id}`)."
    )


@router.get(
    "/vantages",
    response_model=list[VantageOut],
    responses=errors(422) | {200: {"headers": LIST_HEADERS}},
)
def list_vantages(
    service: ServiceDep,
    agents: AgentsDep,
    session: SessionDep,
    request: Request,
    response: Response,
    limit: ListLimitParam = None,
    cursor: CursorParam = None,
) -> list[VantageOut]:
    """The server's vantage first, then each agent of the targets file, by name. With
    ``limit``, a page; the next one's link in ``Link``, the count in ``X-Total-Count``."""
    found = all_vantages(service, agents, session)
    shown, after = page_or_422(found, _order, cursor, limit)
    paging_headers(request, response, len(found), after)
    return shown


def _order(vantage: VantageOut) -> str:
    """The list's order as one text key: the server's own first, then by name."""
    return ("0" if vantage.server else "1") + vantage.name


def all_vantages(service: Service, agents: Agents, session: Session) -> list[VantageOut]:
    """Every vantage: the server's own first, then each agent of the targets file, by name."""
    check = service.upkeep.vantages
    now = check.clock() if check is not None else utcnow()
    own = service.resolved.vantage
    local = [t.name for t in service.targets.targets if runs_at(t, own, server=True)]
    after = service.targets.vantage_silent_after
    names = {own: local} | {
        v: [t.name for t in assigned(service.targets.targets, v)] for v in service.targets.vantages
    }
    stored = last_runs(session, names, now - timedelta(days=LAST_RUN_DAYS))
    heard = {h.vantage: h for h in check.heard(now, after)} if check is not None else {}

    def silent_now(name: str, alert: str | None) -> bool:
        """The alert's rule, on what its check hears (as its alert stands, if unheard)."""
        found = heard.get(name)
        if found is None:
            return alert is not None
        return silent.is_silent(found, agents.book.since, now, after, alert is not None)

    alert = _open_alert(service, own)
    found = [_empty(own, local, alert, stored.get(own), silent_now(own, alert))]
    for name in sorted(service.targets.vantages):
        state = agents.book.get(name)
        targets = assigned(service.targets.targets, name)
        alert = _open_alert(service, name)
        found.append(
            VantageOut(
                name=name,
                server=False,
                targets=[t.name for t in targets],
                last_seen=state.last_seen,
                last_pushed=state.last_pushed,
                last_run=latest_of(stored.get(name), state.last_pushed),
                skew_s=state.skew_s,
                version=state.version,
                runs_pushed=state.runs,
                pending=state.pending,
                refused=state.refused,
                silent=silent_now(name, alert),
                alert=alert,
            )
        )
    return found


def _open_alert(service: Service, vantage: str) -> str | None:
    """The id of ``vantage``'s firing (or recovering) ``vantage_silent``, if any."""
    alerts = dict(service.alerts.evaluator.alerts)  # a copy: evaluations change it meanwhile
    for identity in silent.identities(vantage):
        found = alerts.get(identity)
        if found is not None and found.position.active:
            return found.id
    return None


def _empty(
    name: str, targets: list[str], alert: str | None, last_run: datetime | None, quiet: bool
) -> VantageOut:
    return VantageOut(
        name=name,
        server=True,
        targets=targets,
        last_seen=None,
        last_pushed=None,
        last_run=last_run,
        skew_s=None,
        version=None,
        runs_pushed=0,
        pending=None,
        refused={},
        silent=quiet,
        alert=alert,
    )
