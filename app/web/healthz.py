"""``/healthz``: is this process doing its job, and if not, what is wrong.

It answers 200 while it spools, too, within a second whatever the database does: the
checks behind it run on threads of their own with a short budget (``app.runtime.health``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app import __version__
from app.runtime.service import Service
from app.web.deps import ServiceDep

router = APIRouter()


def replica_share(service: Service) -> dict[str, Any]:
    """This replica's share: live replicas as it sees them, and the targets it owns now."""
    replicas = service.replicas
    return {
        "id": replicas.me,
        "live": replicas.live(),
        "targets": len(replicas.share(service.rules.names())),
        "current": replicas.stale_s() is None and not replicas.waiting,
    }


@router.get("/healthz")
async def healthz(service: ServiceDep) -> dict[str, Any]:
    await service.health.refresh()
    report = service.health.report()
    return {
        "status": report["status"],
        "version": __version__,
        "vantage": service.resolved.vantage,
        "database": report["database"],
        "leader": service.leadership.leading,  # keeps retention
        "replica": replica_share(service),
        # The targets file's: a standby probes none of them, nor does the demo's web app.
        "targets": len(service.targets.targets),
        "spooled_runs": report["spooled_runs"],
        "spool": report["spool"],
        "problems": report["problems"],
    }
