"""/api/v1 — runs."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
