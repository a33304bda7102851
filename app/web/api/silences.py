"""/api/v1 — silences."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
