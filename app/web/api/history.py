"""/api/v1 — history."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
