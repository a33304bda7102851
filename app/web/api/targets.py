"""/api/v1 — targets."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
