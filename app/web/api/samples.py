"""/api/v1 — samples."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
