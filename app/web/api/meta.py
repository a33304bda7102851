"""/api/v1 — meta."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
