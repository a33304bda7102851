"""/api/v1 — compare."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
