"""/api/v1 — breakdown."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
