"""The dashboard: server-rendered pages (Jinja2), charts drawn by the vendored uPlot."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

router = APIRouter()


def _include_pages() -> None:
    # Imported here: the page modules import this package (for its helpers) first.
    from app.web.pages import alerts, apidocs, compare, overview, target, vantages

    for module in (overview, target, alerts, compare, vantages, apidocs):
        router.include_router(module.router)


_include_pages()
