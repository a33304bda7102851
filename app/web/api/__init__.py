"""The JSON API under ``/api/v1``: one module per resource, gathered here."""

from __future__ import annotations

from fastapi import APIRouter

from app.web.api import alerts, breakdown, compare, history, meta, runs, samples, silences, targets

router = APIRouter(prefix="/api/v1")
for module in (meta, targets, runs, samples, breakdown, history, compare, alerts, silences):
    router.include_router(module.router)
