"""The dashboard: server-rendered pages (Jinja2), charts drawn by the vendored uPlot."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

router = APIRouter()
