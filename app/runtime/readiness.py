"""Waiting for the database at start: ``serve`` probes meanwhile, and its runs are spooled.

Once the database answers, a ``serve`` that migrates applies the migrations (under the
migration lock, so replicas may do it together); one started with ``--no-migrate`` waits
until somebody else has (``phasewatch db upgrade``). Only then is anything stored: a table
that is not there yet must not get runs set aside as refused.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy import Engine

from app.runtime.health import Health
from app.store.db import describe, is_transient
from app.store.migrate import current_revision, head_revision, upgrade

log = logging.getLogger(__name__)

RETRY_S = 2.0


async def wait_for_schema(engine: Engine, url: str, migrate: bool, health: Health) -> None:
    """Return once the database has the schema this code needs; never fails."""
    said: str | None = None
    head = head_revision()
    while problem := await asyncio.to_thread(_schema_problem, engine, url, migrate, head):
        unreachable = problem.startswith("unreachable")
        health.schema_problem = None if unreachable else problem
        if problem != said:
            log.warning("database %s; runs wait in the spool meanwhile", problem)
            said = problem
        await asyncio.sleep(RETRY_S)
    health.schema_problem = None
    if said is not None:
        log.info("database ready: storing the spooled runs")


def _schema_problem(engine: Engine, url: str, migrate: bool, head: str) -> str | None:
    """Why runs cannot be stored yet, or None; migrates first when ``migrate``."""
    try:
        current = current_revision(engine)
        if current != head and migrate:
            log.info("migrating the database to %s", head)
            upgrade(url)
            current = current_revision(engine)
    except Exception as exc:
        if is_transient(exc):
            return f"unreachable: {describe(exc)}"
        log.debug("database schema not checked (or not migrated)", exc_info=True)
        return f"schema not checked: {describe(exc)}"
    if current == head:
        return None
    return (
        f"schema is at {current or 'nothing'}, this phasewatch needs {head}: "
        "waiting for 'phasewatch db upgrade'"
    )
