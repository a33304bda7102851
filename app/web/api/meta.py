"""/api/v1 — meta: the version, the database kind and the schema revision it is at."""

from __future__ import annotations

from fastapi import APIRouter, Request

from app import __version__
from app.store.migrate import current_revision
from app.web.deps import DatabaseAnswers, ServiceDep
from app.web.schemas import IndexOut, VersionOut

router = APIRouter(tags=["meta"])


@router.get("/", response_model=IndexOut)
def index(request: Request) -> IndexOut:
    """Where to start: the version, the OpenAPI document, and every GET endpoint."""
    paths = request.app.openapi()["paths"]
    endpoints = [p for p, ops in paths.items() if p.startswith("/api/v1/") and "get" in ops]
    return IndexOut(
        version=__version__, openapi="/openapi.json", docs="/docs", endpoints=sorted(endpoints)
    )


@router.get("/version", response_model=VersionOut, dependencies=[DatabaseAnswers])
def version(service: ServiceDep) -> VersionOut:
    """What is running: phasewatch's version, the database kind, its Alembic revision."""
    return VersionOut(
        version=__version__,
        database=service.engine.dialect.name,
        schema_revision=current_revision(service.engine),
    )
