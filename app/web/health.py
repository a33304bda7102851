"""``/healthz``: is this process doing its job (it answers 200 while it spools, too)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import text

from app import __version__
from app.service import Service

router = APIRouter()


@router.get("/healthz")
async def healthz(request: Request) -> dict[str, Any]:
    service: Service = request.app.state.service
    database = await asyncio.to_thread(_database_reachable, service)
    spooled = await asyncio.to_thread(service.pipeline.spool.pending)
    return {
        "status": "ok" if database else "degraded",
        "version": __version__,
        "vantage": service.resolved.vantage,
        "database": "reachable" if database else "unreachable",
        "leader": service.leadership.leading,
        # The targets file's: a standby probes none of them, nor does the demo's web app.
        "targets": len(service.targets.targets),
        "spooled_runs": spooled,
    }


def _database_reachable(service: Service) -> bool:
    try:
        with service.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception:
        return False
    return True
