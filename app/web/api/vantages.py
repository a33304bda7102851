"""/api/v1/vantages — where targets are probed from: the server's own vantage and each agent
named in the targets file, with what the server has heard from it."""

from __future__ import annotations

from datetime import datetime, timedelta

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.agents.server.book import is_silent
from app.agents.server.watch import latest_of
from app.alerts import silent
from app.clock import utcnow
from app.config.placement import assigned, runs_at, shortest_interval
from app.runtime.service import Service
from app.store.reads.vantagereads import last_runs
from app.web.deps import AgentsDep, ServiceDep, SessionDep

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
        description="No run for `vantage_silent_after` (3) of its shortest intervals."
    )
    alert: str | None = Field(
        None, description="Its open `vantage_silent` alert's id (`GET /api/v1/alerts/{id}`)."
    )


@router.get("/vantages", response_model=list[VantageOut])
def list_vantages(service: ServiceDep, agents: AgentsDep, session: SessionDep) -> list[VantageOut]:
    """The server's vantage first, then each agent of the targets file, by name."""
    now = utcnow()
    own = service.resolved.vantage
    local = [t.name for t in service.targets.targets if runs_at(t, own, server=True)]
    after = service.targets.vantage_silent_after
    names = {own: local} | {
        v: [t.name for t in assigned(service.targets.targets, v)] for v in service.targets.vantages
    }
    stored = last_runs(session, names, now - timedelta(days=LAST_RUN_DAYS))
    found = [_empty(own, local, _open_alert(service, own), stored.get(own))]
    for name in sorted(service.targets.vantages):
        state = agents.book.get(name)
        targets = assigned(service.targets.targets, name)
        shortest = shortest_interval(service.targets.targets, name)
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
                silent=is_silent(state, shortest, agents.book.since, now, after),
                alert=_open_alert(service, name),
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
    name: str, targets: list[str], alert: str | None, last_run: datetime | None
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
        silent=alert is not None,
        alert=alert,
    )
