"""What a request handler may reach: the service ``create_app`` built, the server's side of
agents, the metrics, and a database session.

The one seam between the web layer and what ``create_app`` wires: handlers never build
engines or sessions, and never read ``app.state`` (only this module does).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, FastAPI, Request

from app.agents.server.agents import Agents
from app.analysis.maintenance import MaintenanceWindow
from app.runtime.metrics import RunMetrics
from app.runtime.service import Service
from app.runtime.workers import Workers
from app.store.db import Session, StoreError, describe, is_unavailable

log = logging.getLogger(__name__)


def install(
    app: FastAPI, service: Service, agents: Agents, metrics: RunMetrics, workers: Workers
) -> None:
    """What the handlers of ``app`` reach, kept on ``app.state``."""
    app.state.service, app.state.agents, app.state.metrics = service, agents, metrics
    app.state.workers = workers


def service_of(app: FastAPI) -> Service:
    service: Service = app.state.service
    return service


def agents_of(app: FastAPI) -> Agents:
    agents: Agents = app.state.agents
    return agents


def metrics_of(app: FastAPI) -> RunMetrics:
    metrics: RunMetrics = app.state.metrics
    return metrics


def workers_of(app: FastAPI) -> Workers:
    workers: Workers = app.state.workers
    return workers


# async: resolved on the event loop, never a worker thread's hop.
async def get_service(request: Request) -> Service:
    return service_of(request.app)


async def get_agents(request: Request) -> Agents:
    return agents_of(request.app)


async def get_metrics(request: Request) -> RunMetrics:
    return metrics_of(request.app)


async def get_workers(request: Request) -> Workers:
    return workers_of(request.app)


def require_database(service: Annotated[Service, Depends(get_service)]) -> None:
    """A plain def (a worker thread's): waits at most ``health.READ_BUDGET_S`` for the
    database to answer, else ``DatabaseAway`` (a 503, app.web.unavailable)."""
    service.health.require_database()


def get_session(
    service: Annotated[Service, Depends(get_service)], _: Annotated[None, Depends(require_database)]
) -> Iterator[Session]:
    session = service.sessions()
    try:
        yield session
    finally:
        _close(session)


def _close(session: Session) -> None:
    """Closing rolls back the read transaction, which fails on a connection the database
    ended meanwhile (stopped after the answer was made): nothing is lost then, so that is
    logged, not raised into a request that has had its answer."""
    try:
        session.close()
    except StoreError as exc:
        if not is_unavailable(exc):
            raise
        log.info("a read's session closed on a lost connection: %s", describe(exc))


ServiceDep = Annotated[Service, Depends(get_service)]
AgentsDep = Annotated[Agents, Depends(get_agents)]
MetricsDep = Annotated[RunMetrics, Depends(get_metrics)]
WorkersDep = Annotated[Workers, Depends(get_workers)]
SessionDep = Annotated[Session, Depends(get_session)]
# For a route that reads the database without a SessionDep (through the service).
DatabaseAnswers = Depends(require_database)


def maintenance_windows(service: Service) -> list[MaintenanceWindow]:
    """Every maintenance window, the targets file's and the stored ones."""
    maintenance = service.alerts.maintenance
    return [] if maintenance is None else maintenance.windows()
