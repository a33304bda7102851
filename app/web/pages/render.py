"""The template environment every page renders with: filters, globals, the 404 page."""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from app import __version__
from app.clock import utcnow
from app.durations import format_duration
from app.web.pages import view
from app.web.pages.palette import PHASE_COLOURS

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
REFRESH_SECONDS = 30

# Autoescape on for every template: select_autoescape() goes by extension and would leave
# *.html.j2 unescaped.
templates = Jinja2Templates(
    env=jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
)
templates.env.filters.update(
    ms=view.format_ms,
    duration=format_duration,
    share=view.format_share,
    colour=view.phase_colour,
    utc=lambda value: "—" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M"),
    iso=lambda value: "" if value is None else value.astimezone(UTC).isoformat(),
)
templates.env.globals.update(
    version=__version__,
    refresh_seconds=REFRESH_SECONDS,
    phase_colours_json=json.dumps(PHASE_COLOURS),
    rate=view.format_rate,
    low_confidence=view.low_confidence,
    age=view.age_text,
    chip_html=view.chip_html,
    sharebar_html=view.sharebar_html,
    state_html=view.state_html,
    p99_html=view.p99_html,
)


def page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("now", utcnow())
    return templates.TemplateResponse(request, name, context, status_code=status_code)


def error_page(request: Request, status_code: int, title: str, detail: str) -> HTMLResponse:
    """A page's bad input or unknown name: the status and a sentence, never a 500."""
    return page(request, "error.html.j2", status_code, title=title, detail=detail)


def not_found(request: Request, what: str) -> HTMLResponse:
    return error_page(request, 404, "Not found", f"There is no {what}.")
