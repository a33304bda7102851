"""The JSON API under ``/api/v1``: one module per resource, gathered here."""

from __future__ import annotations

from fastapi import APIRouter

from app.web.api import (
    agents,
    alerts,
    breakdown,
    compare,
    history,
    maintenance,
    meta,
    runs,
    samples,
    silences,
    targets,
    vantages,
    whatif,
)
from app.web.errors import errors

# Any request may come with a Host that is not allowed (app.web.hosts), and a read may find
# the database away (app.web.unavailable).
router = APIRouter(prefix="/api/v1", responses=errors(400, 503))
for module in (
    meta,
    targets,
    runs,
    samples,
    breakdown,
    history,
    compare,
    alerts,
    silences,
    maintenance,
    agents,
    vantages,
    whatif,
):
    router.include_router(module.router)
