"""``/metrics`` in the Prometheus text format."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
